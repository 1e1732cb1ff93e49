"""``df.write.format("chronolog")``: append a DataFrame's rows to topics as record batches.

Columns (others are ignored, as by Spark's Kafka sink, so a DataFrame read from
``format("chronolog")`` can be written back as it is):
- ``value`` (binary or string) — required;
- ``key`` (binary or string) — optional, null keys allowed;
- ``topic`` (string) — optional; the ``topic`` option, when given, overrides it;
- ``partition`` (int) — optional; when absent or null, Kafka's default
  partitioner picks it (murmur2 of the key, sticky rotation for null keys);
- ``timestamp`` (timestamp, or long epoch ms) — optional; null or absent = now;
- ``headers`` (array<struct<key:string,value:binary>>) — optional.

Delivery is at-least-once. Each Spark task produces its rows in batches of up
to ``batch.size`` bytes per partition, each acknowledged before the task ends
(``acks=all`` by default). If a task fails after some of its batches were
acknowledged, Spark retries the whole task and those batches are appended a
second time; a job that is re-run after a failure likewise appends again.
Readers that need exactly-once must de-duplicate (e.g. on a key) downstream.
Within one task and partition, rows keep their DataFrame order.

Encoding: an Arrow batch whose rows all go to one topic and carry no headers
is encoded column-wise (:mod:`pipeline.encode`, murmur2 via
:mod:`pipeline.partitioning`); other batches go row by row through
``storage.records.build_batch``. Before a column-wise batch is sent to a
partition, rows the row path buffered for it are flushed, so order holds.
"""

from __future__ import annotations

import collections
import concurrent.futures
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from client import SyncClient
from client.partitioner import StickyPartitioner, partition_for_key
from pipeline.encode import encode_batch
from pipeline.options import OptionError, WriteOptions
from pipeline.partitioning import partitions_for_keys
from storage.records import Record, build_batch

__all__ = ["ChronologWriter", "WriteCommit"]

_RECORD_OVERHEAD = 20
"""Rough per-record framing bytes (varints, attributes) used to size batches."""

_IN_FLIGHT = 4
"""Batches a task may have sent but not yet seen acknowledged."""


@dataclass
class WriteCommit(WriterCommitMessage):
    """What one task appended: records and batches per ``topic-partition``."""

    records: int = 0
    batches: int = 0
    partitions: dict[str, int] = field(default_factory=dict)


def _check_schema(schema: StructType, topic_option: str | None) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError(
            f"the DataFrame needs a 'value' column (binary or string); it has {sorted(fields)}"
        )
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], (BinaryType, StringType)):
            raise OptionError(f"column {name!r} must be binary or string, not {fields[name].simpleString()}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise OptionError(f"column 'topic' must be a string, not {fields['topic'].simpleString()}")
    if topic_option is None and "topic" not in fields:
        raise OptionError("name the topic: .option('topic', NAME) or a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], (IntegerType, LongType)):
        raise OptionError(f"column 'partition' must be an int, not {fields['partition'].simpleString()}")
    if "timestamp" in fields and not isinstance(fields["timestamp"], (TimestampType, LongType)):
        raise OptionError(
            f"column 'timestamp' must be a timestamp or long epoch ms, not "
            f"{fields['timestamp'].simpleString()}"
        )
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
        )
        if not ok:
            raise OptionError(
                "column 'headers' must be array<struct<key:string,value:binary>>, not "
                + h.simpleString()
            )


def _bytes_list(col: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return [None if v is None else v.encode("utf-8") for v in col.to_pylist()]
    return col.to_pylist()  # type: ignore[no-any-return]


def _timestamps_ms(col: pa.Array) -> list[int | None]:
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        return [None if v is None else v // 1000 for v in col.to_pylist()]
    return col.to_pylist()  # type: ignore[no-any-return]


class _PartitionBuffer:
    __slots__ = ("records", "size")

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.size = 0


class ChronologWriter(DataSourceArrowWriter):
    """Produce each task's rows; see the module docstring for delivery semantics."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        _check_schema(schema, opts.topic)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        opts = self.opts
        commit = WriteCommit()
        with SyncClient(opts.bootstrap, client_id="chronolog-spark-writer",
                        request_timeout=opts.request_timeout) as client:
            topics = client.list_topics()
            sticky = StickyPartitioner()
            buffers: dict[tuple[str, int], _PartitionBuffer] = {}

            sender = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="chronolog-send")
            inflight: collections.deque[concurrent.futures.Future[int]] = collections.deque()

            def send(topic: str, partition: int, batch: bytes, count: int) -> None:
                # One sender thread keeps each partition's batches in order while the
                # next batch is encoded; at most _IN_FLIGHT batches await their acks.
                inflight.append(
                    sender.submit(client.produce_batch, topic, partition, batch, acks=opts.acks)
                )
                while len(inflight) > _IN_FLIGHT:
                    inflight.popleft().result()
                commit.records += count
                commit.batches += 1
                name = f"{topic}-{partition}"
                commit.partitions[name] = commit.partitions.get(name, 0) + count

            def flush(topic: str, partition: int) -> None:
                buf = buffers.pop((topic, partition), None)
                if buf is None or not buf.records:
                    return
                send(topic, partition, build_batch(buf.records, compression=opts.compression),
                     len(buf.records))
                sticky.batch_closed(topic, len(topics[topic]))

            try:
                for rb in iterator:
                    if rb.num_rows == 0:
                        continue
                    if not self._encode_columnar(rb, topics, sticky, flush, send):
                        self._encode_rows(rb, client, topics, sticky, buffers, flush)
                for topic, p in list(buffers):
                    flush(topic, p)
                while inflight:
                    inflight.popleft().result()
            finally:
                sender.shutdown(wait=True)
        return commit

    def _encode_rows(
        self,
        rb: pa.RecordBatch,
        client: SyncClient,
        topics: dict[str, list[int]],
        sticky: StickyPartitioner,
        buffers: dict[tuple[str, int], _PartitionBuffer],
        flush: Callable[[str, int], None],
    ) -> None:
        """Row by row into per-partition buffers, each flushed at ``batch.size`` (any columns)."""
        opts = self.opts
        n = rb.num_rows
        names = rb.schema.names
        values = _bytes_list(rb.column("value"))
        keys = _bytes_list(rb.column("key")) if "key" in names else [None] * n
        if opts.topic is not None:
            tcol: list[str | None] = [opts.topic] * n
        else:
            tcol = rb.column("topic").to_pylist()
        pcol = rb.column("partition").to_pylist() if "partition" in names else [None] * n
        now = int(time.time() * 1000)
        tscol = _timestamps_ms(rb.column("timestamp")) if "timestamp" in names else [None] * n
        hcol = rb.column("headers").to_pylist() if "headers" in names else [None] * n
        keyed = self._key_partitions(rb, tcol, topics)
        for i in range(n):
            topic = tcol[i]
            if topic is None:
                raise OptionError(f"row {i} has a null topic and no 'topic' option is set")
            parts = topics.get(topic)
            if parts is None:
                topics.update(client.list_topics())
                parts = topics.get(topic)
                if parts is None:
                    raise OptionError(
                        f"topic {topic!r} does not exist; create it first "
                        "(chronolog topic create, or Client.create_topic)"
                    )
            key = keys[i]
            p = pcol[i]
            if p is None:
                if key is not None:
                    p = int(keyed[i]) if keyed is not None else partition_for_key(key, len(parts))
                else:
                    p = sticky.partition(topic, len(parts))
            elif p not in parts:
                raise OptionError(f"row {i}: topic {topic!r} has no partition {p}")
            ts = tscol[i]
            raw_headers = hcol[i]
            headers = [(h["key"], h["value"]) for h in raw_headers] if raw_headers else []
            value = values[i]
            rec = Record(0, now if ts is None else ts, key, value, headers)
            buf = buffers.get((topic, p))
            if buf is None:
                buf = buffers[(topic, p)] = _PartitionBuffer()
            buf.records.append(rec)
            buf.size += (
                _RECORD_OVERHEAD
                + (len(key) if key else 0)
                + (len(value) if value else 0)
            )
            if headers:
                buf.size += sum(len(k) + len(v or b"") for k, v in headers)
            if buf.size >= opts.batch_bytes:
                flush(topic, p)

    def _encode_columnar(
        self,
        rb: pa.RecordBatch,
        topics: dict[str, list[int]],
        sticky: StickyPartitioner,
        flush: Callable[[str, int], None],
        send: Callable[[str, int, bytes, int], None],
    ) -> bool:
        """Encode a whole Arrow batch without per-row Python, when it can be.

        Applies when every row goes to one existing topic and no row has headers.
        Returns False (nothing sent) otherwise, and the row path handles the batch.
        """
        opts = self.opts
        n = rb.num_rows
        names = rb.schema.names
        if opts.topic is not None:
            topic: str | None = opts.topic
        else:
            tcol = rb.column("topic")
            if tcol.null_count:
                return False
            topic = tcol[0].as_py()
            if not bool(pc.all(pc.equal(tcol, topic)).as_py()):
                return False
        if topic is None or topic not in topics:
            return False
        if "headers" in names:
            h = rb.column("headers")
            if h.null_count < n and int(pc.max(pc.list_value_length(h)).as_py() or 0) > 0:
                return False
        num = len(topics[topic])
        keys = rb.column("key") if "key" in names else pa.array([None] * n, type=pa.binary())
        values = rb.column("value")
        parts = partitions_for_keys(keys, num)
        if "partition" in names:
            given = rb.column("partition")
            explicit = np.asarray(given.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
            parts = np.where(explicit >= 0, explicit, parts)
            valid = np.asarray(given.is_valid().to_numpy(zero_copy_only=False), bool)
            bad = valid & ((explicit >= num) | (explicit < 0))
            if bool(bad.any()):
                i = int(np.argmax(bad))
                raise OptionError(f"row {i}: topic {topic!r} has no partition {explicit[i]}")
        unkeyed = parts < 0
        if bool(unkeyed.any()):
            parts = np.where(unkeyed, sticky.partition(topic, num), parts)
        now = int(time.time() * 1000)
        if "timestamp" in names:
            col = rb.column("timestamp")
            if pa.types.is_timestamp(col.type):
                col = pc.divide(col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()), 1000)
            ts = np.asarray(col.cast(pa.int64()).fill_null(now).to_numpy(zero_copy_only=False),
                            dtype=np.int64)
        else:
            ts = np.full(n, now, dtype=np.int64)
        sizes = (
            _RECORD_OVERHEAD
            + np.asarray(pc.fill_null(pc.binary_length(keys.cast(pa.binary())), 0), np.int64)
            + np.asarray(pc.fill_null(pc.binary_length(values.cast(pa.binary())), 0), np.int64)
        )
        for p in np.unique(parts).tolist():
            flush(topic, p)  # rows buffered by the row path go first: per-partition order
            idx = np.flatnonzero(parts == p)
            cum = np.cumsum(sizes[idx])
            first = 0
            while first < len(idx):
                limit = (cum[first - 1] if first else 0) + opts.batch_bytes
                last = max(first + 1, int(np.searchsorted(cum, limit, side="left")))
                chunk = pa.array(idx[first:last])
                batch = encode_batch(
                    keys.take(chunk), values.take(chunk), ts[idx[first:last]],
                    compression=opts.compression,
                )
                send(topic, p, batch, last - first)
                first = last
        if bool(unkeyed.any()):
            sticky.batch_closed(topic, num)
        return True

    @staticmethod
    def _key_partitions(
        rb: pa.RecordBatch, tcol: list[str | None], topics: dict[str, list[int]]
    ) -> npt.NDArray[np.int64] | None:
        """murmur2 partitions of the whole key column when all rows go to one known topic."""
        if "key" not in rb.schema.names or not tcol:
            return None
        topic = tcol[0]
        if topic is None or topic not in topics or any(t != topic for t in tcol):
            return None
        return partitions_for_keys(rb.column("key"), len(topics[topic]))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to finalise: every batch was acknowledged by the broker inside its task."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Batches acknowledged before the failure stay in the log (at-least-once)."""


class ChronologStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("chronolog")``: each micro-batch's tasks produce as a batch write does.

    At-least-once as well: a micro-batch that fails is re-run from the source
    offsets in the checkpoint, and batches its failed attempt had appended are
    appended again.
    """

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self._batch = ChronologWriter(opts, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        return self._batch.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to finalise: every batch was acknowledged inside its task."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Batches acknowledged before the failure stay in the log (at-least-once)."""
