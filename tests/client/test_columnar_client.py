"""Column-wise produce and consume against the real broker, with row-wise oracles.

- ``produce_arrow`` places every row where Kafka's default partitioner (or the
  row's partition column) says and stores exactly its key, value, timestamp and
  headers; read back row by row with ``consume``.
- ``consume_arrow`` yields the rows ``consume_chunks`` yields, in the same order.
- Several Produce requests in flight keep input order, and an idempotent
  Producer with several batches in flight per partition writes consecutive
  sequences.
- Batches librdkafka wrote are rebuilt byte for byte by the column builder.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from client_oracle import unique_topic

from client import Client, ProducerRecord
from client.partitioner import partition_for_key
from client.producer import Producer
from storage import records as rec
from storage.columnar import build_batch_columns

T0 = (time.time_ns() // 1_000_000 - 2 * 86_400_000) // 1000 * 1000


@pytest.fixture
def broker(shared_broker):  # type: ignore[no-untyped-def]
    """One broker for the module: every test here makes its own topics (unique_topic)."""
    return shared_broker


def _rows(n: int) -> list[tuple[bytes | None, bytes | None, int | None, int | None, list]]:
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"key-%d" % (i % 13)
        value = None if i % 11 == 0 else b"v" * (i % 50) + b"%d" % i
        ts = None if i % 17 == 0 else T0 + (i * 37) % 5000
        part = 1 if i % 5 == 0 else None
        headers = [("h", b"%d" % i), ("n", None)] if i % 9 == 0 else []
        out.append((key, value, ts, part, headers))
    return out


async def test_produce_arrow_places_and_stores_every_row(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("arrow")
    rows = _rows(400)
    table = pa.table({
        "key": pa.array([r[0] for r in rows], pa.binary()),
        "value": pa.array([None if r[1] is None else r[1].decode() for r in rows], pa.string()),
        "timestamp": pa.array([r[2] for r in rows], pa.int64()),
        "partition": pa.array([r[3] for r in rows], pa.int32()),
        "headers": pa.array([[{"key": k, "value": v} for k, v in r[4]] for r in rows],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    })
    before = time.time_ns() // 1_000_000
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=3)
        placed = await c.produce_arrow(topic, table, max_batch_bytes=3000, max_in_flight=3)
        after = time.time_ns() // 1_000_000
        stored = {p: {r.offset: r for r in [x async for x in c.consume(topic, p, 0)]}
                  for p in range(3)}
    null_key_parts = {int(placed.partitions[i]) for i, r in enumerate(rows)
                      if r[0] is None and r[3] is None}
    assert len(null_key_parts) == 1  # sticky: one partition per call
    assert sum(len(v) for v in stored.values()) == len(rows)
    for i, (key, value, ts, part, headers) in enumerate(rows):
        p = int(placed.partitions[i])
        if part is not None:
            assert p == part
        elif key is not None:
            assert p == partition_for_key(key, 3)
        r = stored[p][int(placed.offsets[i])]
        assert (r.key, r.value, r.headers) == (key, value, headers)
        assert r.timestamp == ts if ts is not None else before <= r.timestamp <= after


async def test_consume_arrow_yields_the_rows_consume_chunks_yields(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("carrow")
    rows = _rows(300)
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=1)
        for lo in range(0, 300, 70):  # several batches, one compressed
            await c.produce(topic, [ProducerRecord(k, v, h, ts) for k, v, ts, _, h in rows[lo:lo + 70]],
                            partition=0, compression="lz4" if lo == 70 else None)
        want = [r async for chunk in c.consume_chunks(topic, 0, 33, 250) for r in chunk]
        got = [b async for b in c.consume_arrow(topic, 0, 33, 250, max_bytes=4096)]
    t = pa.Table.from_batches(got)
    assert t.column("offset").to_pylist() == [r.offset for r in want] == list(range(33, 250))
    assert t.column("key").to_pylist() == [r.key for r in want]
    assert t.column("value").to_pylist() == [r.value for r in want]
    assert t.column("timestamp").to_pylist() == [r.timestamp for r in want]
    assert [[(h["key"], h["value"]) for h in hs] for hs in t.column("headers").to_pylist()] == [
        r.headers for r in want]


async def test_requests_in_flight_keep_input_order(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("inflight")
    values = [b"%06d" % i + b"x" * (i % 100) for i in range(3000)]
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=1)
        offsets = await c.produce(topic, [ProducerRecord(value=v, timestamp=T0) for v in values],
                                  partition=0, max_batch_bytes=4000, max_in_flight=4)
        got = [r.value async for r in c.consume(topic, 0, 0)]
        raw = await c.fetch_raw(topic, 0, 0, 1 << 22)
    assert offsets == list(range(3000))
    assert got == values
    assert len(list(rec.iter_batches(raw.records_bytes))) > 20  # really many requests


async def test_a_large_produce_call_is_cut_into_even_requests_in_input_order(broker) -> None:  # type: ignore[no-untyped-def]
    """From 1 MiB, one call goes out as several requests (pipelined): every record
    still lands once, per partition in input order, at the offsets returned."""
    topic = unique_topic("pipelined")
    records = [ProducerRecord(key=b"k%d" % (i % 31), value=b"%06d" % i + b"x" * (100 + i % 150),
                              timestamp=T0 + i) for i in range(8000)]
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=2)
        offsets = await c.produce(topic, records)
        got = {p: [(r.offset, r.value) async for r in c.consume(topic, p, 0)] for p in (0, 1)}
        raw = await c.fetch_raw(topic, 0, 0, 1 << 24)
    want: dict[int, list[tuple[int, bytes | None]]] = {0: [], 1: []}
    for r, off in zip(records, offsets, strict=True):
        want[partition_for_key(r.key, 2)].append((off, r.value))  # type: ignore[arg-type]
    assert got == want
    assert all(w == list(range(len(w))) for w in ([o for o, _ in v] for v in want.values()))
    assert len(list(rec.iter_batches(raw.records_bytes))) > 1


async def test_idempotent_producer_with_batches_in_flight_writes_consecutive_sequences(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("idem-inflight")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=2)
        async with Producer(c, linger_ms=20, batch_bytes=600, acks=-1, idempotent=True,
                            max_in_flight_per_partition=5) as p:
            futs = [await p.send(topic, ProducerRecord(value=b"%05d" % i, timestamp=T0),
                                 partition=i % 2) for i in range(2000)]
        for part in range(2):
            got = [r.value async for r in c.consume(topic, part, 0)]
            assert got == [b"%05d" % i for i in range(part, 2000, 2)]
            assert [f.result().offset for f in futs[part::2]] == list(range(1000))
            raw = await c.fetch_raw(topic, part, 0, 1 << 22)
            heads = [h for _, h in rec.iter_batches(raw.records_bytes)]
            assert len(heads) > 5
            assert len({h.producer_id for h in heads}) == 1 and heads[0].producer_id >= 0
            seqs = [(h.base_sequence, h.records_count) for h in heads]
            assert seqs[0][0] == 0
            assert all(s0 + n0 == s1 for (s0, n0), (s1, _) in zip(seqs, seqs[1:], strict=False))


def test_batches_librdkafka_wrote_are_rebuilt_byte_for_byte(broker) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer as CkProducer

    from client import SyncClient

    topic = unique_topic("rdkafka")
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic, partitions=1)
        p = CkProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50,
                        "compression.type": "none", "enable.idempotence": True})
        for i, (key, value, ts, _, headers) in enumerate(_rows(500)):
            p.produce(topic, value=value, key=key, partition=0,
                      timestamp=ts or T0 + i, headers=headers or None)
        assert p.flush(30) == 0
        raw = c.fetch_raw(topic, 0, 0, 1 << 22).records_bytes
    batches = list(rec.iter_batches(raw))
    assert batches
    for pos, h in batches:
        original = raw[pos : pos + h.size]
        rs = rec.decode_batch(original)
        rebuilt = build_batch_columns(
            [r.key for r in rs], [r.value for r in rs], [r.timestamp for r in rs],
            [r.headers for r in rs], base_offset=h.base_offset,
            partition_leader_epoch=h.partition_leader_epoch, compression=h.compression,
            producer_id=h.producer_id, producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
        )
        assert rebuilt == original
