"""storage/remote/store.py against a real S3 server (s3proxy; SeaweedFS with
CHRONOLOG_S3_SERVER=seaweedfs) and against file://, the same tests for both; then the
faults a user meets, each with the message they see.

The S3 faults come from the real server (wrong credentials, missing bucket), from a
closed port, and from tests/helpers/faultproxy.py in front of the real server (503
SlowDown, 500, a body cut mid-way, 403 AccessDenied), whose log counts the retries.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.remote.store import (
    ObjectInfo,
    ObjectStore,
    RemoteObjectNotFound,
    RemoteStorageError,
    open_store,
)
from tests.helpers.broker import free_port_number
from tests.helpers.faultproxy import FaultProxy
from tests.helpers.s3server import S3Bucket
from tests.helpers.threads import run_on_threads

#: Retries fast enough for a test and still visible in the proxy's log.
FAST_RETRY = {"retry.max.retries": "3", "retry.backoff.ms": "20",
              "retry.backoff.max.ms": "100", "retry.timeout.ms": "10000"}


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "file":
        return ObjectStore(f"file://{tmp_path}/bucket")
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    return open_store(bucket.options)


@pytest.fixture
def proxy(s3_bucket: S3Bucket) -> Iterator[FaultProxy]:
    p = FaultProxy(s3_bucket.server.port)
    yield p
    p.close()


def through(proxy: FaultProxy, bucket: S3Bucket, **extra: str) -> ObjectStore:
    return open_store({**bucket.options, **FAST_RETRY,
                       "s3.endpoint": f"http://127.0.0.1:{proxy.port}", **extra})


# -- the same behaviour on S3 and file:// ---------------------------------------------

def test_put_get_and_ranges_return_exactly_the_bytes_written(store: ObjectStore) -> None:
    data = bytes(range(256)) * 4099  # ~1 MiB, not a multiple of any chunk size
    store.put("t-0/00000000000000000000-abc.log", data)
    assert store.get("t-0/00000000000000000000-abc.log") == data
    for start, end in [(0, 1), (5, 70_000), (len(data) - 10, len(data)), (1000, 1000)]:
        assert store.get_range("t-0/00000000000000000000-abc.log", start, end) == data[start:end]


def test_get_range_past_the_end_returns_what_exists(store: ObjectStore) -> None:
    store.put("k", b"0123456789")
    assert store.get_range("k", 7, 100) == b"789"
    assert store.get_range("k", 10, 20) == b""
    assert store.get_range("k", 50, 60) == b""


def test_put_from_a_file_path_uploads_its_contents(store: ObjectStore, tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000042.log"
    segment.write_bytes(b"batch" * 3000)
    store.put("t-0/42.log", segment)
    assert store.get("t-0/42.log") == segment.read_bytes()
    assert store.head("t-0/42.log") == ObjectInfo("t-0/42.log", 15000)


def test_list_returns_every_key_under_a_prefix_with_its_size(store: ObjectStore) -> None:
    written = {f"topic-{p}/{n:020d}.log": b"x" * (n + 1) for p in (0, 1) for n in range(3)}
    written["topic-10/0.log"] = b"other partition, shares the text prefix 'topic-1'"
    for key, value in written.items():
        store.put(key, value)
    got = sorted(store.list("topic-1/"))
    assert got == sorted(ObjectInfo(k, len(v)) for k, v in written.items()
                         if k.startswith("topic-1/"))
    assert sorted(store.list("")) == sorted(ObjectInfo(k, len(v)) for k, v in written.items())
    assert store.list("nothing-here/") == []


def test_delete_removes_and_deleting_a_missing_key_is_not_an_error(store: ObjectStore) -> None:
    store.put("a/1", b"1")
    store.put("a/2", b"2")
    store.delete("a/1")
    store.delete("a/1")
    store.delete("never/existed")
    assert store.list("a/") == [ObjectInfo("a/2", 1)]
    with pytest.raises(RemoteObjectNotFound):
        store.get("a/1")


def test_missing_key_is_remote_object_not_found_naming_op_and_key(store: ObjectStore) -> None:
    for call, op in [(lambda: store.get("no/such.log"), "get"),
                     (lambda: store.get_range("no/such.log", 0, 10), "get_range"),
                     (lambda: store.head("no/such.log"), "head")]:
        with pytest.raises(RemoteObjectNotFound) as e:
            call()
        assert e.value.op == op and e.value.key == "no/such.log" and not e.value.transient
        assert f"{op} 'no/such.log' failed: no such object" in str(e.value)
        assert store.url in str(e.value)


def test_overwrite_is_atomic_readers_see_old_or_new_never_a_mix(store: ObjectStore) -> None:
    """A reader polling while a writer replaces a 4 MiB object sees only whole versions."""
    versions = [bytes([v]) * (4 << 20) for v in range(4)]
    store.put("manifest", versions[0])
    seen: set[bytes] = set()
    bad: list[str] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            got = store.get("manifest")
            if got not in versions:
                bad.append(f"{len(got)} bytes, first {got[:1]!r} last {got[-1:]!r}")
            seen.add(got[:1])

    t = threading.Thread(target=reader)
    t.start()
    try:
        for v in versions[1:] * 2:
            store.put("manifest", v)
    finally:
        done.set()
        t.join()
    assert bad == []
    assert store.get("manifest") == versions[-1]


def test_endpoint_and_credentials_come_from_the_aws_environment_when_unset(
        s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    o = s3_bucket.options
    monkeypatch.setenv("AWS_ENDPOINT_URL", o["s3.endpoint"])
    monkeypatch.setenv("AWS_REGION", o["s3.region"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", o["s3.access.key.id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", o["s3.secret.access.key"])
    store = open_store({"url": o["url"]})
    store.put("from-env", b"1")
    assert store.list("") == [ObjectInfo("from-env", 1)]
    # The rsm.config.* settings win over the environment.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(RemoteStorageError, match="rejected the credentials"):
        open_store({"url": o["url"]}).get("from-env")
    assert open_store(o).get("from-env") == b"1"


def test_one_store_serves_many_threads_at_once(store: ObjectStore) -> None:
    """The broker calls one store from its worker threads: 8 threads, each putting and
    reading back its own keys, all see exactly their bytes."""
    errors: list[str] = []

    def work(n: int) -> None:
        for i in range(10):
            key, data = f"t-{n}/{i}.log", os.urandom(1000 + 97 * i)
            store.put(key, data)
            if store.get(key) != data or store.get_range(key, 10, 20) != data[10:20]:
                errors.append(key)

    assert run_on_threads(work, 8) == []
    assert errors == []
    assert len(store.list("")) == 80


# -- faults on S3: clear errors, retries with backoff ---------------------------------

def test_wrong_secret_names_the_credential_settings(s3_bucket: S3Bucket) -> None:
    store = open_store({**s3_bucket.options, "s3.secret.access.key": "not-the-secret"})
    with pytest.raises(RemoteStorageError) as e:
        store.put("k", b"v")
    msg = str(e.value)
    assert not isinstance(e.value, RemoteObjectNotFound) and not e.value.transient
    assert f"at {s3_bucket.server.endpoint}: put 'k' failed" in msg
    assert "rejected the credentials (S3 403 SignatureDoesNotMatch" in msg
    assert "rsm.config.s3.access.key.id and rsm.config.s3.secret.access.key" in msg


def test_unknown_access_key_is_a_credentials_error_too(s3_bucket: S3Bucket) -> None:
    store = open_store({**s3_bucket.options, "s3.access.key.id": "nobody"})
    with pytest.raises(RemoteStorageError, match=r"list 'p/' failed: the endpoint rejected "
                       r"the credentials \(S3 403 InvalidAccessKeyId"):
        store.list("p/")


def test_missing_bucket_says_so_for_every_operation(s3_bucket: S3Bucket) -> None:
    store = open_store({**s3_bucket.options, "url": "s3://no-such-bucket-here/tier"})
    for op, call in [("get", lambda: store.get("k")), ("list", lambda: store.list("")),
                     ("put", lambda: store.put("k", b"v"))]:
        if op == "put" and s3_bucket.server.creates_bucket_on_put:
            continue  # SeaweedFS makes the bucket for an admin identity's PUT
        with pytest.raises(RemoteStorageError) as e:
            call()
        assert not isinstance(e.value, RemoteObjectNotFound), op
        assert str(e.value).endswith(
            f"{op} {'' if op == 'list' else 'k'!r} failed: bucket 'no-such-bucket-here' does "
            "not exist (S3 404 NoSuchBucket: The specified bucket does not exist); create it "
            "or fix rsm.config.url")


def test_delete_does_not_take_a_missing_bucket_for_a_missing_key(
        proxy: FaultProxy, s3_bucket: S3Bucket) -> None:
    """S3 answers DeleteObjects on a missing bucket with 404 NoSuchBucket (s3proxy
    answers 200, so the proxy stands in): deleting a missing *key* is fine, a missing
    bucket is not."""
    store = through(proxy, s3_bucket)
    proxy.fail(1, method="POST", status=404, code="NoSuchBucket",
               message="The specified bucket does not exist")
    with pytest.raises(RemoteStorageError, match=r"delete 'k' failed: bucket '.*' does not "
                       r"exist \(S3 404 NoSuchBucket"):
        store.delete("k")
    store.delete("k")
    assert proxy.outcomes("POST") == ["404 NoSuchBucket", "200"]


def test_closed_port_is_retried_then_reported_as_unreachable(s3_bucket: S3Bucket) -> None:
    port = free_port_number()  # nothing listens there
    store = open_store({**s3_bucket.options, **FAST_RETRY,
                        "s3.endpoint": f"http://127.0.0.1:{port}"})
    started = time.monotonic()
    with pytest.raises(RemoteStorageError) as e:
        store.put("t-0/1.log", b"v")
    assert time.monotonic() - started < 10
    msg = str(e.value)
    assert e.value.transient and e.value.op == "put" and e.value.key == "t-0/1.log"
    assert f"at http://127.0.0.1:{port}: put 't-0/1.log' failed after 3 retries" in msg
    assert f"cannot connect to http://127.0.0.1:{port}" in msg
    assert "rsm.config.s3.endpoint" in msg


def test_a_server_that_never_answers_times_out_per_request(s3_bucket: S3Bucket) -> None:
    """Connected (the kernel's backlog accepts) but no byte comes back: each try ends
    after request.timeout.ms, and the error says it was a timeout, not a refusal."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as silent:
        port = silent.getsockname()[1]
        store = open_store({**s3_bucket.options, **FAST_RETRY, "retry.max.retries": "1",
                            "request.timeout.ms": "300",
                            "s3.endpoint": f"http://127.0.0.1:{port}"})
        started = time.monotonic()
        with pytest.raises(RemoteStorageError) as e:
            store.get("t-0/1.index")
        elapsed = time.monotonic() - started
    assert 0.6 <= elapsed < 5  # two tries of 300 ms each
    assert e.value.transient
    assert str(e.value).endswith(
        "get 't-0/1.index' failed after 1 retries: no answer within "
        "rsm.config.request.timeout.ms (connected, but the server did not respond in time)")


@pytest.mark.parametrize("status,code", [(503, "SlowDown"), (500, "InternalError")])
def test_server_errors_are_retried_with_backoff_until_success(
        proxy: FaultProxy, s3_bucket: S3Bucket, status: int, code: str) -> None:
    store = through(proxy, s3_bucket)
    proxy.fail(2, method="PUT", status=status, code=code)
    store.put("seg", b"payload")
    assert proxy.outcomes("PUT") == [f"{status} {code}", f"{status} {code}", "200"]
    proxy.fail(3, method="GET", status=status, code=code)
    assert store.get("seg") == b"payload"
    assert proxy.outcomes("GET") == [f"{status} {code}"] * 3 + ["200"]


def test_throttling_past_the_retry_budget_is_a_transient_error(
        proxy: FaultProxy, s3_bucket: S3Bucket) -> None:
    store = through(proxy, s3_bucket)
    proxy.fail(100, method="PUT")
    with pytest.raises(RemoteStorageError) as e:
        store.put("t-0/7.log", b"v")
    assert proxy.outcomes("PUT") == ["503 SlowDown"] * 4  # 1 try + 3 retries
    assert e.value.transient
    assert re.search(r"put 't-0/7.log' failed after 3 retries: the server answered "
                     r"S3 503 SlowDown: Please reduce your request rate\.$", str(e.value))


def test_every_retry_waits_at_least_the_initial_backoff(
        proxy: FaultProxy, s3_bucket: S3Bucket) -> None:
    """Backoff starts at retry.backoff.ms and grows with jitter up to .max.ms: three
    retries at 200 ms wait >= 0.6 s in all; at 20 ms they are done much sooner."""
    slow = through(proxy, s3_bucket, **{"retry.backoff.ms": "200", "retry.backoff.max.ms": "1000"})
    proxy.fail(100, method="GET")
    started = time.monotonic()
    with pytest.raises(RemoteStorageError, match="after 3 retries"):
        slow.get("x")
    slow_wait = time.monotonic() - started
    assert len(proxy.outcomes("GET")) == 4
    assert 0.6 <= slow_wait < 10


def test_retries_zero_fails_at_the_first_error(proxy: FaultProxy, s3_bucket: S3Bucket) -> None:
    store = through(proxy, s3_bucket, **{"retry.max.retries": "0"})
    proxy.fail(1, method="PUT")
    with pytest.raises(RemoteStorageError, match=r"put 'k' failed: the server answered S3 503"):
        store.put("k", b"v")
    assert proxy.outcomes("PUT") == ["503 SlowDown"]


def test_a_multipart_segment_upload_survives_failed_and_dropped_parts(
        proxy: FaultProxy, s3_bucket: S3Bucket, tmp_path: Path) -> None:
    """A 12 MiB file goes up in 5 MiB parts; a 503 on one part and a connection reset
    on another are retried part by part, and the object is exactly the file."""
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(os.urandom(12 << 20))
    store = through(proxy, s3_bucket)
    proxy.fail(1, method="PUT")
    proxy.drop(1, method="PUT")
    store.put("t-0/0.log", segment)
    puts = proxy.outcomes("PUT")
    assert puts[:2] == ["503 SlowDown", "dropped"] and puts.count("200") == 3, puts
    assert store.get("t-0/0.log") == segment.read_bytes()


def test_a_failed_multipart_upload_leaves_no_object(
        proxy: FaultProxy, s3_bucket: S3Bucket, tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(os.urandom(12 << 20))
    store = through(proxy, s3_bucket, **{"retry.max.retries": "1"})
    open_store(s3_bucket.options).put("t-0/old.log", b"old")
    proxy.fail(1000, method="PUT")
    with pytest.raises(RemoteStorageError, match=r"put 't-0/0.log' failed"):
        store.put("t-0/0.log", segment)
    proxy.clear()
    assert store.list("t-0/") == [ObjectInfo("t-0/old.log", 3)]


def test_body_cut_mid_way_is_resumed_and_the_bytes_are_exact(
        proxy: FaultProxy, s3_bucket: S3Bucket) -> None:
    store = through(proxy, s3_bucket)
    data = bytes(range(256)) * 2000
    store.put("seg", data)
    proxy.clear()
    proxy.truncate(1)
    assert store.get("seg") == data
    proxy.truncate(1)
    assert store.get_range("seg", 1000, 300_000) == data[1000:300_000]
    cut = [o for o in proxy.outcomes("GET") if "truncated" in o]
    assert len(cut) == 2 and len(proxy.outcomes("GET")) >= 4


def test_body_cut_every_time_is_reported_as_cut_short(
        proxy: FaultProxy, s3_bucket: S3Bucket) -> None:
    store = through(proxy, s3_bucket)
    store.put("seg", b"z" * 100_000)
    proxy.truncate(100)
    with pytest.raises(RemoteStorageError) as e:
        store.get("seg")
    assert e.value.transient
    assert "get 'seg' failed" in str(e.value)
    assert "the response body was cut short" in str(e.value)


def test_access_denied_names_the_operation_and_bucket(
        proxy: FaultProxy, s3_bucket: S3Bucket) -> None:
    """A real read-only identity where the server has policies (SeaweedFS); s3proxy
    has none, so there the fault proxy answers as S3 would."""
    readonly = s3_bucket.server.readonly_options(s3_bucket.name)
    if readonly is not None:
        open_store(s3_bucket.options).put("t-0/0.log", b"v")
        store = open_store({**readonly, **FAST_RETRY})
        assert store.get("t-0/0.log") == b"v"
        expected = "S3 403 AccessDenied: Access Denied."
    else:
        store = through(proxy, s3_bucket)
        proxy.fail(1, method="PUT", status=403, code="AccessDenied", message="Access Denied")
        expected = "S3 403 AccessDenied: Access Denied"
    with pytest.raises(RemoteStorageError) as e:
        store.put("t-0/1.log", b"v")
    assert not e.value.transient
    if readonly is None:
        assert proxy.outcomes("PUT") == ["403 AccessDenied"]  # not retried
    assert str(e.value).endswith(
        f"put 't-0/1.log' failed: access denied ({expected}); "
        f"the credentials may not put in bucket '{s3_bucket.name}'")


@pytest.mark.parametrize("status,code,message,tries", [
    (403, "QuotaExceeded", "", 1),                   # Ceph radosgw: bucket quota
    (507, "XMinioStorageFull", "Storage backend has reached its minimum free drive "
     "threshold.", 4),                               # MinIO: disks full (5xx: retried)
])
def test_a_full_bucket_says_so_and_is_not_mistaken_for_denial(
        proxy: FaultProxy, s3_bucket: S3Bucket, status: int, code: str, message: str,
        tries: int) -> None:
    store = through(proxy, s3_bucket)
    proxy.fail(10, method="PUT", status=status, code=code, message=message)
    with pytest.raises(RemoteStorageError) as e:
        store.put("t-0/9.log", b"v" * 1000)
    assert not e.value.transient
    assert len(proxy.outcomes("PUT")) == tries
    detail = f"S3 {status} {code}" + (f": {message}" if message else "")
    assert str(e.value).endswith(f"put 't-0/9.log' failed{' after 3 retries' if tries > 1 else ''}"
                                 f": the bucket or the server is full ({detail}); free space "
                                 "or raise the quota")


def test_any_other_s3_refusal_shows_its_code_and_message(
        proxy: FaultProxy, s3_bucket: S3Bucket) -> None:
    store = through(proxy, s3_bucket)
    proxy.fail(1, method="PUT", status=400, code="EntityTooLarge",
               message="Your proposed upload exceeds the maximum allowed object size.")
    with pytest.raises(RemoteStorageError) as e:
        store.put("t-0/0.log", b"v")
    assert not e.value.transient
    assert str(e.value).endswith(
        "put 't-0/0.log' failed: the server refused it (S3 400 EntityTooLarge: Your "
        "proposed upload exceeds the maximum allowed object size.)")


def test_bad_settings_are_rejected_with_their_name() -> None:
    with pytest.raises(RemoteStorageError, match=r"rsm.config.retry.max.retries must be a "
                       r"non-negative integer, got 'many'"):
        ObjectStore("s3://b/p", {"retry.max.retries": "many"})
    with pytest.raises(RemoteStorageError, match="expected file:///a/dir or s3://bucket/prefix"):
        ObjectStore("ftp://x/y")
    with pytest.raises(RemoteStorageError, match="rsm.config.url is not set"):
        open_store({})
