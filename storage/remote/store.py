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
- every failure of the store surfaces as ``RemoteStorageError`` naming the operation,
  the key and the cause; a missing object is ``RemoteObjectNotFound`` (a subclass).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlparse

import obstore
from obstore.store import LocalStore, S3Store

from storage.errors import StorageError


class RemoteStorageError(StorageError):
    """The object store failed or refused an operation (KAFKA_STORAGE_ERROR, 56)."""


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


class ObjectStore:
    """Blocking access to one bucket prefix (the broker calls it from worker threads)."""

    def __init__(self, url: str, options: Mapping[str, str] | None = None) -> None:
        self.url = url
        opts = dict(options or {})
        parsed = urlparse(url)
        if parsed.scheme == "file":
            root = Path(parsed.path)
            root.mkdir(parents=True, exist_ok=True)
            self._store: Any = LocalStore(root)
        elif parsed.scheme == "s3":
            def opt(name: str) -> str | None:
                return opts.get(name) or os.environ.get(_ENV[name]) or None
            config: dict[str, Any] = {}
            endpoint = opt("s3.endpoint")
            if endpoint:
                config["endpoint"] = endpoint
                config["allow_http"] = endpoint.startswith("http://")
                config["virtual_hosted_style_request"] = False
            config["region"] = opt("s3.region") or "us-east-1"
            key_id, secret = opt("s3.access.key.id"), opt("s3.secret.access.key")
            if key_id and secret:
                config["access_key_id"] = key_id
                config["secret_access_key"] = secret
            prefix = parsed.path.strip("/")
            self._store = S3Store(parsed.netloc, prefix=prefix or None,
                                  config=config)  # type: ignore[arg-type]
        else:
            raise RemoteStorageError(
                f"rsm.config.url {url!r}: expected file:///a/dir or s3://bucket/prefix")

    def _fail(self, op: str, key: str, exc: Exception) -> RemoteStorageError:
        cls = RemoteObjectNotFound if isinstance(exc, FileNotFoundError) else RemoteStorageError
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return cls(f"remote storage {self.url}: {op} {key!r} failed: {first}")

    def put(self, key: str, data: bytes | bytearray | memoryview | Path) -> None:
        try:
            obstore.put(self._store, key, data)
        except Exception as exc:
            raise self._fail("put", key, exc) from exc

    def get(self, key: str) -> bytes:
        try:
            return bytes(obstore.get(self._store, key).bytes())
        except Exception as exc:
            raise self._fail("get", key, exc) from exc

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of ``key`` (fewer when the object ends first)."""
        if end <= start:
            return b""
        try:
            return bytes(obstore.get_range(self._store, key, start=start, end=end))
        except Exception as exc:
            raise self._fail("get_range", key, exc) from exc

    def list(self, prefix: str) -> list[ObjectInfo]:
        try:
            return [ObjectInfo(o["path"], o["size"])
                    for chunk in obstore.list(self._store, prefix=prefix) for o in chunk]
        except Exception as exc:
            raise self._fail("list", prefix, exc) from exc

    def delete(self, key: str) -> None:
        """Delete ``key``; deleting a missing key is not an error."""
        try:
            obstore.delete(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise self._fail("delete", key, exc) from exc


def open_store(options: Mapping[str, str]) -> ObjectStore:
    """The store the ``rsm.config.*`` settings name (``options`` without the prefix)."""
    url = options.get("url")
    if not url:
        raise RemoteStorageError("rsm.config.url is not set")
    return ObjectStore(url, options)
