"""Apache Kafka 4.x beside Chronolog: the same clients, the same records, one run.

Both brokers run at once on 127.0.0.1 (Kafka from tools/kafka-ref, KRaft combined mode,
with the JVM options Kafka's own ``kafka-server-start.sh`` uses: 1 GiB heap, G1), and
each measurement runs on one broker right after the other, so both halves of a ratio
see the same moment of this shared machine:

- time from process start to serving, empty (Kafka: ``kafka-storage format`` included,
  as a first start needs it) and again after a clean shutdown with the records on disk;
- RSS idle, the peak under load, and after the load;
- produce: confluent-kafka, 1M x 100 B, acks=1, linger.ms=5 (records/s), and the
  broker's CPU per record (user + system of the whole process, JVM threads included);
- consume those records back (records/s, broker CPU per record);
- ListOffsets "first offset with timestamp >= T": the project's raw-socket client, one
  request in flight (p50, p99, lookups/s); both brokers must give the same answers;
- disk bytes per record of the partition (the ``.log`` alone, and every file's
  allocated blocks: Kafka preallocates its index files sparse).

The idle broker's own background work (Kafka's controller and log cleaner threads,
Chronolog's summaries) runs during the other's measurement; each CPU figure is charged
to the process that did the work. Both use Kafka's flush defaults (no fsync per write)
and ``log.retention.ms=-1`` (the records' 2023 timestamps would otherwise be expired).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.bench_broker import (
    RawClient,
    _list_offsets_body,
    _rss_mib,
    _time_calls,
    produce_stamped,
    wait_until_idle,
)
from bench.harness import SCALE, cpu_seconds, start_broker, stop_broker
from bench.report import Report, percentile
from tests.ecosystem.kafka_peer import KafkaNode, fetch, kafka_version

N = int(1_000_000 * SCALE)
N_WARM = max(10_000, N // 10)
N_LOOKUPS = max(2000, int(10_000 * min(SCALE, 1)))
T0 = 1_700_000_000_000
SECTION = "kafka 4.x beside"
TOPIC = "side-1m"
RETENTION = {"log.retention.ms": "-1"}
# kafka-server-start.sh's defaults (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
KAFKA_JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-Djava.awt.headless=true"]


@dataclass
class Side:
    """One broker under test: how to reach it, its pid, and where its partition lives."""

    name: str
    bootstrap: str
    port: int
    pid: Callable[[], int]
    partition_dir: Callable[[], Path]


class Peak:
    """The largest RSS of a process, sampled every 100 ms while the block runs."""

    def __init__(self, pid: int) -> None:
        self.pid, self.mib, self._stop = pid, 0.0, threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.mib = max(self.mib, _rss_mib(self.pid))
            self._stop.wait(0.1)

    @contextmanager
    def watching(self) -> Iterator[Peak]:
        t = threading.Thread(target=self._sample, daemon=True)
        t.start()
        try:
            yield self
        finally:
            self._stop.set()
            t.join()


def _create_topic(side: Side, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": side.bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "-1"})])
    futures[name].result(60)
    deadline = time.monotonic() + 30  # Kafka elects the leader shortly after the answer
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics[name]
        if md.error is None and md.partitions and md.partitions[0].leader >= 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{side.name}: {name} has no leader after 30 s")


def _produce(side: Side, topic: str, n: int, first: int = 0) -> tuple[float, float, float]:
    """(records/s, broker CPU µs per record, peak RSS MiB) for n records, timestamps
    T0 + first + i: the partition's timestamps grow with its offsets."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": side.bootstrap, "acks": 1, "linger.ms": 5,
                  "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    p.list_topics(topic, timeout=30)
    pid = side.pid()
    wait_until_idle(pid)
    with Peak(pid).watching() as peak:
        cpu0 = cpu_seconds(pid)
        started = time.perf_counter()
        left = produce_stamped(p, topic, range(T0 + first, T0 + first + n))
        elapsed = time.perf_counter() - started
        wait_until_idle(pid, window=1.5)  # background work the appends caused
        cpu = cpu_seconds(pid) - cpu0
    assert left == 0, f"{side.name}: {left} records not delivered"
    return n / elapsed, cpu / n * 1e6, peak.mib


def _consume(side: Side, topic: str, n: int) -> tuple[float, float]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": side.bootstrap, "group.id": "side", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                  "queued.max.messages.kbytes": 1048576, "queued.min.messages": 1_000_000,
                  "fetch.queue.backoff.ms": 0})
    c.assign([TopicPartition(topic, 0, 0)])
    pid = side.pid()
    got = 0
    cpu0 = cpu_seconds(pid)
    started = time.perf_counter()
    deadline = started + 180
    while got < n and time.perf_counter() < deadline:
        got += sum(1 for m in c.consume(10_000, timeout=1.0) if m.error() is None)
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu0
    c.close()
    assert got == n, f"{side.name}: consumed {got} of {n}"
    return n / elapsed, cpu / n * 1e6


def _lookups(side: Side, topic: str, targets: list[int]) -> tuple[list[float], float, list[int]]:
    c = RawClient(side.port)
    try:
        for t in targets[:500]:  # warm: connection, codecs, indexes (and Kafka's JIT)
            c.call(2, 7, _list_offsets_body(topic, t))
        answers = [c.call(2, 7, _list_offsets_body(topic, t)).topics[0].partitions[0].offset
                   for t in targets[:200]]
        lat, total = _time_calls(lambda t: c.call(2, 7, _list_offsets_body(topic, t)), targets)
    finally:
        c.close()
    return lat, total, answers


def _disk(side: Side) -> tuple[int, int]:
    """(bytes of .log files, allocated bytes of every file) of the partition's directory."""
    log_bytes = allocated = 0
    for f in side.partition_dir().iterdir():
        st = f.stat()
        allocated += st.st_blocks * 512
        if f.suffix == ".log":
            log_bytes += st.st_size
    return log_bytes, allocated


def _pair(report: Report, name: str, unit: str, ours: float, theirs: float, note: str = "") -> None:
    """One row per broker and the ratio in the note of Chronolog's row."""
    ratio = ours / theirs if theirs else float("nan")
    report.add(SECTION, f"{name} — Chronolog", ours, unit, note=f"{ratio:.2f}x Kafka's. {note}".strip())
    report.add(SECTION, f"{name} — Kafka {kafka_version()}", theirs, unit)


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    fetch(quiet=False)  # Kafka's jars from Maven Central into .cache/ (reused)
    data = root / "chronolog"

    started = time.perf_counter()
    proc, port = start_broker(root, data, RETENTION)
    ours_start = time.perf_counter() - started
    node = KafkaNode(root / "kafka", overrides=RETENTION, jvm_opts=KAFKA_JVM)
    started = time.perf_counter()
    try:
        node.start()
    except BaseException:
        stop_broker(proc)
        raise
    theirs_start = time.perf_counter() - started
    holder = {"proc": proc}
    ours = Side("Chronolog", f"127.0.0.1:{port}", port, lambda: holder["proc"].pid,
                lambda: data / f"{TOPIC}-0")
    theirs = Side("Kafka", node.bootstrap, node.port, lambda: node.proc.pid,  # type: ignore[union-attr]
                  lambda: node.data_dir / f"{TOPIC}-0")
    try:
        _pair(report, "start to serving, empty", "s", ours_start, theirs_start,
              "Kafka's figure includes kafka-storage format, which a first start needs")
        time.sleep(3)
        _pair(report, "RSS idle after start", "MiB", _rss_mib(ours.pid()), _rss_mib(theirs.pid()))
        for side in (ours, theirs):
            _create_topic(side, TOPIC)
            _create_topic(side, TOPIC + "-warm")
            _produce(side, TOPIC + "-warm", N_WARM)  # Kafka's JIT and both page caches warm
        # A B B A: each broker produces half the records twice, so a drift of the
        # machine's load over the run weighs on both alike.
        runs = {id(s): [] for s in (ours, theirs)}
        for side in (ours, theirs, theirs, ours):
            runs[id(side)].append(_produce(side, TOPIC, N // 2, len(runs[id(side)]) * (N // 2)))
        (o_rate, o_cpu, o_peak), (k_rate, k_cpu, k_peak) = (
            [sum(x) / 2 for x in zip(*runs[id(s)], strict=True)] for s in (ours, theirs))
        o_peak, k_peak = (max(r[2] for r in runs[id(s)]) for s in (ours, theirs))
        _pair(report, f"produce {N / 1e6:g}M x 100 B, confluent-kafka acks=1 linger 5 ms",
              "rec/s", o_rate, k_rate, "same producer settings, one partition; the mean of "
              "two halves, taking turns A B B A")
        _pair(report, "broker CPU per produced record", "µs", o_cpu, k_cpu,
              "whole process, until idle after the flush")
        _pair(report, "RSS peak while producing", "MiB", o_peak, k_peak)
        reads = {id(s): [] for s in (ours, theirs)}
        for side in (ours, theirs, theirs, ours):
            reads[id(side)].append(_consume(side, TOPIC, N // 2 * 2))
        (o_rate, o_cpu), (k_rate, k_cpu) = (
            [sum(x) / 2 for x in zip(*reads[id(s)], strict=True)] for s in (ours, theirs))
        _pair(report, "consume, confluent-kafka consumer", "rec/s", o_rate, k_rate,
              "every record, twice each, taking turns A B B A")
        _pair(report, "broker CPU per consumed record", "µs", o_cpu, k_cpu)
        rng = random.Random(5)
        targets = [T0 + rng.randrange(N) for _ in range(N_LOOKUPS)]
        (o_lat, o_total, o_ans), (k_lat, k_total, k_ans) = (
            _lookups(s, TOPIC, targets) for s in (ours, theirs))
        assert o_ans == k_ans, "Chronolog and Kafka answer ListOffsets differently"
        _pair(report, "ListOffsets by time p50", "µs", percentile(o_lat, 50), percentile(k_lat, 50),
              f"raw client, one request in flight, {N / 1e6:g}M records; same answers")
        _pair(report, "ListOffsets by time p99", "µs", percentile(o_lat, 99), percentile(k_lat, 99))
        _pair(report, "lookups/s, one client", "1/s", len(o_lat) / o_total, len(k_lat) / k_total)
        (o_log, o_all), (k_log, k_all) = _disk(ours), _disk(theirs)
        _pair(report, "disk bytes per record, .log", "B", o_log / N, k_log / N)
        _pair(report, "disk bytes per record, all files allocated", "B", o_all / N, k_all / N,
              "indexes and sidecars included")
        time.sleep(3)
        _pair(report, "RSS 3 s after the load", "MiB", _rss_mib(ours.pid()), _rss_mib(theirs.pid()))
        # Restart both with the records on disk, after a clean shutdown.
        stop_broker(holder["proc"], 60)
        node.stop()
        started = time.perf_counter()
        holder["proc"], _ = start_broker(root, data, RETENTION, port=port)
        ours_restart = time.perf_counter() - started
        started = time.perf_counter()
        node.start()
        _pair(report, f"start to serving, {(N + N_WARM) / 1e6:g}M records on disk", "s",
              ours_restart, time.perf_counter() - started, "after a clean shutdown")
    finally:
        stop_broker(holder["proc"], 60)
        node.stop()
