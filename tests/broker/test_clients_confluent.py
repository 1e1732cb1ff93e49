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
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tests.helpers.client_scenarios as scenarios
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    CODECS,
    Rec,
    fixed_records,
    running_broker,
    timestamp_lists,
    topic_name,
)
from tests.helpers.confluent import TIMEOUT, create_topic, produce


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, "confluent") as b:
        yield b


@pytest.fixture(scope="module")
def client(kb: BrokerProcess) -> Confluent:
    return Confluent(kb)


def consumer(b: BrokerProcess, group: str = "chronolog-tests", **conf: Any) -> Consumer:
    return Consumer({
        "bootstrap.servers": b.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 50,
        **conf,
    })


def polled(c: Consumer, n: int) -> list[Any]:
    msgs = c.consume(num_messages=n, timeout=0.5)
    for m in msgs:
        assert m.error() is None, m.error()
    return msgs


TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "create", TIMESTAMP_LOG_APPEND_TIME: "log_append"}


class Confluent(scenarios.Client):
    """confluent-kafka as the shared scenarios' Client."""

    lookup_timestamps = False  # librdkafka's offsets_for_times answers offsets only

    records = staticmethod(fixed_records)

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> None:
        create_topic(self.broker, name, partitions, config)

    def produce(self, topic: str, recs: list[Rec], partition: int = 0,
                compression: str | None = None, **conf: Any) -> list[int]:
        if compression is not None:
            conf["compression.type"] = compression
        return produce(self.broker, topic, recs, partition, **conf)

    def consume(self, topic: str, start: int, n: int, partition: int = 0) -> list[scenarios.Got]:
        """Read n messages from an absolute offset (assign + seek, no group membership)."""
        c = consumer(self.broker)
        try:
            c.assign([TopicPartition(topic, partition, start)])
            msgs = scenarios.collect(n, lambda k: polled(c, k), TIMEOUT)
        finally:
            c.close()
        out = []
        for m in msgs:
            ts_type, ts = m.timestamp()
            out.append(scenarios.Got(m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                           TIMESTAMP_TYPES.get(ts_type, ts_type), ts))
        return out

    def offsets_for_times(self, topic: str, times: list[int],
                          partition: int = 0) -> dict[int, scenarios.Found | None]:
        """One offsets_for_times call per time: a partition may appear once per ListOffsets."""
        c = consumer(self.broker)
        try:
            out: dict[int, scenarios.Found | None] = {}
            for t in times:
                (tp,) = c.offsets_for_times([TopicPartition(topic, partition, t)], timeout=TIMEOUT)
                assert tp.error is None, tp.error
                # librdkafka reports "no record at or after T" as OFFSET_END (-1).
                out[t] = None if tp.offset == OFFSET_END else scenarios.Found(tp.offset, None)
            return out
        finally:
            c.close()


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
def test_every_acks_setting_and_codec_round_trips_byte_exact(client: Confluent, compression: str) -> None:
    confs: list[dict[str, Any]] = [
        {"acks": 0}, {"acks": 1}, {"acks": "all"}, {"enable.idempotence": True},
    ]
    scenarios.every_acks_setting_round_trips(client, compression, confs, 40)


TestLookupsAndRecords = scenarios.lookup_and_record_tests((6, 4))


def test_log_append_time_topic_stamps_monotonic_broker_time_and_lookups_match(client: Confluent) -> None:
    scenarios.log_append_time_stamps_and_lookups(client, 30, 15, restart=False)


def test_lookups_and_data_survive_a_restart(client: Confluent) -> None:
    topic = topic_name("rs")
    client.create_topic(topic, partitions=2)
    recs = client.records(60, "restart", 0)
    stamped = {}
    for part in (0, 1):
        offs = client.produce(topic, recs, partition=part, compression="lz4")
        stamped[part] = [(o, r.timestamp) for o, r in zip(offs, recs, strict=True)]
    client.broker.restart()
    for part in (0, 1):
        scenarios.assert_same(client.consume(topic, 0, len(recs), partition=part), recs, 0)
        scenarios.check_lookups(client, topic, stamped[part], partition=part)
    more = client.records(5, "after", 0)
    assert client.produce(topic, more) == list(range(60, 65))


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


def test_committed_offsets_round_trip_and_resume_position(kb: BrokerProcess, client: Confluent) -> None:
    topic = scenarios.filled_topic(client, "co", 10, partitions=2)
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
        msgs = scenarios.collect(3, lambda k: c.consume(num_messages=k, timeout=0.5), TIMEOUT)
        assert [m.offset() for m in msgs] == [7, 8, 9]
    finally:
        c.close()


def test_auto_commit_stores_the_position_durably(kb: BrokerProcess, client: Confluent) -> None:
    topic = scenarios.filled_topic(client, "ac", 12)
    group = topic_name("auto")
    c = consumer(kb, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 100,
                               "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0)])
        assert len(scenarios.collect(12, lambda k: c.consume(num_messages=k, timeout=0.5), TIMEOUT)) == 12
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
    client: Confluent, batches: list[list[int]]
) -> None:
    """Tiny segments and index intervals put the lookups through segment selection,
    the time index and the offset index, not just one batch scan; checked again after
    a restart, when the indexes come from disk."""
    topic = topic_name("seg")
    value = b"x" * 300
    sizes = [61 + len(ts) * (len(value) + 30) for ts in batches]  # upper bounds per batch
    # Every batch fits a segment (else RECORD_LIST_TOO_LARGE), yet the log rolls.
    segment_bytes = max(max(sizes) + 100, sum(sizes) // 3)
    # ... and the batches surely fill more than one segment: each record carries at least
    # 9 bytes of overhead (a large batch after a tiny one could otherwise share a segment).
    assume(sum(61 + len(ts) * (len(value) + 9) for ts in batches) > segment_bytes)
    client.create_topic(topic, config={"segment.bytes": str(segment_bytes), "index.interval.bytes": "64"})
    stamped: list[tuple[int, int]] = []
    for n, timestamps in enumerate(batches):
        recs = [Rec(None, b"%d-%d:" % (n, i) + value, (), ts) for i, ts in enumerate(timestamps)]
        offsets = client.produce(topic, recs)
        stamped += list(zip(offsets, timestamps, strict=True))
    assert len(list((client.broker.data_dir / f"{topic}-0").glob("*.log"))) >= 2
    scenarios.check_lookups(client, topic, stamped)
    client.broker.restart()
    scenarios.check_lookups(client, topic, stamped)
