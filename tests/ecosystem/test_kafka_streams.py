"""Kafka Streams (kafka-streams 4.x) against Chronolog: a windowed count by event time, exactly once.

tools/kafka-ref/java/StreamsCheck.java (JEP 330, no build) re-keys sensor readings by room
(``groupBy``: a repartition topic), counts them per room in tumbling event-time windows
(``TimeWindows``: a window store with a changelog topic) and writes every update with
``processing.guarantee=exactly_once_v2``; its record cache is off, so each counted record
makes exactly one update. The input is produced with out-of-order timestamps, and a few
records so late that Streams must drop them.

The oracle, computed here from the input alone: each (room, window) gets the updates
1, 2, …, n in that order, n being how many of its records are not late, and nothing else
(no duplicate, no update for a dropped record). The output is read ``read_committed``.
A record is *surely late* when an earlier record of its room in the same input partition
(so processed before it by the same task) is more than grace + window ahead of it; every
other record is *surely kept*: the input is built so no record is in between.

Across a restart, the Chronolog broker is stopped (SIGKILL in ``make test``; also SIGTERM,
and no restart at all, under ``make test-ecosystem``) and started again while the app runs,
between two halves of the second batch: the app rides it out, and the output is still exact.
Under ``make test-ecosystem`` the same run (restarted with SIGTERM) goes against the real
Kafka too, so the oracle is checked against Kafka's own behaviour.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerProcess, free_port_number
from tests.ecosystem.kafka_peer import JAVA_SOURCES, KafkaNode, kafkaref

WINDOW_MS = 10_000
GRACE_MS = 120_000
SPREAD_MS = 60_000  # normal records lie in [BASE, BASE + SPREAD): never late (GRACE > SPREAD + WINDOW)
LATE_MS = 3_600_000  # late records are an hour before BASE: always dropped
ROOMS = ("kitchen", "hall", "attic", "cellar")
PARTITIONS = 2
BASE = (int(time.time() * 1000) - 7_200_000) // WINDOW_MS * WINDOW_MS

Record = tuple[int, str, str, int]  # partition, sensor, room, timestamp


def make_input(seed: int, n: int, late: int) -> list[Record]:
    """``n`` normal records (out of order) and ``late`` records each after a normal record
    of its room in its partition."""
    rnd = random.Random(seed)
    records: list[Record] = []
    for i in range(n):
        records.append((i % PARTITIONS, f"s{i % 7}", rnd.choice(ROOMS),
                        BASE + rnd.randrange(SPREAD_MS)))
    for j in range(late):
        p, _, room, _ = records[rnd.randrange(len(records))]
        records.append((p, f"late{j}", room, BASE - LATE_MS + rnd.randrange(SPREAD_MS)))
    return records


def expected_output(records: list[Record]) -> dict[str, list[int]]:
    """room@windowStart -> the counts Streams must write for it, in order."""
    counts: Counter[str] = Counter()
    newest: dict[tuple[int, str], int] = {}  # (partition, room) -> max timestamp so far
    for p, _, room, ts in records:
        seen = newest.get((p, room))
        start = ts - ts % WINDOW_MS
        if seen is not None and start + WINDOW_MS <= seen - GRACE_MS:
            continue  # surely late: dropped
        assert ts >= BASE, "a record that is neither surely late nor surely kept"
        newest[(p, room)] = max(ts, seen or ts)
        counts[f"{room}@{start}"] += 1
    return {k: list(range(1, n + 1)) for k, n in counts.items()}


def produce(bootstrap: str, topic: str, records: list[Record]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors: list[Any] = []
    for part, sensor, room, ts in records:
        p.produce(topic, room.encode(), sensor.encode(), partition=part, timestamp=ts,
                  on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(30) == 0 and not errors, errors


def read_output(bootstrap: str, topic: str, want: int, timeout: float = 90.0,
                app: StreamsApp | None = None) -> list[tuple[str, int]]:
    """Every committed record of ``topic`` (one partition): polled until at least ``want``
    are there and then a second passes with nothing more (so a duplicate would be seen)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    out: list[tuple[str, int]] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append((m.key().decode(), int(m.value())))
                quiet = 0
            elif m is None and len(out) >= want:
                quiet += 1
                if quiet == 5:
                    break
            if app is not None:
                app.check_alive()
    finally:
        c.close()
    return out


class StreamsApp:
    """StreamsCheck.java as a subprocess; its JSON lines collected as they come."""

    def __init__(self, bootstrap: str, app_id: str, source: str, sink: str, state: Path) -> None:
        cmd = kafkaref.java_cmd(str(JAVA_SOURCES / "StreamsCheck.java"), bootstrap, app_id,
                                source, sink, str(state), str(WINDOW_MS), str(GRACE_MS))
        self.log = state.parent / f"{app_id}.stderr"
        self._stderr = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True)
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def states(self) -> list[str]:
        return [e["to"] for e in self.events if e["event"] == "state"]

    def check_alive(self) -> None:
        bad = [e for e in self.events if e["event"] == "uncaught" or e.get("to") == "ERROR"]
        if bad or self.proc.poll() is not None:
            raise AssertionError(f"the Streams app failed: {bad or self.proc.returncode}\n"
                                 f"{self.log.read_text(errors='replace')[-6000:]}")

    def wait_running(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while "RUNNING" not in self.states():
            self.check_alive()
            assert time.monotonic() < deadline, f"not RUNNING after {timeout}s: {self.events}"
            time.sleep(0.1)

    def close(self) -> dict[str, Any]:
        """Ask it to stop; its "closed" line."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        self._stderr.close()
        closed = [e for e in self.events if e["event"] == "closed"]
        return closed[-1] if closed else {"event": "closed", "clean": False,
                                          "returncode": self.proc.returncode}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "chronolog"
    data.mkdir()
    b = BrokerProcess(data, free_port_number(), {"group.initial.rebalance.delay.ms": "0"}).start()
    yield b
    assert b.stop() == 0, b.log()


def _wait_consumed(bootstrap: str, app_id: str, topics: list[str], timeout: float = 60.0) -> None:
    """Until the app's committed offsets reach the end of every partition of ``topics``:
    each record there has been processed (and its transaction committed)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            md = admin.list_topics(timeout=10).topics
            tps = [TopicPartition(t, p) for t in topics for p in md[t].partitions]
            committed = {(tp.topic, tp.partition): tp.offset for tp in c.committed(tps, timeout=10)}
            ends = {(tp.topic, tp.partition): c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
            # A partition nothing went to has no commit: -1001 (OFFSET_INVALID) at end 0.
            if all(committed[tp] == end or (end == 0 and committed[tp] < 0)
                   for tp, end in ends.items()):
                return
            assert time.monotonic() < deadline, f"not consumed: {committed} vs {ends}"
            time.sleep(0.2)
    finally:
        c.close()


def run_streams(broker: BrokerProcess | KafkaNode, tmp: Path, restart: signal.Signals | None) -> None:
    """``broker``: Chronolog, or the real Kafka (the same app, input and oracle)."""
    app_id = f"wc-{time.time_ns() % 10**9}"
    source, sink = f"{app_id}-in", f"{app_id}-out"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(source, PARTITIONS, 1), NewTopic(sink, 1, 1)]).values():
        f.result(15)
    first = make_input(1, 80, late=8)
    second = make_input(2, 80, late=0)
    app = StreamsApp(broker.bootstrap, app_id, source, sink, tmp / "state")
    try:
        app.wait_running()
        produce(broker.bootstrap, source, first)
        want = expected_output(first)
        got = read_output(broker.bootstrap, sink, sum(map(len, want.values())), app=app)
        repartition = f"{app_id}-by-room-repartition"
        _wait_consumed(broker.bootstrap, app_id, [source, repartition])
        _check(got, want)

        half = len(second) // 2
        produce(broker.bootstrap, source, second[:half])
        if restart is not None:
            if isinstance(broker, KafkaNode):
                broker.stop()  # SIGTERM: a clean shutdown
            else:
                broker.stop(restart)
            time.sleep(1.0)
            broker.start()
        produce(broker.bootstrap, source, second[half:])
        want = expected_output(first + second)
        got = read_output(broker.bootstrap, sink, sum(map(len, want.values())), app=app)
        _wait_consumed(broker.bootstrap, app_id, [source, repartition])
        got = read_output(broker.bootstrap, sink, sum(map(len, want.values())), timeout=5)
        _check(got, want)
        app.check_alive()
        _check_internal_topics(broker.bootstrap, app_id)
    finally:
        closed = app.close()
    assert closed["clean"] is True and closed["state"] == "NOT_RUNNING", (closed, app.events)


def _check(got: list[tuple[str, int]], want: dict[str, list[int]]) -> None:
    by_key: dict[str, list[int]] = defaultdict(list)
    for key, n in got:
        by_key[key].append(n)
    assert dict(by_key) == want


def _check_internal_topics(bootstrap: str, app_id: str) -> None:
    """Streams created its changelog and repartition topics with its configs, and purges
    the repartition topic with DeleteRecords."""
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    changelog, repartition = f"{app_id}-counts-changelog", f"{app_id}-by-room-repartition"
    res = [ConfigResource("topic", changelog), ConfigResource("topic", repartition)]
    configs = {r.name: {k: v.value for k, v in f.result(15).items()}
               for r, f in admin.describe_configs(res).items()}
    assert configs[changelog]["cleanup.policy"] == "compact,delete"
    assert configs[changelog]["retention.ms"] == str(WINDOW_MS + GRACE_MS + 86_400_000)
    assert configs[repartition]["cleanup.policy"] == "delete"
    assert configs[repartition]["retention.ms"] == "-1"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        md = admin.list_topics(timeout=10).topics[repartition].partitions
        low = {p: c.get_watermark_offsets(TopicPartition(repartition, p), timeout=10)[0] for p in md}
    finally:
        c.close()
    assert any(low.values()), f"the repartition topic was never purged: {low}"


@pytest.mark.ecosystem_full
def test_streams_windowed_count_exactly_once(broker: BrokerProcess, tmp_path: Path,
                                             kafka_classpath: str) -> None:
    run_streams(broker, tmp_path, restart=None)


@pytest.mark.parametrize("stop", [pytest.param(signal.SIGTERM, marks=pytest.mark.ecosystem_full),
                                  signal.SIGKILL], ids=["stop", "kill"])
def test_streams_windowed_count_exactly_once_across_a_broker_restart(
        broker: BrokerProcess, tmp_path: Path, kafka_classpath: str, stop: signal.Signals) -> None:
    run_streams(broker, tmp_path, restart=stop)


@pytest.mark.ecosystem_full
def test_streams_windowed_count_exactly_once_on_kafka_across_a_restart(
        kafka_node: KafkaNode, tmp_path: Path) -> None:
    """The same app, input and oracle against the real Kafka: the oracle is Kafka's
    behaviour too, not only what Chronolog does."""
    run_streams(kafka_node, tmp_path, restart=signal.SIGTERM)
