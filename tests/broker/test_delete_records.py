"""DeleteRecords (KIP-107) through real clients against the real broker, checked against
an oracle of the records the test produced.

Hypothesis produces random records (out-of-order timestamps, several batches and
segments), deletes below an offset (confluent-kafka's or kafka-python's admin client)
or below a time (the ``delete-records --before-time`` path: ListOffsets by timestamp,
then DeleteRecords), and compares EARLIEST, every time lookup (including times before
the new log start) and a consumer's view with the oracle. Other tests cover Kafka's
error codes and a crash right after the delete.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTP

from client import admin
from client.aio import Client, ProducerRecord
from protocol.errors import ErrorCode, KafkaError
from tests.broker.admin_common import Shared, admin_broker
from tests.helpers.wait import wait_until

TIMEOUT = 15.0
T0 = int(time.time() * 1000) - 600_000
SEGMENT = {"segment.bytes": "1500"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    with admin_broker(tmp_path_factory, "delete-records") as brokers:
        yield brokers


def oracle(records: list[tuple[int, int]], start: int, t: int) -> tuple[int, int] | None:
    for off, ts in records:
        if off >= start and ts >= t:
            return off, ts
    return None


async def produce(bootstrap: str, topic: str, batches: list[list[int]]) -> list[tuple[int, int]]:
    out = []
    async with await Client.connect(bootstrap) as c:
        for stamps in batches:
            offs = await c.produce(topic, [ProducerRecord(value=b"v" * 60, timestamp=T0 + s)
                                           for s in stamps], partition=0)
            out += [(o, T0 + s) for o, s in zip(offs, stamps, strict=True)]
    return out


async def observe(bootstrap: str, topic: str, probes: list[int]) -> tuple[int, dict[int, Any], list[int]]:
    """(EARLIEST, {t: lookup}, offsets a reader gets from the log start) via the bundled client."""
    async with await Client.connect(bootstrap) as c:
        start = (await c.earliest(topic, [0]))[0]
        end = (await c.latest(topic, [0]))[0]
        looks = {t: (await c.offsets_for_times(topic, t, [0]))[0] for t in probes}
        seen = [r.offset async for r in c.consume(topic, 0, start, end)]
        if start > 0:
            with pytest.raises(KafkaError) as err:
                await c.fetch_raw(topic, 0, start - 1)
            assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    return start, looks, seen


@settings(max_examples=12)
@given(batches=st.lists(st.lists(st.integers(0, 3_000), min_size=1, max_size=8), min_size=1, max_size=12),
       how=st.sampled_from(["confluent", "kafka-python", "time"]), where=st.floats(0, 1),
       extra=st.lists(st.integers(-5, 3_005), max_size=5))
def test_delete_records_by_offset_or_time_from_real_clients_matches_the_oracle(
    shared: Shared,
    batches: list[list[int]], how: str, where: float, extra: list[int],
) -> None:
    b, ck, kp = shared
    topic = f"dr-{time.monotonic_ns()}"
    ck.create_topics([NewTopic(topic, 1, 1, config=SEGMENT)])[topic].result(TIMEOUT)
    records = asyncio.run(produce(b.bootstrap, topic, batches))
    if how == "time":
        t = T0 + int(where * 3_100)

        async def by_time() -> int:
            async with await Client.connect(b.bootstrap) as c:
                offsets = await admin.offsets_before_time(c, topic, t, [0])
                return (await admin.delete_records(c, topic, offsets))[0].low_watermark

        low = asyncio.run(by_time())
        hit = oracle(records, 0, t)
        cut = hit[0] if hit is not None else len(records)
    elif how == "confluent":
        cut = int(where * len(records))
        tp = CkTP(topic, 0, cut)
        low = ck.delete_records([tp])[tp].result(TIMEOUT).low_watermark
    else:
        cut = int(where * len(records))
        low = kp.delete_records({KpTP(topic, 0): cut})[KpTP(topic, 0)]["low_watermark"]
    assert low == cut
    probes = sorted({T0 - 1, *(ts for _, ts in records), *(T0 + e for e in extra)})
    start, looks, seen = asyncio.run(observe(b.bootstrap, topic, probes))
    assert start == cut
    for t in probes:
        assert looks[t] == oracle(records, cut, t), t
    assert seen == [off for off, _ in records if off >= cut]


def test_kafkas_answers_for_bad_deletes(shared: Shared) -> None:
    b, ck, kp = shared
    ck.create_topics([NewTopic("dr-codes", 2, 1), NewTopic("dr-compacted", 1, 1,
                      config={"cleanup.policy": "compact"})])["dr-codes"].result(TIMEOUT)
    wait_until(lambda: {"dr-codes", "dr-compacted"} <= set(ck.list_topics(timeout=5).topics), 10.0,
               "both topics in the metadata")
    asyncio.run(produce(b.bootstrap, "dr-codes", [[1, 2, 3]]))
    cases = [(CkTP("dr-codes", 0, 4), 1),          # beyond the high watermark
             (CkTP("dr-codes", 0, -7), 1),         # negative, and not -1
             (CkTP("dr-compacted", 0, 0), 44)]     # cleanup.policy without delete
    for tp, code in cases:
        with pytest.raises(KafkaException) as exc:
            ck.delete_records([tp])[tp].result(TIMEOUT)
        assert exc.value.args[0].code() == code, tp

    async def unknown(topic: str, partition: int) -> None:
        # librdkafka stops at its own leader lookup for these; the bundled client asks
        async with await Client.connect(b.bootstrap) as c:
            c._topics.pop(topic, None)
            await admin.delete_records(c, topic, {partition: 0})

    for topic, partition in [("dr-missing", 0), ("dr-codes", 9)]:
        with pytest.raises(KafkaError) as err:
            asyncio.run(unknown(topic, partition))
        assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # -1 means "up to the high watermark"; then a lower offset changes nothing
    assert kp.delete_records({KpTP("dr-codes", 0): -1})[KpTP("dr-codes", 0)]["low_watermark"] == 3
    tp = CkTP("dr-codes", 0, 1)
    assert ck.delete_records([tp])[tp].result(TIMEOUT).low_watermark == 3


def test_deleted_records_stay_deleted_after_a_crash(broker_factory: Any) -> None:
    b = broker_factory()
    ck = AdminClient({"bootstrap.servers": b.bootstrap})
    ck.create_topics([NewTopic("dr-crash", 1, 1, config=SEGMENT)])["dr-crash"].result(TIMEOUT)
    records = asyncio.run(produce(b.bootstrap, "dr-crash", [[i, i + 1, i + 2] for i in range(0, 90, 3)]))
    cut = 41  # inside a batch: the log start may sit mid-batch, as in Kafka
    tp = CkTP("dr-crash", 0, cut)
    assert ck.delete_records([tp])[tp].result(TIMEOUT).low_watermark == cut
    b.kill()
    b.start()
    # kafka-python: the beginning and a time lookup from before the new start
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, consumer_timeout_ms=3000)
    kp_tp = KpTP("dr-crash", 0)
    assert consumer.beginning_offsets([kp_tp])[kp_tp] == cut
    found = consumer.offsets_for_times({kp_tp: T0})[kp_tp]
    assert (found.offset, found.timestamp) == oracle(records, cut, T0)
    consumer.close()
    # confluent-kafka: a consumer from the beginning sees exactly the surviving records
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "dr", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([CkTP("dr-crash", 0, -2)])  # OFFSET_BEGINNING
    got: list[int] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < len(records) - cut and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.offset())
    c.close()
    assert got == [off for off, _ in records if off >= cut]
