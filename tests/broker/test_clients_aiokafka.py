"""aiokafka 0.14 against the real broker, with no special settings.

aiokafka opens with ApiVersions v0, uses ListOffsets up to v3 and Produce up to v7,
defaults to acks=1 without idempotence, and brings its own codecs (all four are tested).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.structs import OffsetAndMetadata

import tests.helpers.client_scenarios as scenarios
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import CODECS, Rec, for_kafka_python, running_broker, topic_name

TIMEOUT = 15.0


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


async def started_consumer(b: BrokerProcess, at: tuple[TopicPartition, int] | None = None
                           ) -> AIOKafkaConsumer:
    """A started consumer, assigned to the partition and position ``at`` if given."""
    c = consumer(b)
    await c.start()
    if at is not None:
        c.assign([at[0]])
        c.seek(*at)
    return c


class AioKafka(scenarios.Client):
    """aiokafka as the shared scenarios' (synchronous) Client: each call runs its own loop."""

    records = staticmethod(partial(scenarios.kafka_python_records, null_headers=True))

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> None:
        assert asyncio.run(create_topic(self.broker, name, partitions, config)) == 0

    def produce(self, topic: str, recs: list[Rec], partition: int = 0,
                compression: str | None = None, **conf: Any) -> list[int]:
        return asyncio.run(produce(self.broker, topic, recs, partition,
                                   compression_type=compression, **conf))

    def consume(self, topic: str, start: int, n: int, partition: int = 0) -> list[scenarios.Got]:
        with asyncio.Runner() as loop:
            c = loop.run(started_consumer(self.broker, (TopicPartition(topic, partition), start)))
            try:
                msgs = scenarios.collect(n, lambda _: [m for batch in loop.run(c.getmany(timeout_ms=300)).values()
                                             for m in batch], TIMEOUT)
            finally:
                loop.run(c.stop())
        return [scenarios.from_kafka_python(m) for m in msgs]

    def offsets_for_times(self, topic: str, times: list[int],
                          partition: int = 0) -> dict[int, scenarios.Found | None]:
        async def run() -> dict[int, scenarios.Found | None]:
            c = await started_consumer(self.broker)
            try:
                tp = TopicPartition(topic, partition)
                out: dict[int, scenarios.Found | None] = {}
                for t in times:
                    got = (await c.offsets_for_times({tp: t}))[tp]
                    out[t] = None if got is None else scenarios.Found(got.offset, got.timestamp)
                return out
            finally:
                await c.stop()

        return asyncio.run(run())


@pytest.fixture(scope="module")
def client(kb: BrokerProcess) -> AioKafka:
    return AioKafka(kb)


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
def test_every_acks_setting_and_codec_round_trips_byte_exact(
    client: AioKafka, compression: str | None
) -> None:
    confs: list[dict[str, Any]] = [{"acks": 0}, {"acks": 1}, {"acks": "all"},
                                      {"enable_idempotence": True}]
    scenarios.every_acks_setting_round_trips(client, compression, confs, 30)


TestLookupsAndRecords = scenarios.lookup_and_record_tests(
    (5, 3), partial(for_kafka_python, null_headers=True), compression="lz4", lookups=False)


def test_log_append_time_topic_and_lookups_after_restart(client: AioKafka) -> None:
    scenarios.log_append_time_stamps_and_lookups(client, 20, 10, restart=True)


async def test_beginning_and_end_offsets(kb: BrokerProcess, client: AioKafka) -> None:
    topic = await asyncio.to_thread(scenarios.filled_topic, client, "wm", 11)
    tp = TopicPartition(topic, 0)
    for isolation in ("read_uncommitted", "read_committed"):
        c = consumer(kb, isolation_level=isolation)
        await c.start()
        try:
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 11}
        finally:
            await c.stop()


async def test_committed_offsets_round_trip(kb: BrokerProcess, client: AioKafka) -> None:
    topic = await asyncio.to_thread(scenarios.filled_topic, client, "co", 10)
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
        msgs = [m for batch in (await c.getmany(timeout_ms=300)).values() for m in batch]
        deadline = time.monotonic() + TIMEOUT
        while len(msgs) < 6 and time.monotonic() < deadline:
            msgs += [m for batch in (await c.getmany(timeout_ms=300)).values() for m in batch]
        assert [m.offset for m in msgs] == [4, 5, 6, 7, 8, 9]
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
