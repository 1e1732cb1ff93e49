"""aiokafka 0.14 against the real broker, with no special settings.

aiokafka opens with ApiVersions v0, uses ListOffsets up to v3 and Produce up to v7,
defaults to acks=1 without idempotence, and brings its own codecs (all four are tested).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.structs import OffsetAndMetadata
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
    for_kafka_python,
    index_valued,
    probe_times,
    records,
    running_broker,
    timestamp_lists,
    topic_name,
)

TIMEOUT = 15.0


def aio_records(n: int, tag: str, seed: int = 0) -> list[Rec]:
    return for_kafka_python(fixed_records(n, tag, seed), null_headers=True)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, "aiokafka") as b:
        yield b


async def create_topic(b: BrokerProcess, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> int:
    """Create a topic; returns the per-topic error code (aiokafka's admin does not raise)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, topic_configs=config or {})]
        )
    finally:
        await admin.close()
    ((topic, code, *_),) = resp.topic_errors
    assert topic == name
    return int(code)


async def produce(b: BrokerProcess, topic: str, recs: list[Rec], partition: int = 0, **conf: Any) -> list[int]:
    p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=20, **conf)
    await p.start()
    try:
        futures = [
            await p.send(topic, value=r.value, key=r.key, partition=partition,
                         headers=list(r.headers), timestamp_ms=r.timestamp)
            for r in recs
        ]
        await p.flush()
        metas = [await asyncio.wait_for(f, TIMEOUT) for f in futures]
        return [-1 if m is None else m.offset for m in metas]  # acks=0 resolves to None
    finally:
        await p.stop()


def consumer(b: BrokerProcess, **conf: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=b.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50, **conf
    )


async def consume(b: BrokerProcess, topic: str, start: int, n: int, partition: int = 0) -> list[object]:
    c = consumer(b)
    await c.start()
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek(tp, start)
        got: list[object] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            for batch in (await c.getmany(timeout_ms=300)).values():
                got += batch
        assert len(got) == n
        return got
    finally:
        await c.stop()


def assert_same(msgs: list[object], recs: list[Rec], first_offset: int, log_append: bool = False) -> None:
    for i, (m, r) in enumerate(zip(msgs, recs, strict=True)):
        assert m.offset == first_offset + i  # type: ignore[attr-defined]
        assert (m.key, m.value) == (r.key, r.value)  # type: ignore[attr-defined]
        assert tuple(m.headers) == r.headers  # type: ignore[attr-defined]
        if log_append:
            assert m.timestamp_type == 1  # type: ignore[attr-defined]
        else:
            assert (m.timestamp_type, m.timestamp) == (0, r.timestamp)  # type: ignore[attr-defined]


async def check_lookups(b: BrokerProcess, topic: str, stamped: list[tuple[int, int]]) -> None:
    times = probe_times([ts for _, ts in stamped])
    c = consumer(b)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        for t in times:
            got = (await c.offsets_for_times({tp: t}))[tp]
            expect = first_at_or_after(stamped, t)
            if expect is None:
                assert got is None, (t, got)
            else:
                assert got is not None and got.offset == expect, (t, got, stamped)
    finally:
        await c.stop()


async def test_admin_creates_topics_and_refuses_duplicates(kb: BrokerProcess) -> None:
    name = topic_name("adm")
    assert await create_topic(kb, name, partitions=3) == 0
    c = consumer(kb)
    await c.start()
    try:
        assert name in await c.topics()
    finally:
        await c.stop()
    p = AIOKafkaProducer(bootstrap_servers=kb.bootstrap)
    await p.start()
    try:
        assert await p.partitions_for(name) == {0, 1, 2}
    finally:
        await p.stop()
    assert await create_topic(kb, name) == TopicAlreadyExistsError.errno


@pytest.mark.parametrize("compression", (None, *CODECS))
async def test_every_acks_setting_and_codec_round_trips_byte_exact(
    kb: BrokerProcess, compression: str | None
) -> None:
    topic = topic_name(f"rt-{compression}")
    await create_topic(kb, topic)
    sent: list[Rec] = []
    confs: list[dict[str, Any]] = [{"acks": 0}, {"acks": 1}, {"acks": "all"},
                                      {"enable_idempotence": True}]
    for seed, conf in enumerate(confs):
        recs = aio_records(30, str(compression), seed * 30)
        offsets = await produce(kb, topic, recs, compression_type=compression, **conf)
        assert_appended_after(sent, recs, offsets, conf)
        sent += recs
    assert_same(await consume(kb, topic, 0, len(sent)), sent, 0)
    assert_stored_with(kb, topic, compression)


@settings(max_examples=5)
@given(timestamps=timestamp_lists)
def test_offsets_for_times_matches_the_oracle_with_unordered_and_equal_create_times(
    kb: BrokerProcess, timestamps: list[int]
) -> None:
    async def run() -> None:
        topic = topic_name("oft")
        await create_topic(kb, topic)
        recs = index_valued(timestamps)
        offsets = await produce(kb, topic, recs)
        await check_lookups(kb, topic, list(zip(offsets, timestamps, strict=True)))

    asyncio.run(run())


@settings(max_examples=3)
@given(recs=st.lists(records, min_size=1, max_size=30).map(lambda rs: for_kafka_python(rs, null_headers=True)))
def test_arbitrary_records_read_back_exactly(kb: BrokerProcess, recs: list[Rec]) -> None:
    async def run() -> None:
        topic = topic_name("arb")
        await create_topic(kb, topic)
        await produce(kb, topic, recs, compression_type="lz4")
        assert_same(await consume(kb, topic, 0, len(recs)), recs, 0)

    asyncio.run(run())


async def test_log_append_time_topic_and_lookups_after_restart(kb: BrokerProcess) -> None:
    topic = topic_name("lat")
    await create_topic(kb, topic, config={"message.timestamp.type": "LogAppendTime"})
    recs = aio_records(20, "lat")
    await produce(kb, topic, recs[:10])
    await produce(kb, topic, recs[10:])
    msgs = await consume(kb, topic, 0, len(recs))
    assert_same(msgs, recs, 0, log_append=True)
    stamped = [(m.offset, m.timestamp) for m in msgs]  # type: ignore[attr-defined]
    assert [ts for _, ts in stamped] == sorted(ts for _, ts in stamped)
    await check_lookups(kb, topic, stamped)
    await asyncio.to_thread(kb.restart)
    await check_lookups(kb, topic, stamped)


async def test_beginning_and_end_offsets(kb: BrokerProcess) -> None:
    topic = topic_name("wm")
    await create_topic(kb, topic)
    await produce(kb, topic, aio_records(11, "wm"))
    tp = TopicPartition(topic, 0)
    for isolation in ("read_uncommitted", "read_committed"):
        c = consumer(kb, isolation_level=isolation)
        await c.start()
        try:
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 11}
        finally:
            await c.stop()


async def test_committed_offsets_round_trip(kb: BrokerProcess) -> None:
    topic = topic_name("co")
    await create_topic(kb, topic)
    await produce(kb, topic, aio_records(10, "co"))
    group = topic_name("group")
    tp = TopicPartition(topic, 0)
    c = consumer(kb, group_id=group)
    await c.start()
    try:
        c.assign([tp])
        assert await c.committed(tp) is None
        await c.commit({tp: OffsetAndMetadata(4, "meta")})
        assert await c.committed(tp) == 4
    finally:
        await c.stop()
    c = consumer(kb, group_id=group)
    await c.start()
    try:
        c.assign([tp])
        msgs: list[object] = []
        deadline = time.monotonic() + TIMEOUT
        while len(msgs) < 6 and time.monotonic() < deadline:
            for batch in (await c.getmany(timeout_ms=300)).values():
                msgs += batch
        assert [m.offset for m in msgs] == [4, 5, 6, 7, 8, 9]  # type: ignore[attr-defined]
    finally:
        await c.stop()


async def test_send_offsets_to_transaction_commits_group_offsets_only_on_commit(
        kb: BrokerProcess) -> None:
    """aiokafka's AddOffsetsToTxn v0 + TxnOffsetCommit v0 (no KIP-447 fencing)."""
    p = AIOKafkaProducer(bootstrap_servers=kb.bootstrap, transactional_id="tx-aio-offsets")
    await asyncio.wait_for(p.start(), TIMEOUT)
    tp = TopicPartition("tx-aio-offsets", 0)
    try:
        await p.begin_transaction()
        await p.send_and_wait(tp.topic, b"out")
        await p.send_offsets_to_transaction({tp: 7}, "aio-txn-group")
        await p.abort_transaction()
        await p.begin_transaction()
        await p.send_and_wait(tp.topic, b"out")
        await p.send_offsets_to_transaction({tp: 5}, "aio-txn-group")
        await p.commit_transaction()
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=kb.bootstrap, group_id="aio-txn-group")
    await c.start()
    try:
        assert await c.committed(tp) == 5
    finally:
        await c.stop()


async def test_transactional_producer_commits_and_aborts(kb: BrokerProcess) -> None:
    p = AIOKafkaProducer(bootstrap_servers=kb.bootstrap, transactional_id="tx-aio")
    await asyncio.wait_for(p.start(), TIMEOUT)
    try:
        async with p.transaction():
            await p.send_and_wait("tx-aio", b"kept")
        await p.begin_transaction()
        await p.send_and_wait("tx-aio", b"dropped")
        await p.abort_transaction()
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=kb.bootstrap, isolation_level="read_committed",
                         auto_offset_reset="earliest")
    await c.start()
    try:
        c.assign([TopicPartition("tx-aio", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not got:
            for batch in (await c.getmany(timeout_ms=300)).values():
                got += [m.value for m in batch]
        await asyncio.sleep(0.5)
        for batch in (await c.getmany(timeout_ms=300)).values():
            got += [m.value for m in batch]
        assert got == [b"kept"]
    finally:
        await c.stop()
