"""kafka-python 3 against the real broker, with no special settings.

kafka-python 3 defaults to an idempotent producer with acks=all (InitProducerId, then
sequence-numbered batches), negotiates API versions up to ListOffsets v11 / Fetch v12,
and reports "no record at or after T" as None. Only gzip is tested for it: snappy, lz4
and zstd need optional packages (python-snappy, lz4, zstandard) that are not installed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    Rec,
    assert_appended_after,
    assert_stored_with,
    first_at_or_after,
    fixed_records,
    for_kafka_python,
    index_valued,
    probe_times,
    records,
    running_broker,
    timestamp_lists,
    topic_name,
)

TIMEOUT_MS = 15_000


def kp_records(n: int, tag: str, seed: int = 0) -> list[Rec]:
    return for_kafka_python(fixed_records(n, tag, seed))


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, "kafka-python") as b:
        yield b


def create_topic(b: BrokerProcess, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, topic_configs=config or {})]
        )
    finally:
        admin.close()


def produce(b: BrokerProcess, topic: str, recs: list[Rec], partition: int = 0, **conf: Any) -> list[int]:
    p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=20, **conf)
    try:
        futures = [
            p.send(topic, value=r.value, key=r.key, partition=partition,
                   headers=list(r.headers), timestamp_ms=r.timestamp)
            for r in recs
        ]
        p.flush(TIMEOUT_MS / 1000)
        return [f.get(TIMEOUT_MS / 1000).offset for f in futures]
    finally:
        p.close()


def consumer(b: BrokerProcess, **conf: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=b.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50,
        request_timeout_ms=TIMEOUT_MS + 5000, **conf,
    )


def consume(b: BrokerProcess, topic: str, start: int, n: int, partition: int = 0) -> list[object]:
    c = consumer(b)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek(tp, start)
        got: list[object] = []
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while len(got) < n and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=300).values():
                got += batch
        assert len(got) == n
        return got
    finally:
        c.close()


def assert_same(msgs: list[object], recs: list[Rec], first_offset: int, log_append: bool = False) -> None:
    for i, (m, r) in enumerate(zip(msgs, recs, strict=True)):
        assert m.offset == first_offset + i  # type: ignore[attr-defined]
        assert (m.key, m.value) == (r.key, r.value)  # type: ignore[attr-defined]
        assert tuple(m.headers) == r.headers  # type: ignore[attr-defined]
        if log_append:
            assert m.timestamp_type == 1  # type: ignore[attr-defined]
        else:
            assert (m.timestamp_type, m.timestamp) == (0, r.timestamp)  # type: ignore[attr-defined]


def check_lookups(b: BrokerProcess, topic: str, stamped: list[tuple[int, int]], partition: int = 0) -> None:
    times = probe_times([ts for _, ts in stamped])
    c = consumer(b)
    try:
        tp = TopicPartition(topic, partition)
        for t in times:
            got = c.offsets_for_times({tp: t}, timeout_ms=TIMEOUT_MS)[tp]
            expect = first_at_or_after(stamped, t)
            if expect is None:
                assert got is None, (t, got)
            else:
                assert got is not None and got.offset == expect, (t, got, stamped)
                assert got.timestamp == min(ts for o, ts in stamped if o == expect)
    finally:
        c.close()


def test_admin_creates_topics_and_refuses_duplicates(kb: BrokerProcess) -> None:
    name = topic_name("adm")
    create_topic(kb, name, partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    c = consumer(kb)
    try:
        assert c.partitions_for_topic(name) == {0, 1}
    finally:
        c.close()
    with pytest.raises(TopicAlreadyExistsError):
        create_topic(kb, name)


@pytest.mark.parametrize("compression", (None, "gzip"))
def test_every_acks_setting_round_trips_byte_exact(kb: BrokerProcess, compression: str | None) -> None:
    topic = topic_name(f"rt-{compression}")
    create_topic(kb, topic)
    sent: list[Rec] = []
    confs: list[dict[str, Any]] = [
        {},  # kafka-python 3 default: idempotent, acks=all
        {"acks": 0}, {"acks": 1}, {"acks": "all", "enable_idempotence": False},
    ]
    for seed, conf in enumerate(confs):
        recs = kp_records(40, str(compression), seed * 40)
        offsets = produce(kb, topic, recs, compression_type=compression, **conf)
        assert_appended_after(sent, recs, offsets, conf)
        sent += recs
    assert_same(consume(kb, topic, 0, len(sent)), sent, 0)
    assert_stored_with(kb, topic, compression)


@settings(max_examples=5)
@given(timestamps=timestamp_lists)
def test_offsets_for_times_matches_the_oracle_with_unordered_and_equal_create_times(
    kb: BrokerProcess, timestamps: list[int]
) -> None:
    topic = topic_name("oft")
    create_topic(kb, topic)
    recs = index_valued(timestamps)
    offsets = produce(kb, topic, recs)
    check_lookups(kb, topic, list(zip(offsets, timestamps, strict=True)))


@settings(max_examples=3)
@given(recs=st.lists(records, min_size=1, max_size=30).map(for_kafka_python))
def test_arbitrary_records_read_back_exactly(kb: BrokerProcess, recs: list[Rec]) -> None:
    topic = topic_name("arb")
    create_topic(kb, topic)
    produce(kb, topic, recs)
    assert_same(consume(kb, topic, 0, len(recs)), recs, 0)


def test_log_append_time_topic_and_lookups_after_restart(kb: BrokerProcess) -> None:
    topic = topic_name("lat")
    create_topic(kb, topic, config={"message.timestamp.type": "LogAppendTime"})
    recs = kp_records(25, "lat")
    produce(kb, topic, recs[:10])
    produce(kb, topic, recs[10:])
    msgs = consume(kb, topic, 0, len(recs))
    assert_same(msgs, recs, 0, log_append=True)
    stamped = [(m.offset, m.timestamp) for m in msgs]  # type: ignore[attr-defined]
    assert [ts for _, ts in stamped] == sorted(ts for _, ts in stamped)
    check_lookups(kb, topic, stamped)
    kb.restart()
    check_lookups(kb, topic, stamped)
    assert_same(consume(kb, topic, 0, len(recs)), recs, 0, log_append=True)


def test_beginning_and_end_offsets_in_both_isolation_levels(kb: BrokerProcess) -> None:
    topic = topic_name("wm")
    create_topic(kb, topic, partitions=2)
    produce(kb, topic, kp_records(9, "wm"), partition=1)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    for isolation in ("read_uncommitted", "read_committed"):
        c = consumer(kb, isolation_level=isolation)
        try:
            assert c.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
            assert c.end_offsets(tps) == {tps[0]: 0, tps[1]: 9}
        finally:
            c.close()


def test_committed_offsets_round_trip_with_metadata(kb: BrokerProcess) -> None:
    topic = topic_name("co")
    create_topic(kb, topic)
    produce(kb, topic, kp_records(10, "co"))
    group = topic_name("group")
    tp = TopicPartition(topic, 0)
    c = consumer(kb, group_id=group)
    try:
        c.assign([tp])
        assert c.committed(tp) is None
        c.commit({tp: OffsetAndMetadata(6, "why not", -1)})
        got = c.committed(tp, metadata=True)
        assert (got.offset, got.metadata) == (6, "why not")
    finally:
        c.close()
    kb.restart()
    c = consumer(kb, group_id=group, auto_offset_reset="earliest")
    try:
        c.assign([tp])
        msgs: list[object] = []
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while len(msgs) < 4 and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=300).values():
                msgs += batch
        assert [m.offset for m in msgs] == [6, 7, 8, 9]  # type: ignore[attr-defined]
    finally:
        c.close()


def test_transactional_producer_commits_and_aborts(kb: BrokerProcess) -> None:
    p = KafkaProducer(bootstrap_servers=kb.bootstrap, transactional_id="tx-kp")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("tx-kp", b"kept")
        p.commit_transaction()
        p.begin_transaction()
        p.send("tx-kp", b"dropped")
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=5)
    c = KafkaConsumer(bootstrap_servers=kb.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        c.assign([TopicPartition("tx-kp", 0)])
        assert [m.value for m in c] == [b"kept"]
    finally:
        c.close()
