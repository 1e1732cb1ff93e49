"""The broker's remote tier (KIP-405) through real clients over sockets on 127.0.0.1.

One leader broker copies a topic's sealed segments to a ``file://`` bucket; its local
retention then deletes them, so the history exists only in the tier. confluent-kafka and
kcat read it back (offsets, values, timestamps equal to what was produced: the oracle),
time lookups equal a brute-force scan of the produced records (hypothesis picks the
times), ListOffsets -4 / -5 answer what the bucket's manifest and the local directory
say, at the versions Kafka requires (v8 / v9). A read replica on another port, serving
the same bucket, answers ListOffsets, Fetch and PlanTimeWindow as the oracle restricted
to what is tiered, follows new uploads, and refuses writes. A bucket that fails keeps
local data past local.retention.* and is retried with growing backoff.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import SyncClient
from storage.remote import manifest as mf
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.clients import fetch_all
from tests.helpers.confluent import create_topic
from tests.helpers.kafka_socket import KafkaSocket
from tests.helpers.wait import wait_until

KCAT = shutil.which("kcat")
T0 = 1_700_000_000_000
INTERVAL = {"remote.log.manager.task.interval.ms": "100",
            "log.retention.check.interval.ms": "100"}
TIMEOUT = 30.0


@dataclass
class Rec:
    offset: int
    timestamp: int
    value: bytes


def records(n: int, seed: int, first: int = 0) -> list[tuple[int, bytes]]:
    """(timestamp, value) of n records, timestamps out of order (a shuffled ramp)."""
    rng = random.Random(seed)
    out = [(T0 + (first + i) * 1000 + rng.randrange(-5000, 5000), b"r%06d" % (first + i) + b"x" * 40)
           for i in range(n)]
    return out


def produce(bootstrap: str, topic: str, recs: list[tuple[int, bytes]], per_batch: int = 10
            ) -> list[Rec]:
    """Produce in small batches (several segments of 2000 bytes); the delivered records."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": per_batch})
    out: list[Rec] = []
    errors: list[object] = []

    def done(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            out.append(Rec(msg.offset(), msg.timestamp()[1], msg.value()))  # type: ignore[attr-defined]

    for i, (ts, value) in enumerate(recs):
        p.produce(topic, value=value, timestamp=ts, partition=0, on_delivery=done)
        if i % per_batch == per_batch - 1:
            p.flush(TIMEOUT)
    p.flush(TIMEOUT)
    assert not errors, errors
    return sorted(out, key=lambda r: r.offset)


def oracle_time(recs: list[Rec], t: int, below: int | None = None) -> tuple[int, int]:
    """(offset, timestamp) of the first record with timestamp >= t, else (-1, -1)."""
    for r in recs:
        if below is not None and r.offset >= below:
            break
        if r.timestamp >= t:
            return r.offset, r.timestamp
    return -1, -1


def bases(data_dir: Path, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (data_dir / f"{topic}-0").glob("*.log"))


def files(d: Path) -> list[Path]:
    return [p for p in d.rglob("*") if p.is_file()] if d.exists() else []


def manifest(bucket: Path, topic: str) -> mf.PartitionManifest | None:
    path = bucket / mf.manifest_key(topic, 0)
    return mf.decode_partition(path.read_bytes()) if path.exists() else None


def list_offsets(port: int, topic: str, timestamp: int, version: int) -> tuple[int, int, int]:
    """(error, offset, timestamp) of one ListOffsets at ``version``."""
    with KafkaSocket(port) as conn:
        resp = conn.request(2, version, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
    p = resp.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


def consume_confluent(bootstrap: str, topic: str, n: int) -> list[Rec]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[Rec] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(Rec(m.offset(), m.timestamp()[1], m.value()))
    finally:
        c.close()
    return out


@dataclass
class Tiered:
    leader: BrokerProcess
    bucket: Path
    recs: list[Rec]
    topic: str


def start(tmp: Path, name: str, overrides: dict[str, str], extra: list[str] | None = None
          ) -> BrokerProcess:
    d = tmp / name
    d.mkdir(parents=True, exist_ok=True)
    return BrokerProcess(d / "data", free_port_number(), overrides, extra_args=extra or []).start()


def start_tiered(tmp: Path, bucket: Path, more: dict[str, str] | None = None) -> BrokerProcess:
    """A leader with remote storage on, its tier in the ``file://`` bucket ``bucket``."""
    return start(tmp, "leader", {"remote.log.storage.system.enable": "true",
                                 "rsm.config.url": f"file://{bucket}", **INTERVAL, **(more or {})})


def console_topic_page(bootstrap: str, topic: str, tmp: Path) -> str:
    """The web console's page of ``topic``, from a console started against ``bootstrap``."""
    from bench.harness import start_console, stop_console

    proc, url = start_console(["--bootstrap-server", bootstrap,
                               "--port", str(free_port_number())], tmp / "console.log")
    try:
        return str(urllib.request.urlopen(f"{url}/topics/{topic}?wait=0",
                                          timeout=TIMEOUT).read().decode())
    finally:
        stop_console(proc)


def create_tiered_topic(broker: BrokerProcess, topic: str, more: dict[str, str] | None = None
                        ) -> None:
    """A topic copied to the tier, 2000-byte segments, no time retention."""
    create_topic(broker, topic, config={"remote.storage.enable": "true", "segment.bytes": "2000",
                                        "retention.ms": "-1", **(more or {})})


def wait_sealed_copied(broker: BrokerProcess, bucket: Path, topic: str) -> None:
    """Every sealed segment copied (the manifest's end = the active segment's base - 1)."""
    wait_until(lambda: (m := manifest(bucket, topic)) is not None
               and m.highest_offset() == bases(broker.data_dir, topic)[-1] - 1, TIMEOUT,
               "sealed segments copied")


def drop_local_copies(broker: BrokerProcess, topic: str) -> AdminClient:
    """Local retention down to one byte: every copied segment goes from the local disk."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource("TOPIC", topic, incremental_configs=[_set("local.retention.bytes", "1")])
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    wait_until(lambda: len(bases(broker.data_dir, topic)) == 1, TIMEOUT, "local copies deleted")
    return admin


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tiered]:
    """History of topic ``hist`` only in the tier: produced, copied, then deleted locally."""
    tmp = tmp_path_factory.mktemp("tier")
    bucket = tmp / "bucket"
    leader = start_tiered(tmp, bucket, {"metrics.listener": f"127.0.0.1:{free_port_number()}"})
    try:
        topic = "hist"
        create_tiered_topic(leader, topic)
        recs = produce(leader.bootstrap, topic, records(400, seed=1))
        wait_sealed_copied(leader, bucket, topic)
        drop_local_copies(leader, topic)  # now local retention may delete every copied segment
        yield Tiered(leader, bucket, recs, topic)
    finally:
        leader.stop()


def _set(name: str, value: str) -> object:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def test_history_only_in_the_tier_reads_back_through_confluent_kafka(tiered: Tiered) -> None:
    local_start = bases(tiered.leader.data_dir, tiered.topic)[0]
    assert local_start > 300, "the history is not remote-only; the test proves nothing"
    got = consume_confluent(tiered.leader.bootstrap, tiered.topic, len(tiered.recs))
    assert got == tiered.recs


def test_history_only_in_the_tier_reads_back_through_kcat(tiered: Tiered) -> None:
    assert KCAT, "kcat is not installed: `make check-clients` installs it"
    out = subprocess.run([KCAT, "-b", tiered.leader.bootstrap, "-C", "-t", tiered.topic, "-p", "0",
                          "-o", "beginning", "-e", "-q", "-f", "%o %T %s\\n"],
                         capture_output=True, timeout=TIMEOUT, check=True).stdout.decode()
    got = [Rec(int(o), int(t), v.encode()) for o, t, v in
           (line.split(" ", 2) for line in out.splitlines())]
    assert got == tiered.recs


def test_list_offsets_earliest_local_and_latest_tiered_at_kafkas_versions(tiered: Tiered) -> None:
    port, topic = tiered.leader.port, tiered.topic
    m = manifest(tiered.bucket, topic)
    assert m is not None
    local_start = bases(tiered.leader.data_dir, topic)[0]
    assert list_offsets(port, topic, -4, 8)[:2] == (0, local_start)
    assert list_offsets(port, topic, -5, 9)[:2] == (0, m.highest_offset())
    assert list_offsets(port, topic, -2, 9)[:2] == (0, 0)
    assert list_offsets(port, topic, -1, 9)[:2] == (0, len(tiered.recs))
    assert list_offsets(port, topic, -4, 7)[0] == 35  # UNSUPPORTED_VERSION below v8
    assert list_offsets(port, topic, -5, 8)[0] == 35  # and below v9 (KIP-1005)
    # -6 EARLIEST_PENDING_UPLOAD needs v11 (KIP-1023), not advertised: Kafka's gate
    assert list_offsets(port, topic, -6, 10)[0] == 35
    with SyncClient(tiered.leader.bootstrap) as c:
        assert c.earliest_local(topic) == {0: local_start}
        assert c.latest_tiered(topic) == {0: m.highest_offset()}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=T0 - 10_000, max_value=T0 + 410_000))
def test_time_lookups_across_the_local_remote_boundary_equal_a_scan(tiered: Tiered, t: int) -> None:
    c = Consumer({"bootstrap.servers": tiered.leader.bootstrap, "group.id": "lookup"})
    try:
        [tp] = c.offsets_for_times([TopicPartition(tiered.topic, 0, t)], timeout=TIMEOUT)
    finally:
        c.close()
    want = oracle_time(tiered.recs, t)[0]
    assert tp.offset == (want if want >= 0 else -1)  # librdkafka: -1 = END for "none"


def window_counts(recs: list[Rec], bounds: list[int]) -> list[int]:
    return [sum(1 for r in recs if lo <= r.timestamp < hi)
            for lo, hi in zip(bounds, bounds[1:], strict=False)]


def test_event_time_plans_and_counts_span_remote_and_local(tiered: Tiered) -> None:
    bounds = [T0 - 10_000 + k * 37_000 for k in range(13)]
    with SyncClient(tiered.leader.bootstrap) as c:
        assert c.count_time_windows(tiered.topic, bounds)[0] == window_counts(tiered.recs, bounds)
        for t1, t2 in ((T0, T0 + 30_000), (T0 + 380_000, T0 + 420_000), (T0 - 1, T0 + 500_000)):
            plan = c.plan_time_window(tiered.topic, t1, t2)[0]
            planned = {o for r in plan.ranges for o in range(r.start_offset, r.end_offset)}
            assert {r.offset for r in tiered.recs if t1 <= r.timestamp < t2} <= planned


def test_cli_tier_and_topics_describe_show_local_and_remote(tiered: Tiered) -> None:
    env = {**os.environ, "CHRONOLOG_BOOTSTRAP_SERVER": tiered.leader.bootstrap}
    remote = ["--remote", f"file://{tiered.bucket}"]
    tier = json.loads(subprocess.run(
        [sys.executable, "-m", "client.cli", "tier", tiered.topic, "--format", "json", *remote],
        capture_output=True, check=True, env=env, timeout=TIMEOUT).stdout)
    described = json.loads(subprocess.run(
        [sys.executable, "-m", "client.cli", "topics", "describe", tiered.topic, "--format",
         "json", *remote], capture_output=True, check=True, env=env, timeout=TIMEOUT).stdout)
    m = manifest(tiered.bucket, tiered.topic)
    assert m is not None
    local_start = bases(tiered.leader.data_dir, tiered.topic)[0]
    local_bytes = sum(p.stat().st_size for p in
                      (tiered.leader.data_dir / f"{tiered.topic}-0").glob("*.log"))
    want = {"topic": tiered.topic, "partition": 0, "log_start_offset": 0,
            "local_log_start_offset": local_start, "remote_highest_offset": m.highest_offset(),
            "log_end_offset": len(tiered.recs),
            "upload_lag_records": len(tiered.recs) - (m.highest_offset() + 1),
            "local_bytes": local_bytes,
            "remote_bytes": sum(s.size_bytes for s in m.finished()),
            "remote_segments": len(m.finished())}
    assert tier == [want]
    assert described["tier"] == [want]


def test_read_replica_answers_as_the_leader_from_the_bucket(tiered: Tiered, tmp_path: Path) -> None:
    replica = start(tmp_path, "replica", {"rsm.config.url": f"file://{tiered.bucket}", **INTERVAL},
                    ["--read-replica", f"file://{tiered.bucket}"])
    try:
        topic, recs = tiered.topic, tiered.recs
        m = manifest(tiered.bucket, topic)
        assert m is not None
        end = m.highest_offset() + 1  # what the replica can serve: the tier
        with KafkaSocket(replica.port) as conn:
            assert [(r.offset, r.timestamp, r.value) for r in fetch_all(conn, topic)] == \
                [(r.offset, r.timestamp, r.value) for r in recs if r.offset < end]
        assert list_offsets(replica.port, topic, -2, 9)[:2] == (0, 0)
        assert list_offsets(replica.port, topic, -1, 9)[:2] == (0, end)
        assert list_offsets(replica.port, topic, -5, 9)[:2] == (0, end - 1)
        rng = random.Random(7)
        for t in [T0 - 1, T0 + 500_000, *(rng.randrange(T0, T0 + 400_000) for _ in range(40))]:
            err, offset, ts = list_offsets(replica.port, topic, t, 9)
            assert (err, offset, ts) == (0, *oracle_time(recs, t, below=end)), t
            lead = list_offsets(tiered.leader.port, topic, t, 9)
            if 0 <= lead[1] < end:
                assert lead == (err, offset, ts)
        with SyncClient(replica.bootstrap) as c:
            t1, t2 = T0 + 50_000, T0 + 150_000
            plan = c.plan_time_window(topic, t1, t2)[0]
            planned = {o for r in plan.ranges for o in range(r.start_offset, r.end_offset)}
            wanted = {r.offset for r in recs if r.offset < end and t1 <= r.timestamp < t2}
            assert wanted <= planned, "the replica's plan misses records of the window"
            bounds = [T0 + k * 40_000 for k in range(12)]
            assert c.count_time_windows(topic, bounds)[0] == window_counts(
                [r for r in recs if r.offset < end], bounds)
        # The console works against a replica as against any broker.
        page = console_topic_page(replica.bootstrap, topic, tmp_path)
        assert f'data-partition="0" data-local-start="{end}" data-remote-end="{end - 1}"' in page
        # Writes are refused with a non-retriable error the client shows at once.
        errors: list[object] = []
        p = Producer({"bootstrap.servers": replica.bootstrap, "message.timeout.ms": 10000})
        p.produce(topic, b"nope", partition=0, on_delivery=lambda e, _m: errors.append(e))
        p.flush(TIMEOUT)
        assert [e.code() for e in errors] == [KafkaError.POLICY_VIOLATION]  # type: ignore[attr-defined]
        assert "refused Produce" in replica.log()
    finally:
        replica.stop()


def test_a_read_replica_never_writes_to_the_bucket(tiered: Tiered, tmp_path: Path) -> None:
    """A copy of the leader's bucket with what a leader killed mid-copy leaves (a
    COPY_SEGMENT_STARTED entry with some of its files, and an orphan file): a leader
    opening it would delete those; the replica serves it and leaves every byte alone."""
    import msgspec

    bucket = tmp_path / "ro-bucket"
    shutil.copytree(tiered.bucket, bucket)
    topic = tiered.topic
    m = manifest(bucket, topic)
    assert m is not None and m.finished()
    last = m.finished()[-1]
    half = msgspec.structs.replace(last, segment_id="f" * 32, base_offset=last.next_offset,
                                   end_offset=last.next_offset + 9,
                                   next_offset=last.next_offset + 10,
                                   state=mf.SegmentState.COPY_SEGMENT_STARTED)
    m.segments.append(half)
    (bucket / mf.manifest_key(topic, 0)).write_bytes(mf.encode(m))
    for suffix in (".log", ".index"):
        (bucket / mf.segment_key(topic, 0, half, suffix)).write_bytes(b"half a copy")
    orphan = bucket / mf.segment_key(topic, 0, msgspec.structs.replace(
        last, segment_id="0" * 32), ".log")
    orphan.write_bytes(b"no manifest names me")

    def contents() -> dict[str, tuple[bytes, int]]:
        return {str(p.relative_to(bucket)): (p.read_bytes(), p.stat().st_mtime_ns)
                for p in files(bucket)}

    before = contents()
    replica = start(tmp_path, "ro-replica", {"rsm.config.url": f"file://{bucket}", **INTERVAL},
                    ["--read-replica", f"file://{bucket}"])
    try:
        end = last.next_offset
        assert list_offsets(replica.port, topic, -1, 9)[:2] == (0, end)
        time.sleep(1.0)  # ten passes of the replica's task over the bucket
        assert list_offsets(replica.port, topic, -1, 9)[:2] == (0, end)
        assert "refused" not in replica.log() and "failed" not in replica.log(), replica.log()
    finally:
        replica.stop()
    assert contents() == before


def test_read_replica_follows_new_uploads(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    common = {"rsm.config.url": f"file://{bucket}", **INTERVAL}
    leader = start(tmp_path, "leader", {"remote.log.storage.system.enable": "true", **common})
    replica = None
    try:
        topic = "follow"
        create_tiered_topic(leader, topic)
        first = produce(leader.bootstrap, topic, records(100, seed=2))
        wait_until(lambda: (m := manifest(bucket, topic)) is not None and m.highest_offset() > 0,
                   TIMEOUT, "a first upload")
        replica = start(tmp_path, "replica", common, ["--read-replica", f"file://{bucket}"])
        before = list_offsets(replica.port, topic, -1, 9)[1]
        assert 0 < before <= 100
        more = produce(leader.bootstrap, topic, records(100, seed=3, first=100))
        recs = first + more
        wait_until(lambda: list_offsets(replica.port, topic, -1, 9)[1] > 100, TIMEOUT,
                   "the replica sees the new segments")
        end = list_offsets(replica.port, topic, -1, 9)[1]
        got = consume_confluent(replica.bootstrap, topic, end)
        assert got == [r for r in recs if r.offset < end]
        # CreatePartitions and AlterConfigs on the leader reach the replica (topic.json).
        admin = AdminClient({"bootstrap.servers": leader.bootstrap})
        from confluent_kafka.admin import NewPartitions

        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(TIMEOUT)
        res = ConfigResource("TOPIC", topic, incremental_configs=[
            _set("max.message.bytes", "2000000")])
        admin.incremental_alter_configs([res])[res].result(TIMEOUT)
        ro = AdminClient({"bootstrap.servers": replica.bootstrap})

        def replica_view() -> tuple[int, str]:
            parts = len(ro.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions)
            desc = ro.describe_configs([ConfigResource("TOPIC", topic)])
            configs = next(iter(desc.values())).result(TIMEOUT)
            return parts, configs["max.message.bytes"].value

        wait_until(lambda: replica_view() == (2, "2000000"), TIMEOUT,
                   "the replica has the new partition and config")
        with KafkaSocket(replica.port) as conn:
            resp = conn.request(2, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 1, "timestamp": -1}]}]})
        assert resp.topics[0].partitions[0].error_code == 0
        assert "refused" not in replica.log(), replica.log()
        # Deleted on the leader: the replica stops serving it.
        admin.delete_topics([topic])[topic].result(TIMEOUT)
        wait_until(lambda: list_offsets(replica.port, topic, -1, 9)[0] == 3, TIMEOUT,
                   "UNKNOWN_TOPIC_OR_PARTITION on the replica")
    finally:
        if replica is not None:
            replica.stop()
        leader.stop()


def test_a_failing_bucket_is_retried_with_backoff_and_local_data_is_kept(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    leader = start_tiered(tmp_path, bucket, {"remote.log.manager.task.retry.backoff.ms": "100",
                                            "remote.log.manager.task.retry.backoff.max.ms": "400"})
    try:
        topic = "faulty"
        # The store fails: where topics/ should be a directory, a file is (every put of
        # the bucket's objects fails as a real filesystem fails it).
        bucket.mkdir(exist_ok=True)
        (bucket / "topics").write_bytes(b"not a directory")
        create_tiered_topic(leader, topic, {"local.retention.bytes": "1"})
        recs = produce(leader.bootstrap, topic, records(200, seed=4))
        wait_until(lambda: "3 in a row" in leader.log(), TIMEOUT, "three failed passes")
        waits = [int(w) for w in re.findall(r"retry in (\d+) ms", leader.log())]
        # 100 ms doubling up to 400 ms, each +-20 % jitter.
        assert 80 <= waits[0] <= 120 and max(waits) <= 480, waits
        assert max(waits) > waits[0], f"the backoff does not grow: {waits}"
        assert "local data kept" in leader.log()
        # Nothing uploaded, nothing deleted locally despite local.retention.bytes=1.
        assert list_offsets(leader.port, topic, -5, 9)[:2] == (0, -1)
        assert bases(leader.data_dir, topic)[0] == 0
        assert consume_confluent(leader.bootstrap, topic, len(recs)) == recs
        # The store comes back: the next retry copies, then local retention deletes.
        (bucket / "topics").unlink()
        wait_until(lambda: len(bases(leader.data_dir, topic)) == 1, TIMEOUT,
                   "copied after the store came back, then deleted locally")
        assert "works again" in leader.log()
        assert consume_confluent(leader.bootstrap, topic, len(recs)) == recs
    finally:
        leader.stop()


def test_console_topic_page_shows_local_and_remote(tiered: Tiered, tmp_path: Path) -> None:
    page = console_topic_page(tiered.leader.bootstrap, tiered.topic, tmp_path)
    local = list_offsets(tiered.leader.port, tiered.topic, -4, 9)[1]
    remote = list_offsets(tiered.leader.port, tiered.topic, -5, 9)[1]
    assert 'id="tier"' in page
    assert f'data-partition="0" data-local-start="{local}" data-remote-end="{remote}"' in page


def test_metrics_count_what_the_tier_copied_and_served(tiered: Tiered) -> None:
    consume_confluent(tiered.leader.bootstrap, tiered.topic, len(tiered.recs))
    text = urllib.request.urlopen(
        f"http://{tiered.leader.overrides['metrics.listener']}/metrics", timeout=TIMEOUT
    ).read().decode()

    def value(name: str) -> float:
        m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        assert m, f"{name} not exported"
        return float(m.group(1))

    m = manifest(tiered.bucket, tiered.topic)
    assert m is not None
    copied = sum(s.size_bytes for s in m.finished())
    assert value("chronolog_remote_copy_bytes_total") >= copied  # .log files plus indexes
    assert value("chronolog_remote_copy_segments_total") >= len(m.finished())
    assert value("chronolog_remote_fetch_bytes_total") > 0
    assert value("chronolog_remote_highest_offset") == m.highest_offset()
    assert value("chronolog_local_log_start_offset") == bases(tiered.leader.data_dir,
                                                              tiered.topic)[0]
    assert value("chronolog_remote_size_bytes") == copied
    # the remote history consumed above came through the chunk cache under log.dirs
    assert value("chronolog_remote_chunk_cache_misses_total") >= 1
    cached = sorted((tiered.leader.data_dir / "remote-log-chunk-cache").iterdir())
    assert cached and value("chronolog_remote_chunk_cache_bytes") == sum(
        f.stat().st_size for f in cached)


def test_deleting_or_untiering_a_topic_deletes_its_remote_data(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    leader = start_tiered(tmp_path, bucket)
    try:
        config = {"remote.storage.enable": "true", "segment.bytes": "2000", "retention.ms": "-1"}
        for topic in ("gone", "untiered"):
            create_topic(leader, topic, config=config)
        gone = produce(leader.bootstrap, "gone", records(100, seed=6))
        kept = produce(leader.bootstrap, "untiered", records(100, seed=7))
        for topic in ("gone", "untiered"):
            wait_until(lambda t=topic: (m := manifest(bucket, t)) is not None
                       and m.highest_offset() > 0, TIMEOUT, f"{topic} uploaded")
        assert len(gone) == 100
        admin = AdminClient({"bootstrap.servers": leader.bootstrap})
        admin.delete_topics(["gone"])["gone"].result(TIMEOUT)
        wait_until(lambda: not files(bucket / "topics" / "gone"), TIMEOUT,
                   "the deleted topic's remote files removed")
        # KIP-950: off with remote.log.delete.on.disable=true deletes the remote copy;
        # the records stay readable from local disk.
        res = ConfigResource("TOPIC", "untiered", incremental_configs=[
            _set("remote.storage.enable", "false"), _set("remote.log.delete.on.disable", "true")])
        admin.incremental_alter_configs([res])[res].result(TIMEOUT)
        wait_until(lambda: not [f for f in files(bucket / "topics" / "untiered")
                                if f.suffix == ".log"], TIMEOUT,
                   "the untiered topic's remote segments removed")
        assert list_offsets(leader.port, "untiered", -5, 9)[:2] == (0, -1)
        assert list_offsets(leader.port, "untiered", -2, 9)[:2] == (0, 0)  # still local
        untiered = manifest(bucket, "untiered")  # readers of the bucket see no segment
        assert untiered is not None and untiered.segments == []
        assert consume_confluent(leader.bootstrap, "untiered", len(kept)) == kept
    finally:
        leader.stop()


def test_a_restarted_leader_serves_the_remote_history_at_once(tiered: Tiered) -> None:
    """The tiers attach before the listeners accept: right after a restart (graceful or
    kill -9) the first fetch from offset 0 is served from the bucket."""
    for how in ("stop", "kill"):
        getattr(tiered.leader, how)()
        tiered.leader.start()
        assert list_offsets(tiered.leader.port, tiered.topic, -2, 9)[:2] == (0, 0)
        got = consume_confluent(tiered.leader.bootstrap, tiered.topic, len(tiered.recs))
        assert got == tiered.recs, how


def test_delete_records_below_the_local_start_removes_remote_data(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    leader = start_tiered(tmp_path, bucket)
    replica = None
    try:
        topic = "trim"
        create_tiered_topic(leader, topic)
        recs = produce(leader.bootstrap, topic, records(200, seed=8))
        wait_sealed_copied(leader, bucket, topic)
        admin = drop_local_copies(leader, topic)
        cut = 120
        [done] = admin.delete_records([TopicPartition(topic, 0, cut)]).values()
        assert done.result(TIMEOUT).low_watermark == cut
        m = manifest(bucket, topic)
        assert m is not None and m.log_start_offset == cut  # written before the answer
        wait_until(lambda: all(s.end_offset >= cut for s in manifest(bucket, topic).segments),
                   TIMEOUT, "remote segments wholly below the new start deleted")
        assert list_offsets(leader.port, topic, -2, 9)[:2] == (0, cut)
        left = [r for r in recs if r.offset >= cut]
        assert consume_confluent(leader.bootstrap, topic, len(left)) == left
        for t in (T0 - 1, T0 + 60_000, T0 + 130_000):
            assert list_offsets(leader.port, topic, t, 9) == (0, *oracle_time(left, t)), t
        replica = start(tmp_path, "replica", {"rsm.config.url": f"file://{bucket}", **INTERVAL},
                        ["--read-replica", f"file://{bucket}"])
        assert list_offsets(replica.port, topic, -2, 9)[:2] == (0, cut)
        end = list_offsets(replica.port, topic, -1, 9)[1]
        assert consume_confluent(replica.bootstrap, topic, end - cut) == \
            [r for r in left if r.offset < end]
    finally:
        if replica is not None:
            replica.stop()
        leader.stop()


# Last: it appends to the shared topic.
def test_appends_after_local_deletion_keep_the_remote_history_readable(tiered: Tiered) -> None:
    """Segments rolled after the local copies went must not move the log start to the
    first local segment: the older records are still in the tier."""
    more = produce(tiered.leader.bootstrap, tiered.topic, records(60, seed=5, first=400))
    assert list_offsets(tiered.leader.port, tiered.topic, -2, 9)[:2] == (0, 0)
    wait_until(lambda: len(bases(tiered.leader.data_dir, tiered.topic)) == 1
               and bases(tiered.leader.data_dir, tiered.topic)[0] > 400, TIMEOUT,
               "the new segments copied and deleted locally too")
    assert list_offsets(tiered.leader.port, tiered.topic, -2, 9)[:2] == (0, 0)
    recs = tiered.recs + more
    assert consume_confluent(tiered.leader.bootstrap, tiered.topic, len(recs)) == recs
    tiered.recs[:] = recs


def test_a_store_down_at_start_makes_reads_retry_not_skip_the_remote_history(
        tmp_path: Path) -> None:
    """With the bucket unreachable when the broker starts, the partition's log start is
    unknown: reads answer KAFKA_STORAGE_ERROR (retriable) instead of a log start at the
    first local segment, which would make a consumer skip the remote history; once the
    store is back the consumer reads everything."""
    bucket = tmp_path / "bucket"
    leader = start_tiered(tmp_path, bucket, {"remote.log.manager.task.retry.backoff.ms": "100",
                                            "remote.log.manager.task.retry.backoff.max.ms": "200"})
    try:
        topic = "restart-down"
        create_tiered_topic(leader, topic)
        recs = produce(leader.bootstrap, topic, records(150, seed=9))
        wait_sealed_copied(leader, bucket, topic)
        drop_local_copies(leader, topic)
        leader.stop()
        (bucket / "topics").rename(bucket / "saved")
        (bucket / "topics").symlink_to("topics")  # a loop: every access fails (ELOOP)
        leader.start()
        assert list_offsets(leader.port, topic, -2, 9)[0] == 56  # KAFKA_STORAGE_ERROR
        with KafkaSocket(leader.port) as conn:
            resp = conn.request(1, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""})
        assert resp.responses[0].partitions[0].error_code == 56
        (bucket / "topics").unlink()
        (bucket / "saved").rename(bucket / "topics")
        assert consume_confluent(leader.bootstrap, topic, len(recs)) == recs
    finally:
        leader.stop()
