"""Kafka's DumpLogSegments reads the segments Chronolog's log cleaner rewrote.

librdkafka produces keyed records, overwrites and tombstones with out-of-order
CreateTime timestamps (idempotent, lz4) to a ``cleanup.policy=compact`` topic with
small segments; Chronolog's cleaner compacts everything below the active segment; after
a clean shutdown Kafka's tool verifies every ``.log``, ``.index`` and ``.timeindex``
(deep iteration, index verification, sanity check) and its records must be exactly
the compacted view: the latest record per key below the cleaned offset (tombstones
kept, ``delete.retention.ms`` is a day), everything from there on. (The tool also
notes "Non-consecutive offsets" on stderr: the gaps compaction leaves, as in Kafka.)
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerProcess, free_port_number
from tests.ecosystem import dumplog
from tests.ecosystem.kafka_peer import DUMP_LOG, tool

TOPIC = "compacted"
BASE_TS = int(time.time() * 1000) - 3_600_000
OVERRIDES = {"log.cleaner.backoff.ms": "50", "log.retention.check.interval.ms": "3600000"}
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "4096", "index.interval.bytes": "100",
           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"}

Produced = list[tuple[int, int, str, str | None]]  # offset, timestamp, key, value


def _cleaned_upto(data_dir: Path) -> int | None:
    path = data_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        parts = line.split()
        if parts and parts[0] == TOPIC:
            return int(parts[2])
    return None


@pytest.fixture(scope="module")
def compacted(module_tmp: Path, kafka_classpath: str) -> Iterator[tuple[Produced, int, Path, str]]:
    data = module_tmp / "data"
    data.mkdir()
    broker = BrokerProcess(data, free_port_number(), OVERRIDES).start()
    produced: Produced = []
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=CONFIGS)])[TOPIC].result(15)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                      "compression.type": "lz4", "enable.idempotence": True})
        rnd = random.Random(27)

        def report(err: object, msg: object) -> None:
            assert err is None, err
            value = msg.value()  # type: ignore[attr-defined]
            produced.append((msg.offset(), msg.timestamp()[1],  # type: ignore[attr-defined]
                             msg.key().decode(), None if value is None else value.decode()))  # type: ignore[attr-defined]

        for i in range(600):
            key = f"key-{rnd.randrange(40)}"
            value = None if rnd.random() < 0.1 else f"value-{i}" * rnd.randrange(1, 4)
            p.produce(TOPIC, key=key, value=value, timestamp=BASE_TS + rnd.randrange(100_000),
                      on_delivery=report)
            if i % 50 == 0:
                p.flush(15)
        assert p.flush(15) == 0
        deadline = time.monotonic() + 60
        while _cleaned_upto(data) is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        code = broker.stop()
    assert code == 0, broker.log()
    upto = _cleaned_upto(data)
    assert upto is not None, "the cleaner never compacted the topic"
    partition_dir = data / f"{TOPIC}-0"
    files = sorted(str(p) for p in partition_dir.iterdir()
                   if p.suffix in (".log", ".index", ".timeindex"))
    outputs = "\n".join(
        (lambda proc: proc.stdout + proc.stderr)(tool(DUMP_LOG, "--files", ",".join(files), *mode))
        for mode in (["--deep-iteration", "--print-data-log"], ["--verify-index-only"],
                     ["--index-sanity-check"]))
    yield sorted(produced), upto, partition_dir, outputs


def test_kafka_finds_the_compacted_segments_valid(compacted: tuple[Produced, int, Path, str]) -> None:
    _, _, partition_dir, outputs = compacted
    assert dumplog.errors(outputs) == [], outputs
    for p in partition_dir.iterdir():
        if p.suffix in (".index", ".timeindex"):  # a segment the cleaner emptied: "is empty."
            assert f"{p} passed sanity check." in outputs or f"{p} is empty." in outputs


def test_dumped_records_are_exactly_the_compacted_view(compacted: tuple[Produced, int, Path, str]) -> None:
    produced, upto, partition_dir, outputs = compacted
    latest: dict[str, int] = {}
    for offset, _, key, _ in produced:
        if offset < upto:
            latest[key] = offset
    want = [(o, t, k, v) for o, t, k, v in produced if o >= upto or latest[k] == o]
    assert len(want) < len(produced)  # the cleaner removed something
    files = dumplog.parse(outputs)
    got = [(int(r["offset"]), int(r["CreateTime"]), r["key"], r.get("payload"))  # tombstone: none
           for log in sorted(partition_dir.glob("*.log")) for r in files[str(log)].records]
    assert got == want
