"""The Spark sink's task body (``ChronologWriter.write``) fed Arrow batches directly.

Spark calls ``write`` in a task with the DataFrame's Arrow batches; calling it
here with hand-made batches exercises every placement rule without a Spark job
(the Spark round trips are in test_spark_stream_write.py). The oracle is the
row-wise client partitioner and a row-by-row read of what the broker stored.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import LongType, StringType, StructField, StructType

from client import SyncClient
from client.partitioner import partition_for_key
from pipeline.options import parse_write_options
from pipeline.schema import HEADERS_TYPE, SPARK_SCHEMA
from pipeline.writer import ChronologWriter

T0 = (time.time_ns() // 1_000_000 - 86_400_000) // 1000 * 1000
# The source's columns, except that the sink also takes string keys and epoch-millis timestamps.
SCHEMA = StructType([
    StructField("key", StringType()), SPARK_SCHEMA["value"], SPARK_SCHEMA["topic"],
    SPARK_SCHEMA["partition"], StructField("timestamp", LongType()), SPARK_SCHEMA["headers"],
])


def _batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    cols = list(zip(*rows, strict=True))
    return pa.record_batch([
        pa.array(cols[0], pa.string()), pa.array(cols[1], pa.binary()),
        pa.array(cols[2], pa.string()), pa.array(cols[3], pa.int32()),
        pa.array(cols[4], pa.int64()),
        pa.array([[{"key": k, "value": v} for k, v in h] for h in cols[5]], HEADERS_TYPE),
    ], names=["key", "value", "topic", "partition", "timestamp", "headers"])


row_st = st.tuples(
    st.one_of(st.none(), st.text(max_size=6)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.sampled_from(["wa", "wb"]),
    st.one_of(st.none(), st.integers(0, 2)),
    st.integers(T0, T0 + 10_000),
    st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=5))),
             max_size=2),
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(row_st, min_size=1, max_size=80), min_size=1, max_size=4),
       batch_size=st.sampled_from([1024, 4096, 1 << 20]))
def test_every_row_lands_once_where_the_partitioner_says_in_order(
    broker: Any, batches: list[list[tuple[Any, ...]]], batch_size: int
) -> None:
    with SyncClient(broker.bootstrap) as c:
        topics = c.list_topics()
        for t in ("wa", "wb"):
            if t not in topics:
                c.create_topic(t, 3)
        start = {(t, p): o for t in ("wa", "wb") for p, o in c.latest(t).items()}
        opts = parse_write_options({"bootstrap.servers": broker.bootstrap,
                                    "batch.size": str(batch_size)})
        unique = [[(k, b"%d-%d:" % (bi, ri) + (v or b""), *rest) for ri, (k, v, *rest) in enumerate(b)]
                  for bi, b in enumerate(batches)]
        commit = ChronologWriter(opts, SCHEMA).write(iter([_batch(b) for b in unique]))
        stored = {tp: [(r.key, r.value, r.timestamp, r.headers)
                       for r in c.consume(tp[0], tp[1], o)] for tp, o in start.items()}
    # Values are made unique (row number first), so each row is found exactly.
    assert commit.records == sum(len(b) for b in batches)
    where: dict[bytes, tuple[str, int]] = {}
    for tp, got in stored.items():
        for r in got:
            assert r[1] not in where  # stored once
            where[r[1]] = tp
    for bi, b in enumerate(batches):
        sticky: dict[str, set[int]] = {}
        for ri, (key, value, topic, part, _ts, _headers) in enumerate(b):
            uid = b"%d-%d:" % (bi, ri) + (value or b"")
            tp = where[uid]
            assert tp[0] == topic
            if part is not None:
                assert tp[1] == part
            elif key is not None:
                assert tp[1] == partition_for_key(key.encode(), 3)
            else:
                sticky.setdefault(topic, set()).add(tp[1])
        assert all(len(ps) == 1 for ps in sticky.values())  # one partition per Arrow batch
    for got in stored.values():
        order = [tuple(int(x) for x in r[1].split(b":")[0].split(b"-")) for r in got]
        assert order == sorted(order)  # a partition keeps the rows' order
        for r in got:
            bi, ri = (int(x) for x in r[1].split(b":")[0].split(b"-"))
            key, value, topic, part, ts, headers = batches[bi][ri]
            assert (r[0], r[2], r[3]) == (None if key is None else key.encode(), ts, headers)


def test_rows_without_a_timestamp_column_are_stamped_when_their_batch_is_built(broker: Any) -> None:
    """No timestamp column: each row gets the time its record batch was built (one time
    per batch, between the write's start and end), and rows split across batches and
    Arrow inputs are each stored once, in order."""
    from storage.records import iter_batches

    schema = StructType([StructField("key", StringType()), SPARK_SCHEMA["value"]])
    topic = f"nots-{time.time_ns()}"
    inputs = [pa.record_batch([pa.array([f"k{i % 5}" for i in range(j, j + 300)], pa.string()),
                               pa.array([b"%06d" % i + b"v" * 40 for i in range(j, j + 300)],
                                        pa.binary())], names=["key", "value"])
              for j in range(0, 1200, 300)]
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic, 2)
        opts = parse_write_options({"bootstrap.servers": broker.bootstrap, "topic": topic,
                                    "batch.size": "6000"})
        before = time.time_ns() // 1_000_000
        commit = ChronologWriter(opts, schema).write(iter(inputs))
        after = time.time_ns() // 1_000_000
        stored = {p: list(c.consume(topic, p, 0)) for p in (0, 1)}
        raw = {p: c.fetch_raw(topic, p, 0, 1 << 22).records_bytes for p in (0, 1)}
    assert commit.records == 1200
    for p, got in stored.items():
        want = [b"%06d" % i + b"v" * 40 for i in range(1200) if partition_for_key(b"k%d" % (i % 5), 2) == p]
        assert [r.value for r in got] == want
        assert all(before <= r.timestamp <= after for r in got)
        headers = [h for _, h in iter_batches(raw[p])]
        assert len(headers) > 1
        assert all(h.base_timestamp == h.max_timestamp for h in headers)
