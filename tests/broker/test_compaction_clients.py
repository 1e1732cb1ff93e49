"""Log compaction through a real broker: confluent-kafka produces keyed records and
tombstones to a cleanup.policy=compact topic, the broker's cleaner compacts it, and
a consumer from offset 0 sees exactly the compacted view (checked against an oracle);
a record without a key is refused with INVALID_RECORD; a kill -9 while cleaning
leaves a log that reopens to the old or the compacted view, never a mix."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.helpers.compaction import OVERRIDES, cleaned_upto  # noqa: E402


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic]
    fut.result(timeout=20)


def _consume_all(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + 30
    try:
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                if out and out[-1][0] >= end - 1:
                    break
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(m.error())
            out.append((m.offset(), m.key(), m.value()))
            if m.offset() >= end - 1:
                break
    finally:
        c.close()
    return out


def _oracle(produced: list[tuple[int, bytes, bytes | None]], upto: int
            ) -> list[tuple[int, bytes, bytes | None]]:
    """Latest record per key below ``upto`` (tombstones kept: delete.retention.ms is
    long here), plus everything from ``upto`` on."""
    latest: dict[bytes, int] = {}
    for off, k, _v in produced:
        if off < upto:
            latest[k] = off
    return [r for r in produced if r[0] >= upto or latest[r[1]] == r[0]]


def test_consumer_from_offset_zero_sees_the_compacted_view(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(overrides=OVERRIDES)
    topic = "compacted"
    _create(b.bootstrap, topic, {"cleanup.policy": "compact", "segment.bytes": "4096",
                                 "min.cleanable.dirty.ratio": "0.01",
                                 "delete.retention.ms": "86400000"})
    rng = random.Random(7)
    # Idempotent: the cleaner keeps each producer's last batch as an empty batch when
    # all its records go, and the consumer must step over such batches.
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "compression.type": "lz4",
                  "enable.idempotence": True})
    produced: list[tuple[int, bytes, bytes | None]] = []

    def report(err, msg) -> None:  # type: ignore[no-untyped-def]
        assert err is None, err
        produced.append((msg.offset(), msg.key(), msg.value()))

    for i in range(600):
        key = f"key-{rng.randrange(40)}".encode()
        value = None if rng.random() < 0.1 else f"value-{i}".encode() * rng.randrange(1, 4)
        p.produce(topic, key=key, value=value, on_delivery=report)
        if i % 50 == 0:
            p.flush()
    p.flush()
    produced.sort()
    end = produced[-1][0] + 1
    # The cleaner compacts everything below the active segment; wait until it did.
    deadline = time.time() + 30
    seen = _consume_all(b.bootstrap, topic, end)
    while len(seen) == len(produced) and time.time() < deadline:
        time.sleep(0.3)
        seen = _consume_all(b.bootstrap, topic, end)
    assert len(seen) < len(produced), "the cleaner never compacted the topic"
    # Everything at or after the first surviving offset of the active part is kept:
    # the oracle's boundary is the first offset the cleaner did not touch.
    offsets = [o for o, _, _ in seen]
    assert offsets == sorted(set(offsets))
    upto = cleaned_upto(b.data_dir, topic)
    assert seen == _oracle(produced, upto)
    assert offsets[-1] == end - 1  # the active segment's records are all there


def _alive(pid: str) -> bool:
    """A process that runs (a zombie left to an init that does not reap is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status




def test_record_without_key_is_refused_with_invalid_record(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(overrides=OVERRIDES)
    _create(b.bootstrap, "needs-keys", {"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "retries": 0})
    errors: list[KafkaError] = []
    p.produce("needs-keys", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)  # its own batch: a batch with one keyless record fails whole, as in Kafka
    p.produce("needs-keys", key=b"k", value=b"keyed", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None


def test_broker_killed_while_cleaning_restarts_to_a_consistent_log(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """kill -9 of the broker while its cleaner works: after the restart every record a
    consumer reads is the one produced at its offset, each key's latest record is there
    (tombstones are kept a day), and the cleaner goes on to the compacted view."""
    b = broker_factory(overrides=OVERRIDES)
    topic = "killed"
    _create(b.bootstrap, topic, {"cleanup.policy": "compact", "segment.bytes": "65536",
                                 "min.cleanable.dirty.ratio": "0.01"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.size": 16384})
    produced: list[tuple[int, bytes, bytes | None]] = []

    def report(err, msg) -> None:  # type: ignore[no-untyped-def]
        assert err is None, err
        produced.append((msg.offset(), msg.key(), msg.value()))

    rng = random.Random(11)
    for i in range(20_000):
        key = f"key-{rng.randrange(300)}".encode()
        p.produce(topic, key=key, value=None if rng.random() < 0.05 else b"v%d" % i * 8,
                  on_delivery=report)
        if i % 2000 == 0:
            p.poll(0)
    p.flush(30)
    pid = b.proc.pid
    deadline = time.time() + 20
    while "chronolog.cleaner: cleaning" not in b.log() and time.time() < deadline:
        time.sleep(0.01)
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    b.kill()  # SIGKILL, while (or soon after) the cleaner starts
    deadline = time.time() + 10
    while any(_alive(c) for c in children) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(_alive(c) for c in children), "cleaner worker processes outlived the broker"
    b.start()
    produced.sort()
    end = produced[-1][0] + 1
    by_offset = {o: (k, v) for o, k, v in produced}
    latest = {k: o for o, k, _ in produced}
    seen = _consume_all(b.bootstrap, topic, end)
    assert all(by_offset[o] == (k, v) for o, k, v in seen)
    assert set(latest.values()) <= {o for o, _, _ in seen}
    deadline = time.time() + 30
    while time.time() < deadline:
        upto = cleaned_upto(b.data_dir, topic) if (b.data_dir / "cleaner-offset-checkpoint").exists() else 0
        if upto and _consume_all(b.bootstrap, topic, end) == _oracle(produced, upto):
            return
        time.sleep(0.3)
    raise AssertionError("the restarted broker's cleaner never reached the compacted view")
