"""The broker image in its container, seen from the compose network with real Kafka clients.

Every lookup is checked against a brute-force scan of what was produced (the
oracle: the first record in offset order whose timestamp is >= T), before and
after the container is stopped and started again on the same volume, and after
it is SIGKILLed in the middle of a produce and started again. Topic names are
unique per run; the broker's volume outlives the tests only until the stack is
taken down.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from stackhelp import ROOT, BrokerControl, Stack, load_module

IMAGE_UID = 10001  # the image's `chronolog` user (docker/Dockerfile)
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
PARTITIONS = 3
LOOKUPS = settings(max_examples=40, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# The operations tests' Prometheus text parser (labels sorted, so keys do not depend on order).
opshelp = load_module("chronolog_opshelp", ROOT / "tests" / "ops" / "opshelp.py")


@dataclass(frozen=True)
class Rec:
    offset: int
    timestamp: int
    key: bytes
    value: bytes


@dataclass
class Topic:
    """A topic and, per partition, its records in offset order (what the oracle scans)."""

    name: str
    records: dict[int, list[Rec]] = field(default_factory=dict)

    def expected(self, partition: int, t: int) -> Rec | None:
        return next((r for r in self.records[partition] if r.timestamp >= t), None)

    def timestamps(self) -> list[int]:
        return sorted({r.timestamp for recs in self.records.values() for r in recs})


def create_topic(stack: Stack, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])[
        name].result(30)
    return name


def producer(stack: Stack, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": stack.bootstrap, "acks": "all", "linger.ms": 5, **extra})


def read_back(stack: Stack, topic: str) -> dict[int, list[Rec]]:
    """Every record of every partition, read with kafka-python from the log start to the end."""
    consumer = KafkaConsumer(bootstrap_servers=stack.bootstrap, enable_auto_commit=False,
                             request_timeout_ms=30000)
    try:
        tps = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: dict[int, list[Rec]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, "read-back did not reach the end offsets"
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                out[tp.partition] += [Rec(m.offset, m.timestamp, m.key, m.value) for m in msgs]
        return out
    finally:
        consumer.close()


@dataclass
class Clients:
    """One librdkafka and one kafka-python consumer for the whole module: both reconnect by
    themselves after the broker container restarts, as applications' clients would."""

    ck: Consumer
    kp: KafkaConsumer

    def know(self, topic: str) -> None:
        """Wait until librdkafka's metadata has every partition of ``topic`` again: after the
        broker was away it may briefly answer lookups with _UNKNOWN_PARTITION, as it would
        for any application (which retries)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                meta: Any = self.ck.list_topics(topic, timeout=10).topics.get(topic)
            except KafkaException as exc:  # e.g. _TRANSPORT while it reconnects
                meta = exc
            if getattr(meta, "error", True) is None and len(meta.partitions) == PARTITIONS:
                return
            assert time.monotonic() < deadline, f"librdkafka does not see {topic} again: {meta}"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def clients(stack: Stack) -> Iterator[Clients]:
    c = Clients(
        Consumer({"bootstrap.servers": stack.bootstrap, "group.id": f"it-{uuid.uuid4().hex}",
                  "enable.auto.commit": False}),
        KafkaConsumer(bootstrap_servers=stack.bootstrap, enable_auto_commit=False),
    )
    yield c
    c.ck.close()
    c.kp.close()


def assert_lookups_exact(clients: Clients, topic: Topic, targets: list[int]) -> None:
    """librdkafka's and kafka-python's offsets_for_times agree with the oracle, per partition."""
    for t in targets:
        got = clients.ck.offsets_for_times(
            [CkTopicPartition(topic.name, p, t) for p in range(PARTITIONS)], timeout=30)
        kp_got = clients.kp.offsets_for_times(
            {KpTopicPartition(topic.name, p): t for p in range(PARTITIONS)})
        for tp in got:
            want = topic.expected(tp.partition, t)
            assert tp.error is None
            assert tp.offset == (want.offset if want else -1), (tp.partition, t)
            # kafka-python also gets the found record's timestamp (None: no such record).
            hit = kp_got[KpTopicPartition(topic.name, tp.partition)]
            found = (hit.offset, hit.timestamp) if hit is not None else None
            assert found == ((want.offset, want.timestamp) if want else None), (tp.partition, t)


def targets_from(data: st.DataObject, topic: Topic) -> list[int]:
    """Lookup targets: produced timestamps, their neighbours, and anything in and around the range."""
    stamps = topic.timestamps()
    near = st.sampled_from(stamps).flatmap(lambda s: st.sampled_from([s - 1, s, s + 1]))
    anywhere = st.integers(stamps[0] - 10, stamps[-1] + 10)
    return data.draw(st.lists(st.one_of(near, anywhere), min_size=1, max_size=4))


# ----------------------------------------------------------------- produced topic


@pytest.fixture(scope="module")
def timed(stack: Stack) -> Topic:
    """3 x ~700 records with out-of-order timestamps (many repeated), acknowledged with acks=all."""
    topic = Topic(create_topic(stack, "it-timed"), {p: [] for p in range(PARTITIONS)})
    rnd = random.Random(20261124)
    base = int(time.time() * 1000) - 3_600_000
    pool = [base + rnd.randint(0, 1_200_000) for _ in range(400)]
    acked: list[Rec] = []
    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(Rec(msg.offset(), msg.timestamp()[1], msg.key(), msg.value()))
            topic.records[msg.partition()].append(acked[-1])

    p = producer(stack)
    for i in range(2100):
        ts = rnd.choice(pool) if rnd.random() < 0.5 else base + rnd.randint(0, 1_200_000)
        p.produce(topic.name, key=f"k{i}".encode(), value=f"value {i}".encode() * rnd.randint(1, 20),
                  partition=rnd.randrange(PARTITIONS), timestamp=ts, on_delivery=delivered)
        p.poll(0)
    assert p.flush(60) == 0 and not errors
    for recs in topic.records.values():
        recs.sort(key=lambda r: r.offset)
        assert [r.offset for r in recs] == list(range(len(recs)))
    return topic


@LOOKUPS
@given(data=st.data())
def test_offsets_for_times_match_a_scan_of_the_produced_records(
    clients: Clients, timed: Topic, data: st.DataObject,
) -> None:
    assert_lookups_exact(clients, timed, targets_from(data, timed))


@settings(max_examples=8, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_consuming_from_a_time_returns_every_later_record_in_order(
    clients: Clients, timed: Topic, data: st.DataObject,
) -> None:
    partition = data.draw(st.integers(0, PARTITIONS - 1))
    t = data.draw(st.sampled_from(timed.timestamps()))
    start = timed.expected(partition, t)
    want = [r for r in timed.records[partition] if start and r.offset >= start.offset]
    consumer, tp = clients.kp, KpTopicPartition(timed.name, partition)
    consumer.assign([tp])
    hit = consumer.offsets_for_times({tp: t})[tp]
    assert (hit.offset if hit else None) == (start.offset if start else None)
    if hit is None:
        return
    consumer.seek(tp, hit.offset)
    got: list[Rec] = []
    deadline = time.monotonic() + 30
    while len(got) < len(want) and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=500).values():
            got += [Rec(m.offset, m.timestamp, m.key, m.value) for m in msgs]
    assert got == want


def test_metrics_report_each_partitions_end_offset(stack: Stack, timed: Topic) -> None:
    scraped = opshelp.scrape(stack.metrics_url)
    for p, recs in timed.records.items():
        key = f'chronolog_log_end_offset{{partition="{p}",topic="{timed.name}"}}'
        assert scraped[key] == len(recs)
    assert scraped["chronolog_time_index_lookups_total"] > 0


def test_the_console_from_the_image_counts_what_a_scan_of_the_records_counts(
    stack: Stack, timed: Topic,
) -> None:
    """`chronolog console` runs from the image's code and dependencies (this runner is built
    from the broker image's layers) and its timelines equal, bucket by bucket, a scan of the
    produced records: by event time (the default) the records whose timestamps fall in the
    bucket; by position what a reader of each window gets (per partition, first offset at
    the bucket's end minus first offset at its start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "client.cli", "console", "--bootstrap-server", stack.bootstrap,
         "--port", str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/api/groups", timeout=5) as r:
                    assert "groups" in json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()[0][-3000:]
                assert time.monotonic() < deadline, "the console did not answer within 60 s"
                time.sleep(0.3)
        stamps = [r.timestamp for recs in timed.records.values() for r in recs]
        start, end = min(stamps) - 1_000, max(stamps) + 1_000
        timelines = {}
        for by in ("event", "offset"):  # event time (the default), then position
            with urllib.request.urlopen(f"{url}/api/topics/{timed.name}/timeline?from={start}"
                                        f"&to={end}&buckets=11&by={by}", timeout=60) as r:
                timelines[by] = json.loads(r.read())
    finally:
        proc.terminate()
        proc.communicate(timeout=30)

    def first_at(recs: list[Rec], t: int) -> int:
        return next((i for i, r in enumerate(recs) if r.timestamp >= t), len(recs))

    for by, tl in timelines.items():
        bounds = tl["bounds"]
        assert bounds[0] <= start and bounds[-1] >= end
        pairs = list(zip(bounds, bounds[1:], strict=False))
        if by == "event":  # the records whose own timestamps fall in the bucket
            want = [sum(lo <= t < hi for t in stamps) for lo, hi in pairs]
        else:  # what a reader of each window gets, per partition
            want = [sum(first_at(recs, hi) - first_at(recs, lo)
                        for recs in timed.records.values()) for lo, hi in pairs]
        assert tl["counts"] == want, by
        assert sum(tl["counts"]) == len(stamps)


def test_the_broker_writes_its_volume_as_the_non_root_image_user(
    data_dir: Path, timed: Topic,
) -> None:
    paths = [data_dir, *data_dir.rglob("*")]
    assert {f"{timed.name}-{p}" for p in range(PARTITIONS)} <= {x.name for x in paths}
    owners = {x.stat().st_uid for x in paths}
    assert owners == {IMAGE_UID}, owners


# ------------------------------------------------- stop and start on the same volume


@dataclass(frozen=True)
class Restart:
    exit_code: int
    marker_after_stop: bool
    marker_after_start: bool


@pytest.fixture(scope="module")
def restarted(stack: Stack, control: BrokerControl, data_dir: Path, timed: Topic,
              clients: Clients) -> Restart:
    """`podman stop` (SIGTERM) the broker container, then start the same container again."""
    stopped = control.request("stop")
    marker_after_stop = (data_dir / CLEAN_SHUTDOWN).exists()
    control.request("start")
    stack.wait_until_healthy()
    clients.know(timed.name)
    return Restart(stopped["exit_code"], marker_after_stop, (data_dir / CLEAN_SHUTDOWN).exists())


def test_podman_stop_shuts_down_cleanly_and_writes_the_clean_shutdown_marker(
    restarted: Restart,
) -> None:
    assert restarted.exit_code == 0  # SIGTERM handled; not 137 (killed when the grace ran out)
    assert restarted.marker_after_stop
    assert not restarted.marker_after_start  # deleted once the logs are open again


def test_every_record_reads_back_after_the_restart(
    stack: Stack, restarted: Restart, timed: Topic,
) -> None:
    assert read_back(stack, timed.name) == timed.records


@LOOKUPS
@given(data=st.data())
def test_offsets_for_times_stay_exact_after_the_restart(
    clients: Clients, restarted: Restart, timed: Topic, data: st.DataObject,
) -> None:
    assert_lookups_exact(clients, timed, targets_from(data, timed))


# --------------------------------------------------------- SIGKILL in mid-produce


@dataclass
class Crash:
    topic: Topic  # what the log holds after the restart
    acked: dict[int, list[Rec]]  # what the broker acknowledged, before, during and after
    acked_before_kill: int
    exit_code: int
    marker_after_kill: bool


@pytest.fixture(scope="module")
def crashed(stack: Stack, control: BrokerControl, data_dir: Path, clients: Clients) -> Crash:
    """Produce without pause; SIGKILL the container once 3000 records are acknowledged, go on
    producing while it is down, start it again, and let the producer deliver what it queued."""
    name = create_topic(stack, "it-crash")
    rnd = random.Random(7)
    base = int(time.time() * 1000) - 3_600_000
    acked: dict[int, list[Rec]] = {p: [] for p in range(PARTITIONS)}
    lock = threading.Lock()

    def delivered(err: Any, msg: Any) -> None:
        if err is None:  # unacknowledged records may or may not be in the log; not checked
            with lock:
                acked[msg.partition()].append(
                    Rec(msg.offset(), msg.timestamp()[1], msg.key(), msg.value()))

    def count() -> int:
        with lock:
            return sum(map(len, acked.values()))

    # A request in flight at the kill is retried once librdkafka gives up on it: on a reset
    # at once, else after request.timeout.ms (30 s by default, 5 s here).
    p = producer(stack, **{"message.timeout.ms": 120000, "request.timeout.ms": 5000,
                           "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500,
                           "linger.ms": 2})
    seq = iter(range(10**9))

    def produce_some(n: int) -> None:
        for _ in range(n):
            i = next(seq)
            while True:
                try:
                    p.produce(name, key=f"c{i}".encode(), value=f"crash {i}".encode() * 4,
                              partition=i % PARTITIONS, timestamp=base + rnd.randint(0, 600_000),
                              on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)

    while count() < 3000:
        produce_some(100)
    acked_before_kill = count()
    killed: dict[str, Any] = {}
    killer = threading.Thread(target=lambda: killed.update(control.request("kill")))
    killer.start()
    while killer.is_alive():  # the kill lands while records are in flight
        produce_some(50)
        time.sleep(0.005)
    assert killed, "the kill request failed"
    marker_after_kill = (data_dir / CLEAN_SHUTDOWN).exists()
    produce_some(500)  # queued in the producer while the broker is down
    control.request("start")
    stack.wait_until_healthy()
    produce_some(500)
    assert p.flush(120) == 0
    for recs in acked.values():
        recs.sort(key=lambda r: r.offset)
    clients.know(name)
    return Crash(Topic(name, read_back(stack, name)), acked, acked_before_kill,
                 killed["exit_code"], marker_after_kill)


def test_sigkill_leaves_no_clean_shutdown_marker(crashed: Crash) -> None:
    assert crashed.exit_code == 137  # 128 + SIGKILL
    assert not crashed.marker_after_kill


def test_every_acknowledged_record_survives_a_sigkill_in_mid_produce(crashed: Crash) -> None:
    assert sum(map(len, crashed.acked.values())) > crashed.acked_before_kill
    for partition, log in crashed.topic.records.items():
        assert [r.offset for r in log] == list(range(len(log)))  # no holes after recovery
        by_offset = {r.offset: r for r in log}
        missing = [r for r in crashed.acked[partition] if by_offset.get(r.offset) != r]
        assert not missing, f"partition {partition}: {len(missing)} acknowledged records lost"


@LOOKUPS
@given(data=st.data())
def test_offsets_for_times_are_exact_on_the_recovered_log(
    clients: Clients, crashed: Crash, data: st.DataObject,
) -> None:
    assert_lookups_exact(clients, crashed.topic, targets_from(data, crashed.topic))
