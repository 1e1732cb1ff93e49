"""``Client.produce`` of ProducerRecords, read back by confluent-kafka's consumer (the oracle).

The call turns records into columns (keys, values, timestamps, headers) and builds
column-wise batches; whatever forms the fields come in (bytes, ``str``, bytearray,
memoryview, None) and however they are placed (the default partitioner or one
partition), librdkafka must read back exactly the records sent, each at the
partition and offset the call returned.
"""

from __future__ import annotations

import time
from typing import Any

from client_oracle import unique_topic
from confluent_kafka import Consumer, TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import ProducerRecord, SyncClient
from client.partitioner import partition_for_key

PARTITIONS = 3

raw = st.binary(max_size=60)
field = st.one_of(st.none(), raw, st.text(max_size=20), raw.map(bytearray),
                  raw.map(memoryview))
# confluent-kafka hands header names over as C strings: a NUL would cut the oracle's copy.
header_name = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)
headers = st.lists(st.tuples(header_name, st.one_of(st.none(), raw, st.text(max_size=8))),
                   max_size=3)
# Up to today: the broker refuses timestamps over an hour ahead (message.timestamp.after.max.ms).
record = st.builds(ProducerRecord, key=field, value=field, headers=headers,
                   timestamp=st.one_of(st.none(), st.integers(0, time.time_ns() // 1_000_000)))


def as_bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


def read_all(bootstrap: str, topic: str) -> dict[tuple[int, int], Any]:
    """Every record of the topic as librdkafka reads it, by (partition, offset)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)}
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS) if ends[p]])
        out: dict[tuple[int, int], Any] = {}
        deadline = time.monotonic() + 30
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                assert m.error() is None, m.error()
                out[(m.partition(), m.offset())] = m
        return out
    finally:
        c.close()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=12,
          deadline=None)
@given(records=st.lists(record, min_size=1, max_size=60),
       partition=st.one_of(st.none(), st.integers(0, PARTITIONS - 1)))
def test_produced_records_are_read_back_exactly_where_the_call_placed_them(
    broker, sync_client: SyncClient, records: list[ProducerRecord], partition: int | None,  # type: ignore[no-untyped-def]
) -> None:
    topic = unique_topic("records")
    sync_client.create_topic(topic, partitions=PARTITIONS)
    before = time.time_ns() // 1_000_000
    offsets = sync_client.produce(topic, records, partition=partition)
    after = time.time_ns() // 1_000_000
    stored = read_all(broker.bootstrap, topic)
    assert len(stored) == len(records) == len(offsets)
    null_key_partition = {p for (p, o), m in stored.items() if m.key() is None}
    assert len(null_key_partition) <= 1  # null keys stick to one partition per call
    for r, offset in zip(records, offsets, strict=True):
        key = as_bytes(r.key)
        if partition is not None:
            p = partition
        elif key is not None:
            p = partition_for_key(key, PARTITIONS)
        else:
            (p,) = null_key_partition
        m = stored[(p, offset)]
        assert (m.key(), m.value()) == (key, as_bytes(r.value))
        assert [(k, v) for k, v in (m.headers() or [])] == [(k, as_bytes(v)) for k, v in r.headers]
        ts = m.timestamp()[1]
        if r.timestamp is None:
            assert before <= ts <= after
        else:
            assert ts == r.timestamp
    sync_client.delete_topic(topic)


def test_a_large_call_to_one_partition_lands_whole_and_in_input_order(
    broker, sync_client: SyncClient,  # type: ignore[no-untyped-def]
) -> None:
    """12,345 records of up to 300 B (more than one request): every record lands once,
    in input order, at the offsets returned, with all its fields."""
    topic = unique_topic("pieces")
    sync_client.create_topic(topic, partitions=PARTITIONS)
    now = time.time_ns() // 1_000_000
    records = [ProducerRecord(key=None if i % 7 == 0 else b"k%d" % i,
                              value=b"%06d" % i + b"x" * (i % 300),
                              headers=[("h", b"%d" % i)] if i % 1000 == 3 else (),
                              timestamp=None if i % 5000 == 1 else now - i)
               for i in range(12_345)]
    offsets = sync_client.produce(topic, records, partition=1)
    assert offsets == list(range(len(records)))
    stored = read_all(broker.bootstrap, topic)
    assert {p for p, _ in stored} == {1}
    for r, offset in zip(records, offsets, strict=True):
        m = stored[(1, offset)]
        assert (m.key(), m.value(), m.headers() or []) == (r.key, r.value, list(r.headers))
        if r.timestamp is not None:
            assert m.timestamp()[1] == r.timestamp
