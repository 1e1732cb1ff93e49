"""confluent-kafka (librdkafka) against the real broker, with no special settings.

librdkafka is the strictest of the three clients: it negotiates every API version,
defaults to ``isolation.level=read_committed`` (LATEST = last stable offset), always
sends FindCoordinator because ``group.id`` is mandatory, and enables compression only
when Produce v0 is advertised.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    CODECS,
    Rec,
    assert_appended_after,
    assert_stored_with,
    first_at_or_after,
    fixed_records,
    index_valued,
    probe_times,
    records,
    running_broker,
    timestamp_lists,
    topic_name,
)
from tests.helpers.confluent import TIMEOUT, create_topic, produce


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, "confluent") as b:
        yield b






def consumer(b: BrokerProcess, group: str = "chronolog-tests", **conf: Any) -> Consumer:
    return Consumer({
        "bootstrap.servers": b.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 50,
        **conf,
    })


def consume(b: BrokerProcess, topic: str, start: int, n: int, partition: int = 0) -> list[object]:
    """Read n messages from an absolute offset (assign + seek, no group membership)."""
    c = consumer(b)
    try:
        c.assign([TopicPartition(topic, partition, start)])
        got: list[object] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(num_messages=n - len(got), timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m)
        assert len(got) == n
        return got
    finally:
        c.close()


def assert_same(msgs: list[object], recs: list[Rec], first_offset: int, log_append: bool = False) -> None:
    for i, (m, r) in enumerate(zip(msgs, recs, strict=True)):
        assert m.offset() == first_offset + i  # type: ignore[attr-defined]
        assert m.key() == r.key  # type: ignore[attr-defined]
        assert m.value() == r.value  # type: ignore[attr-defined]
        assert tuple(m.headers() or ()) == r.headers  # type: ignore[attr-defined]
        ts_type, ts = m.timestamp()  # type: ignore[attr-defined]
        if not log_append:
            assert (ts_type, ts) == (TIMESTAMP_CREATE_TIME, r.timestamp)
        else:
            assert ts_type == TIMESTAMP_LOG_APPEND_TIME


def lookups(b: BrokerProcess, topic: str, times: list[int], partition: int = 0) -> dict[int, int]:
    """One offsets_for_times call per time: a partition may appear once per ListOffsets."""
    c = consumer(b)
    try:
        out = {}
        for t in times:
            (tp,) = c.offsets_for_times([TopicPartition(topic, partition, t)], timeout=TIMEOUT)
            assert tp.error is None, tp.error
            out[t] = tp.offset
        return out
    finally:
        c.close()


def check_lookups(b: BrokerProcess, topic: str, stamped: list[tuple[int, int]]) -> None:
    times = probe_times([ts for _, ts in stamped])
    got = lookups(b, topic, times)
    for t in times:
        expect = first_at_or_after(stamped, t)
        # librdkafka reports "no record at or after T" as OFFSET_END (-1).
        assert got[t] == (expect if expect is not None else -1), (t, stamped)


def test_admin_creates_topics_and_metadata_lists_them(kb: BrokerProcess) -> None:
    name = topic_name("adm")
    create_topic(kb, name, partitions=3, config={"message.timestamp.type": "LogAppendTime"})
    md = AdminClient({"bootstrap.servers": kb.bootstrap}).list_topics(timeout=TIMEOUT)
    assert sorted(md.topics[name].partitions) == [0, 1, 2]
    admin = AdminClient({"bootstrap.servers": kb.bootstrap})
    again = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as exc:
        again[name].result(TIMEOUT)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("compression", ("none", *CODECS))
def test_every_acks_setting_and_codec_round_trips_byte_exact(kb: BrokerProcess, compression: str) -> None:
    topic = topic_name(f"rt-{compression}")
    create_topic(kb, topic)
    sent: list[Rec] = []
    confs: list[dict[str, Any]] = [
        {"acks": 0}, {"acks": 1}, {"acks": "all"}, {"enable.idempotence": True},
    ]
    for seed, conf in enumerate(confs):
        recs = fixed_records(40, compression, seed * 40)
        offsets = produce(kb, topic, recs, **{"compression.type": compression, **conf})
        assert_appended_after(sent, recs, offsets, conf)
        sent += recs
    assert_same(consume(kb, topic, 0, len(sent)), sent, 0)
    assert_stored_with(kb, topic, compression)


@settings(max_examples=6)
@given(timestamps=timestamp_lists)
def test_offsets_for_times_matches_the_oracle_with_unordered_and_equal_create_times(
    kb: BrokerProcess, timestamps: list[int]
) -> None:
    topic = topic_name("oft")
    create_topic(kb, topic)
    recs = index_valued(timestamps)
    offsets = produce(kb, topic, recs)
    check_lookups(kb, topic, list(zip(offsets, timestamps, strict=True)))


@settings(max_examples=4)
@given(recs=st.lists(records, min_size=1, max_size=30))
def test_arbitrary_records_read_back_exactly_and_lookups_match(
    kb: BrokerProcess, recs: list[Rec]
) -> None:
    topic = topic_name("arb")
    create_topic(kb, topic)
    offsets = produce(kb, topic, recs)
    assert_same(consume(kb, topic, 0, len(recs)), recs, 0)
    check_lookups(kb, topic, [(o, r.timestamp) for o, r in zip(offsets, recs, strict=True)])


def test_log_append_time_topic_stamps_monotonic_broker_time_and_lookups_match(kb: BrokerProcess) -> None:
    topic = topic_name("lat")
    create_topic(kb, topic, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    recs = fixed_records(30, "lat")
    produce(kb, topic, recs[:15])
    produce(kb, topic, recs[15:])
    after = int(time.time() * 1000)
    msgs = consume(kb, topic, 0, len(recs))
    assert_same(msgs, recs, 0, log_append=True)
    stamped = [(m.offset(), m.timestamp()[1]) for m in msgs]  # type: ignore[attr-defined]
    stamps = [ts for _, ts in stamped]
    assert stamps == sorted(stamps)
    assert before - 1000 <= stamps[0] and stamps[-1] <= after + 1000
    check_lookups(kb, topic, stamped)


def test_lookups_and_data_survive_a_restart(kb: BrokerProcess) -> None:
    topic = topic_name("rs")
    create_topic(kb, topic, partitions=2)
    recs = fixed_records(60, "restart")
    stamped = {}
    for part in (0, 1):
        offs = produce(kb, topic, recs, partition=part, **{"compression.type": "lz4"})
        stamped[part] = [(o, r.timestamp) for o, r in zip(offs, recs, strict=True)]
    kb.restart()
    for part in (0, 1):
        assert_same(consume(kb, topic, 0, len(recs), partition=part), recs, 0)
        times = probe_times([ts for _, ts in stamped[part]])
        got = lookups(kb, topic, times, partition=part)
        for t in times:
            e = first_at_or_after(stamped[part], t)
            assert got[t] == (e if e is not None else -1)
    more = fixed_records(5, "after")
    assert produce(kb, topic, more) == list(range(60, 65))


def test_watermarks_under_default_read_committed(kb: BrokerProcess) -> None:
    topic = topic_name("wm")
    create_topic(kb, topic)
    c = consumer(kb)  # librdkafka's default isolation.level is read_committed
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT, cached=False) == (0, 0)
        produce(kb, topic, fixed_records(17, "wm"))
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT, cached=False) == (0, 17)
        # BEGINNING / END logical offsets resolve through ListOffsets -2 / -1.
        c.assign([TopicPartition(topic, 0, -1)])  # OFFSET_END
        assert c.consume(num_messages=1, timeout=1.0) == []
        # END starts after the 17 existing records. Keep adding one until the consumer,
        # whose END resolution may lag on a loaded machine, sees them.
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while not got and time.monotonic() < deadline:
            produce(kb, topic, fixed_records(1, "late"))
            got = c.consume(num_messages=1, timeout=1.0)
        assert got and got[0].offset() >= 17
    finally:
        c.close()


def test_committed_offsets_round_trip_and_resume_position(kb: BrokerProcess) -> None:
    topic = topic_name("co")
    create_topic(kb, topic, partitions=2)
    produce(kb, topic, fixed_records(10, "co"))
    group = topic_name("group")
    c = consumer(kb, group)
    try:
        assert [tp.offset for tp in c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)] == [-1001]
        c.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 0)], asynchronous=False)
        got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=TIMEOUT)
        assert [(tp.partition, tp.offset, tp.error) for tp in got] == [(0, 7, None), (1, 0, None)]
    finally:
        c.close()
    # A new consumer of the group, assigned without an offset, starts at the commit
    # (librdkafka: FindCoordinator + OffsetFetch).
    c = consumer(kb, group)
    try:
        c.assign([TopicPartition(topic, 0)])
        msgs: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while len(msgs) < 3 and time.monotonic() < deadline:
            msgs += c.consume(num_messages=3 - len(msgs), timeout=0.5)
        assert [m.offset() for m in msgs] == [7, 8, 9]
    finally:
        c.close()


def test_auto_commit_stores_the_position_durably(kb: BrokerProcess) -> None:
    topic = topic_name("ac")
    create_topic(kb, topic)
    produce(kb, topic, fixed_records(12, "ac"))
    group = topic_name("auto")
    c = consumer(kb, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 100,
                               "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0)])
        n = 0
        deadline = time.monotonic() + TIMEOUT
        while n < 12 and time.monotonic() < deadline:
            n += len(c.consume(num_messages=12, timeout=0.5))
        assert n == 12
    finally:
        c.close()  # commits the final position
    kb.restart()
    c = consumer(kb, group)
    try:
        assert [tp.offset for tp in c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)] == [12]
    finally:
        c.close()


def test_transactional_producer_initialises_and_commits(kb: BrokerProcess) -> None:
    """More in tests/broker/test_transactions_confluent.py."""
    p = Producer({"bootstrap.servers": kb.bootstrap, "transactional.id": "tx-1"})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce("tx-plain", value=b"v")
    p.commit_transaction(TIMEOUT)


@settings(max_examples=4)
@given(batches=st.lists(timestamp_lists, min_size=2, max_size=6))
def test_lookups_across_many_segments_and_index_entries_match_the_oracle(
    kb: BrokerProcess, batches: list[list[int]]
) -> None:
    """Tiny segments and index intervals put the lookups through segment selection,
    the time index and the offset index, not just one batch scan; checked again after
    a restart, when the indexes come from disk."""
    topic = topic_name("seg")
    value = b"x" * 300
    sizes = [61 + len(ts) * (len(value) + 30) for ts in batches]  # upper bounds per batch
    # Every batch fits a segment (else RECORD_LIST_TOO_LARGE), yet the log rolls.
    segment_bytes = max(max(sizes) + 100, sum(sizes) // 3)
    create_topic(kb, topic, config={"segment.bytes": str(segment_bytes), "index.interval.bytes": "64"})
    stamped: list[tuple[int, int]] = []
    for n, timestamps in enumerate(batches):
        recs = [Rec(None, b"%d-%d:" % (n, i) + value, (), ts) for i, ts in enumerate(timestamps)]
        offsets = produce(kb, topic, recs)
        stamped += list(zip(offsets, timestamps, strict=True))
    assert len(list((kb.data_dir / f"{topic}-0").glob("*.log"))) >= 2
    check_lookups(kb, topic, stamped)
    kb.restart()
    check_lookups(kb, topic, stamped)
