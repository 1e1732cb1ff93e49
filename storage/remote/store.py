"""One object store under one URL prefix: ``file:///dir`` or ``s3://bucket/prefix``.

The storage location is configured with Kafka's ``rsm.config.`` prefix (KIP-405's
``remote.log.storage.manager.impl.prefix``); ``options`` are those settings with the
prefix removed:

- ``url`` — ``file:///a/dir`` (any mounted filesystem; created if missing) or
  ``s3://bucket/prefix``;
- ``s3.endpoint``, ``s3.region``, ``s3.access.key.id``, ``s3.secret.access.key`` — an
  S3-compatible endpoint and its credentials; unset ones come from the usual AWS
  environment variables (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``).

Invariants:
- keys are relative to the prefix and use ``/``; a ``put`` is atomic (a reader sees the
  old object or the whole new one — S3 PUT semantics, and obstore's local store
  writes a temporary file and renames it);
- every failure of the store surfaces as ``RemoteStorageError`` naming the endpoint,
  the operation, the key and the cause in words a user can act on (wrong credentials,
  no such bucket, access denied, bucket full, endpoint unreachable, throttled, body cut
  short, no answer in time); a
  missing object is ``RemoteObjectNotFound`` (a subclass); ``transient`` says whether
  trying again later may succeed;
- transient S3 failures (5xx such as 503 SlowDown, refused or dropped connections, a
  body cut mid-way, timeouts) are retried inside one call with exponential backoff and
  jitter, bounded by ``retry.max.retries`` and ``retry.timeout.ms`` (obstore's client
  retry; a ranged GET resumes where a cut body stopped); the caller's own retry loop
  (the broker's ``remote.log.manager.task.retry.backoff.*``) sits above that.

Retry and timeout settings (``rsm.config.`` prefix, S3 only; defaults in brackets):
``retry.max.retries`` [3], ``retry.backoff.ms`` [100], ``retry.backoff.max.ms`` [2000],
``retry.timeout.ms`` [30000], ``request.timeout.ms`` [30000], ``connect.timeout.ms`` [5000].
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlparse

import obstore
from obstore.store import LocalStore, S3Store

from storage.errors import StorageError

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Config


class RemoteStorageError(StorageError):
    """The object store failed or refused an operation (KAFKA_STORAGE_ERROR, 56).

    ``op``, ``key`` and ``endpoint`` say what was asked of whom; ``transient`` is True
    when trying again later may succeed (unreachable, throttled, 5xx, cut body) and False
    when a person must act (credentials, bucket, permissions, bad range)."""

    def __init__(self, message: str, *, op: str = "", key: str = "", endpoint: str = "",
                 transient: bool = False) -> None:
        super().__init__(message)
        self.op, self.key, self.endpoint, self.transient = op, key, endpoint, transient


class RemoteObjectNotFound(RemoteStorageError):
    """The object asked for does not exist."""


class ObjectInfo(NamedTuple):
    key: str
    size: int


_ENV = {
    "s3.endpoint": "AWS_ENDPOINT_URL",
    "s3.region": "AWS_REGION",
    "s3.access.key.id": "AWS_ACCESS_KEY_ID",
    "s3.secret.access.key": "AWS_SECRET_ACCESS_KEY",
}

#: retry/timeout option -> default (milliseconds, or a count for max.retries).
RETRY_DEFAULTS = {
    "retry.max.retries": 3,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 2000,
    "retry.timeout.ms": 30000,
    "request.timeout.ms": 30000,
    "connect.timeout.ms": 5000,
}

#: what Ceph (QuotaExceeded), MinIO (XMinioStorageFull, 507) and others answer when full.
_FULL_CODES = {"QuotaExceeded", "XMinioStorageFull", "InsufficientStorage"}
_CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
                     "ExpiredToken", "AuthorizationHeaderMalformed", "InvalidSecurity"}


def _int_option(opts: Mapping[str, str], name: str) -> int:
    raw = opts.get(name)
    if raw is None or raw == "":
        return RETRY_DEFAULTS[name]
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise RemoteStorageError(
            f"rsm.config.{name} must be a non-negative integer, got {raw!r}")
    return value


class ObjectStore:
    """Blocking access to one bucket prefix (the broker calls it from worker threads)."""

    def __init__(self, url: str, options: Mapping[str, str] | None = None, *,
                 read_only: bool = False) -> None:
        self.url = url
        # A read-only store (a read replica's) refuses put and delete before any request.
        self.read_only = read_only
        opts = dict(options or {})
        parsed = urlparse(url)
        self.bucket = ""
        if parsed.scheme == "file":
            root = Path(parsed.path)
            root.mkdir(parents=True, exist_ok=True)
            self.endpoint = ""
            self._store: Any = LocalStore(root)
        elif parsed.scheme == "s3":
            if not parsed.netloc:
                raise RemoteStorageError(f"rsm.config.url {url!r}: the bucket name is missing")

            def opt(name: str) -> str | None:
                return opts.get(name) or os.environ.get(_ENV[name]) or None
            config: S3Config = {}
            endpoint = opt("s3.endpoint")
            region = opt("s3.region") or "us-east-1"
            if endpoint:
                config["endpoint"] = endpoint
                config["virtual_hosted_style_request"] = False
            config["region"] = region
            key_id, secret = opt("s3.access.key.id"), opt("s3.secret.access.key")
            if key_id and secret:
                config["access_key_id"] = key_id
                config["secret_access_key"] = secret
            ms = {name: _int_option(opts, name) for name in RETRY_DEFAULTS}
            retry: RetryConfig = {
                "max_retries": ms["retry.max.retries"],
                "retry_timeout": timedelta(milliseconds=ms["retry.timeout.ms"]),
                "backoff": {"init_backoff": timedelta(milliseconds=ms["retry.backoff.ms"]),
                            "max_backoff": timedelta(milliseconds=ms["retry.backoff.max.ms"]),
                            "base": 2},
            }
            client: ClientConfig = {
                "timeout": timedelta(milliseconds=ms["request.timeout.ms"]),
                "connect_timeout": timedelta(milliseconds=ms["connect.timeout.ms"]),
                "allow_http": bool(endpoint and endpoint.startswith("http://")),
            }
            self.bucket = parsed.netloc
            self.endpoint = endpoint or f"AWS S3 ({region})"
            prefix = parsed.path.strip("/")
            self._store = S3Store(parsed.netloc, prefix=prefix or None,
                                  config=config, client_options=client, retry_config=retry)
        else:
            raise RemoteStorageError(
                f"rsm.config.url {url!r}: expected file:///a/dir or s3://bucket/prefix")

    def _fail(self, op: str, key: str, exc: Exception) -> RemoteStorageError:
        cause, missing, transient = self._cause(op, exc)
        text = str(exc)
        retried = re.search(r"after (\d+) retries", text)
        after = f" after {retried.group(1)} retries" if retried and retried.group(1) != "0" else ""
        where = f" at {self.endpoint}" if self.endpoint else ""
        cls = RemoteObjectNotFound if missing else RemoteStorageError
        return cls(f"remote storage {self.url}{where}: {op} {key!r} failed{after}: {cause}",
                   op=op, key=key, endpoint=self.endpoint, transient=transient)

    def _cause(self, op: str, exc: Exception) -> tuple[str, bool, bool]:
        """(what went wrong in a user's words, is it a missing object, is it transient)."""
        text = str(exc)
        head, _, debug = text.partition("Debug source:")
        code = _xml(head, "Code")
        message = _xml(head, "Message")
        status_m = re.search(r"status code: (\d{3})", head)
        status = int(status_m.group(1)) if status_m else 0
        s3 = f"S3 {status} {code}" + (f": {message}" if message else "") if code else ""
        if code == "NoSuchBucket":
            return (f"bucket {self.bucket!r} does not exist ({s3}); create it or fix "
                    "rsm.config.url", False, False)
        if isinstance(exc, FileNotFoundError) or code == "NoSuchKey":
            return "no such object", True, False
        if code in _FULL_CODES or status == 507:
            return (f"the bucket or the server is full ({s3 or 'HTTP 507'}); free space or "
                    "raise the quota", False, False)
        if code in _CREDENTIAL_CODES or status == 401 or "Unauthenticated" in type(exc).__name__:
            return (f"the endpoint rejected the credentials ({s3 or head.strip()}); check "
                    "rsm.config.s3.access.key.id and rsm.config.s3.secret.access.key "
                    "(or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)", False, False)
        if status == 403 or code == "AccessDenied":
            return (f"access denied ({s3 or 'S3 403'}); the credentials may not {op} in "
                    f"bucket {self.bucket!r}", False, False)
        if status == 416 or code == "InvalidRange":
            return f"range not satisfiable ({s3 or 'S3 416'})", False, False
        if status >= 500:
            return f"the server answered {s3 or status}", False, True
        if "kind: Timeout" in debug or "TimedOut" in debug:
            return ("no answer within rsm.config.request.timeout.ms (connected, but the "
                    "server did not respond in time)", False, True)
        if "kind: Connect" in debug or "error sending request" in head:
            return (f"cannot connect to {self.endpoint or 'the endpoint'} (refused or "
                    "unreachable); is the S3 server running and rsm.config.s3.endpoint "
                    "right?", False, True)
        if "IncompleteBody" in debug or "UnexpectedEof" in debug or "kind: Body" in debug:
            return "the response body was cut short (the connection closed mid-way)", False, True
        if s3:
            return f"the server refused it ({s3})", False, False
        first = head.strip().splitlines()[0] if head.strip() else type(exc).__name__
        return first, False, False

    def _refuse_write(self, op: str, key: str) -> None:
        if self.read_only:
            raise RemoteStorageError(f"{op} {key!r} refused: {self.url} is opened read-only",
                                     op=op, key=key)

    def put(self, key: str, data: bytes | bytearray | memoryview | Path) -> None:
        self._refuse_write("put", key)
        try:
            obstore.put(self._store, key, data)
        except Exception as exc:
            raise self._fail("put", key, exc) from exc

    def get(self, key: str) -> bytes:
        try:
            return bytes(obstore.get(self._store, key).bytes())
        except Exception as exc:
            raise self._fail("get", key, exc) from exc

    def head(self, key: str) -> ObjectInfo:
        """The key's size (RemoteObjectNotFound if it does not exist)."""
        try:
            meta = obstore.head(self._store, key)
        except Exception as exc:
            raise self._fail("head", key, exc) from exc
        return ObjectInfo(key, meta["size"])

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of ``key`` (fewer when the object ends first, none when it
        ends before ``start``)."""
        if end <= start:
            return b""
        try:
            return bytes(obstore.get_range(self._store, key, start=start, end=end))
        except Exception as exc:
            failure = self._fail("get_range", key, exc)
            if "range not satisfiable" not in str(failure) and "range was invalid" not in str(exc):
                raise failure from exc
        # Some servers refuse a range that runs past the end instead of clamping it as
        # S3 does; ask for the size and read what there is.
        size = self.head(key).size
        if start >= size:
            return b""
        return self.get_range(key, start, min(end, size))

    def list(self, prefix: str) -> list[ObjectInfo]:
        try:
            return [ObjectInfo(o["path"], o["size"])
                    for chunk in obstore.list(self._store, prefix=prefix) for o in chunk]
        except Exception as exc:
            raise self._fail("list", prefix, exc) from exc

    def delete(self, key: str) -> None:
        """Delete ``key``; deleting a missing key is not an error."""
        self._refuse_write("delete", key)
        try:
            obstore.delete(self._store, key)
        except Exception as exc:
            failure = self._fail("delete", key, exc)
            if not isinstance(failure, RemoteObjectNotFound):
                raise failure from exc


def _xml(text: str, tag: str) -> str:
    m = re.search(f"<{tag}>(.*?)</{tag}>", text, re.S)
    return m.group(1).strip() if m else ""


def open_store(options: Mapping[str, str], *, read_only: bool = False) -> ObjectStore:
    """The store the ``rsm.config.*`` settings name (``options`` without the prefix);
    ``read_only`` refuses every put and delete (RemoteStorageError)."""
    url = options.get("url")
    if not url:
        raise RemoteStorageError("rsm.config.url is not set")
    return ObjectStore(url, options, read_only=read_only)
