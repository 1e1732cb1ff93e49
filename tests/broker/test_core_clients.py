"""librdkafka (confluent-kafka) against the real broker: produce, offsets_for_times, consume.

Every answer is checked against an oracle built from what was produced (or,
for LogAppendTime topics, from what the broker stamped, read back record by
record): the first offset whose timestamp >= T, by brute force. Topics use tiny
segments and index intervals so lookups cross segments and index entries.
Restarts (graceful and SIGKILL) must keep every acknowledged record.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given, settings
from hypothesis import strategies as st

# Producer batches stay below 4 KiB, so segments of 16 KiB roll every few batches.
SMALL_LOG = {"segment.bytes": "16384", "index.interval.bytes": "128"}
_names = itertools.count()


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


_ADMINS: dict[str, AdminClient] = {}


def create(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    client = _ADMINS.get(bootstrap)
    if client is None:
        client = _ADMINS[bootstrap] = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(name, partitions, 1, config=dict(configs or SMALL_LOG))], operation_timeout=10
    )
    for f in futures.values():
        f.result(timeout=10)


def producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                     "batch.size": 4096, **extra})


def consumer(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "core-tests",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 50})


Row = tuple[int, bytes | None, bytes | None]


def produce_all(p: Producer, topic: str, rows: Sequence[Row], partition: int = 0) -> list[int]:
    """Produce rows (timestamp, key, value); return the acknowledged offsets in order."""
    acked: dict[int, int] = {}
    errors: list[Any] = []

    def report(err: Any, msg: Any, i: int) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[i] = msg.offset()

    for i, (ts, key, value) in enumerate(rows):
        p.produce(topic, value=value, key=key, timestamp=ts, partition=partition,
                  on_delivery=functools.partial(_call, report, i))
    assert p.flush(30) == 0
    assert errors == []
    return [acked[i] for i in range(len(rows))]


def _call(fn: Any, i: int, err: Any, msg: Any) -> None:
    fn(err, msg, i)


def consume_all(c: Consumer, topic: str, partition: int, end: int) -> list[Any]:
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[Any] = []
    deadline = time.monotonic() + 30
    while (not out or out[-1].offset() < end - 1) and time.monotonic() < deadline:
        for m in c.consume(500, timeout=0.5):
            assert m.error() is None, m.error()
            out.append(m)
    c.unassign()
    return out


def first_at_or_after(timestamps: list[int], target: int) -> int:
    """The oracle: smallest offset whose timestamp >= target, -1 (librdkafka's END) if none."""
    return next((o for o, t in enumerate(timestamps) if t >= target), -1)


def check_lookups(c: Consumer, topic: str, timestamps: list[int], extra: list[int]) -> None:
    targets = sorted({t + d for t in timestamps for d in (-1, 0, 1)} | set(extra))
    targets = [t for t in targets if t >= 0]
    for chunk in range(0, len(targets), 200):
        tps = [TopicPartition(topic, 0, t) for t in targets[chunk:chunk + 200]]
        # One partition per request: librdkafka merges duplicate partitions otherwise.
        for tp in tps:
            got = c.offsets_for_times([tp], timeout=10)[0]
            assert got.error is None
            assert got.offset == first_at_or_after(timestamps, tp.offset), (tp.offset, got.offset)


NOW = int(time.time() * 1000)
timestamps_strategy = st.lists(
    st.one_of(
        st.integers(NOW - 10 * 86_400_000, NOW + 1_800_000),
        st.sampled_from([NOW - 5000, NOW - 5000, NOW, NOW + 1]),  # equal timestamps
    ),
    min_size=1,
    max_size=120,
)
values_strategy = st.one_of(st.none(), st.binary(max_size=300))


def test_offsets_for_times_and_consume_match_the_oracle_for_create_time(broker: Any) -> None:
    bs = broker.bootstrap
    p = producer(bs)
    c = consumer(bs)

    @settings(max_examples=12)
    @given(st.lists(st.tuples(timestamps_strategy, st.lists(values_strategy, min_size=120, max_size=120)),
                    min_size=1, max_size=3))
    def run(batches: list[tuple[list[int], list[bytes | None]]]) -> None:
        topic = f"ct-{next(_names)}"
        create(bs, topic)
        rows: list[Row] = []
        for tss, values in batches:  # each list is flushed on its own: one or more batches
            chunk = [(ts, b"k%d" % i if i % 3 else None, values[i]) for i, ts in enumerate(tss)]
            offsets = produce_all(p, topic, chunk)
            assert offsets == list(range(len(rows), len(rows) + len(chunk)))
            rows += chunk
        timestamps = [ts for ts, _, _ in rows]
        check_lookups(c, topic, timestamps, [0, NOW + 3_600_000])
        got = consume_all(c, topic, 0, len(rows))
        assert [m.offset() for m in got] == list(range(len(rows)))
        assert [(m.timestamp(), m.key(), m.value()) for m in got] == [
            ((TIMESTAMP_CREATE_TIME, ts), k, v) for ts, k, v in rows
        ]
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, len(rows))

    try:
        run()
    finally:
        c.close()


def test_log_append_time_topic_stamps_non_decreasing_broker_time_and_lookups_are_exact(broker: Any) -> None:
    bs = broker.bootstrap
    topic = "lat"
    create(bs, topic, configs={**SMALL_LOG, "message.timestamp.type": "LogAppendTime"})
    p = producer(bs)
    c = consumer(bs)
    sent = []
    before = int(time.time() * 1000)
    for round_ in range(6):
        rows = [(NOW - 86_400_000 * (i % 3), None, b"r%d-%d" % (round_, i)) for i in range(40)]
        produce_all(p, topic, rows)
        sent += rows
        time.sleep(0.01)
    after = int(time.time() * 1000)
    got = consume_all(c, topic, 0, len(sent))
    assert [m.value() for m in got] == [v for _, _, v in sent]
    kinds = {m.timestamp()[0] for m in got}
    assert kinds == {TIMESTAMP_LOG_APPEND_TIME}
    stamped = [m.timestamp()[1] for m in got]
    assert stamped == sorted(stamped)
    assert before <= stamped[0] and stamped[-1] <= after
    check_lookups(c, topic, stamped, [0, before - 1, after + 1])
    c.close()


def _record_outcome(outcome: dict[tuple[int, int], Any], key: tuple[int, int], err: Any,
                    msg: Any) -> None:
    outcome[key] = err


def test_invalid_timestamp_rejects_the_whole_batch_and_other_partitions_succeed(broker: Any) -> None:
    bs = broker.bootstrap
    create(bs, "future", partitions=2, configs={"message.timestamp.after.max.ms": "60000"})
    p = producer(bs, **{"linger.ms": 200})
    outcome: dict[tuple[int, int], Any] = {}
    far = int(time.time() * 1000) + 3_600_000
    for i in range(5):
        ts = far if i == 2 else NOW
        p.produce("future", value=b"a%d" % i, timestamp=ts, partition=0,
                  on_delivery=functools.partial(_record_outcome, outcome, (0, i)))
        p.produce("future", value=b"b%d" % i, timestamp=NOW, partition=1,
                  on_delivery=functools.partial(_record_outcome, outcome, (1, i)))
    p.flush(30)
    assert all(outcome[(1, i)] is None for i in range(5))
    assert all(outcome[(0, i)] is not None and outcome[(0, i)].code() == 32 for i in range(5))
    low, high = consumer(bs).get_watermark_offsets(TopicPartition("future", 0), timeout=10)
    assert (low, high) == (0, 0)


def test_unknown_topic_without_auto_create_is_an_error_to_the_producer(broker_factory: Any) -> None:
    b = broker_factory(overrides={"auto.create.topics.enable": "false"})
    p = producer(b.bootstrap, **{"message.timeout.ms": 3000})
    errors: list[Any] = []
    p.produce("nope", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None
    assert "nope" not in admin(b.bootstrap).list_topics(timeout=5).topics


def test_auto_create_on_produce_uses_num_partitions(broker_factory: Any) -> None:
    b = broker_factory(overrides={"num.partitions": "3"})
    p = producer(b.bootstrap)
    produce_all(p, "auto", [(NOW, None, b"x")])
    md = admin(b.bootstrap).list_topics(timeout=5).topics["auto"]
    assert sorted(md.partitions) == [0, 1, 2]


def _produce_rounds(bs: str, topic: str, rounds: int, per_round: int) -> list[int]:
    p = producer(bs)
    timestamps: list[int] = []
    for r in range(rounds):
        rows = [(NOW - (r * per_round + i) * 37 % 100_000, None, b"v" * (i % 50)) for i in range(per_round)]
        produce_all(p, topic, rows)
        timestamps += [ts for ts, _, _ in rows]
    return timestamps


def test_graceful_restart_keeps_data_and_exact_lookups(broker: Any) -> None:
    create(broker.bootstrap, "keep")
    timestamps = _produce_rounds(broker.bootstrap, "keep", 5, 80)
    broker.restart()
    assert "logs were recovered" not in broker.log().split("chronolog broker ready")[-1]
    c = consumer(broker.bootstrap)
    check_lookups(c, "keep", timestamps, [0])
    assert len(consume_all(c, "keep", 0, len(timestamps))) == len(timestamps)
    # Appends continue at the right offset after the restart.
    more = produce_all(producer(broker.bootstrap), "keep", [(NOW, None, b"after")])
    assert more == [len(timestamps)]
    c.close()


def test_sigkill_keeps_every_acknowledged_record(broker: Any) -> None:
    create(broker.bootstrap, "crash")
    timestamps = _produce_rounds(broker.bootstrap, "crash", 5, 80)
    broker.kill()
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()
    broker.start()
    c = consumer(broker.bootstrap)
    got = consume_all(c, "crash", 0, len(timestamps))
    assert [m.timestamp()[1] for m in got] == timestamps
    check_lookups(c, "crash", timestamps, [0])
    c.close()


def test_created_topic_configs_survive_restart(broker: Any) -> None:
    create(broker.bootstrap, "cfg", configs={"message.timestamp.type": "LogAppendTime",
                                             "retention.ms": "123456789"})
    broker.restart()
    client = admin(broker.bootstrap)
    res = client.create_topics([NewTopic("cfg", 1, 1)])
    try:
        res["cfg"].result(timeout=10)
        raise AssertionError("topic was re-created")
    except KafkaException as exc:
        assert exc.args[0].code() == 36  # TOPIC_ALREADY_EXISTS
    before = int(time.time() * 1000)
    produce_all(producer(broker.bootstrap), "cfg", [(NOW - 86_400_000, None, b"x")])
    got = consume_all(consumer(broker.bootstrap), "cfg", 0, 1)
    assert got[0].timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
    assert got[0].timestamp()[1] >= before
