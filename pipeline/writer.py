"""``df.write.format("chronolog")``: append a DataFrame's rows to topics as record batches.

Columns (others are ignored, as by Spark's Kafka sink, so a DataFrame read from
``format("chronolog")`` can be written back as it is):
- ``value`` (binary or string) — required;
- ``key`` (binary or string) — optional, null keys allowed;
- ``topic`` (string) — optional; the ``topic`` option, when given, overrides it;
- ``partition`` (int) — optional; when absent or null, Kafka's default
  partitioner picks it (murmur2 of the key, sticky rotation for null keys);
- ``timestamp`` (timestamp, or long epoch ms) — optional; null = now; absent =
  the time each record batch is built (one time for all its records);
- ``headers`` (array<struct<key:string,value:binary>>) — optional.

Delivery is at-least-once. Each Spark task produces its rows in batches of up
to ``batch.size`` bytes per partition and waits for every acknowledgement
(``acks=all`` by default; ``acks`` is honoured, and with ``acks=0`` nothing is
confirmed) before it reports success. If a task fails after some of its
batches were acknowledged, Spark retries the whole task and those batches are
appended a second time; a job that is re-run after a failure likewise appends
again. No producer id is used: Kafka's idempotence de-duplicates a producer's
retries within one session, not a re-run task, so it would not change this.
Readers that need exactly-once must de-duplicate (e.g. on a key) downstream.
Within one task and partition, rows keep their DataFrame order.

Speed: rows never become Python objects. Each Arrow batch Spark hands over is
split by topic and partition with NumPy (murmur2 of the keys vectorised,
:func:`client.partitioner.partitions_for_keys`); a partition's rows collect
across Arrow batches until ``batch.size`` and are then built into one record
batch from their columns (:func:`storage.columnar.build_batch_columns`). Up to
``_IN_FLIGHT`` Produce requests per task are on the wire at once
(:meth:`client.SyncClient.send_batches`, written in order), so encoding the
next batch overlaps the broker appending the last.
"""

from __future__ import annotations

import collections
import concurrent.futures
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

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
from client.partitioner import StickyPartitioner, partitions_for_keys
from pipeline.options import OptionError, WriteOptions
from storage import columnar
from storage.records import HEADER_SIZE

__all__ = ["ChronologWriter", "WriteCommit"]

_IN_FLIGHT = 5
"""Produce requests a task may have on the wire, unanswered (Kafka's in-flight default)."""


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


class _Rows:
    """A partition's rows waiting for a full batch: Arrow tables and a bound of their size."""

    __slots__ = ("tables", "stamps", "sizes", "size")

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        # Epoch ms per row, or None for rows without a timestamp column: those are
        # stamped when their batch is built (one time for the batch, as a producer does).
        self.stamps: list[npt.NDArray[np.int64] | None] = []
        self.sizes: list[npt.NDArray[np.int64]] = []
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
            task = _Task(client, opts, commit)
            try:
                for rb in iterator:
                    if rb.num_rows:
                        task.add(rb)
                task.flush_all()
                task.wait(0)
            finally:
                task.abandon()
        return commit

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to finalise: every batch was acknowledged by the broker inside its task."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Batches acknowledged before the failure stay in the log (at-least-once)."""


class _Task:
    """One task's write: rows placed per partition, batches built and sent in order."""

    def __init__(self, client: SyncClient, opts: WriteOptions, commit: WriteCommit) -> None:
        self.client = client
        self.opts = opts
        self.commit = commit
        self.topics = client.list_topics()
        self.sticky = StickyPartitioner()
        self.pending: dict[tuple[str, int], _Rows] = {}
        self.inflight: collections.deque[
            tuple[concurrent.futures.Future[dict[int, int]], str, int, int]] = collections.deque()

    def add(self, rb: pa.RecordBatch) -> None:
        """Place an Arrow batch's rows on their topics and partitions."""
        opts = self.opts
        n = rb.num_rows
        if opts.topic is not None:
            self._add_topic(rb, opts.topic)
            return
        tcol = rb.column("topic")
        if tcol.null_count:
            i = int(np.argmin(np.asarray(tcol.is_valid())))
            raise OptionError(f"row {i} has a null topic and no 'topic' option is set")
        enc = tcol.dictionary_encode()
        codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        for j, topic in enumerate(enc.dictionary.to_pylist()):
            idx = np.flatnonzero(codes == j)
            self._add_topic(rb if len(idx) == n else rb.take(pa.array(idx)), topic)

    def _partitions(self, topic: str) -> int:
        parts = self.topics.get(topic)
        if parts is None:
            self.topics.update(self.client.list_topics())
            parts = self.topics.get(topic)
            if parts is None:
                raise OptionError(
                    f"topic {topic!r} does not exist; create it first "
                    "(chronolog topic create, or Client.create_topic)"
                )
        return len(parts)

    def _add_topic(self, rb: pa.RecordBatch, topic: str) -> None:
        num = self._partitions(topic)
        names = rb.schema.names
        n = rb.num_rows
        keys = columnar.binary_column(rb.column("key") if "key" in names else None, n)
        values = columnar.binary_column(rb.column("value"))
        parts = partitions_for_keys(keys, num) if keys.null_count < n else np.full(n, -1, np.int64)
        if "partition" in names:
            given = rb.column("partition")
            explicit = np.asarray(given.cast(pa.int64()).fill_null(-1)
                                  .to_numpy(zero_copy_only=False), dtype=np.int64)
            valid = np.asarray(given.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            bad = valid & ((explicit >= num) | (explicit < 0))
            if bool(bad.any()):
                i = int(np.argmax(bad))
                raise OptionError(f"row {i}: topic {topic!r} has no partition {explicit[i]}")
            parts = np.where(valid, explicit, parts)
        unkeyed = parts < 0
        if bool(unkeyed.any()):
            parts = np.where(unkeyed, self.sticky.partition(topic, num), parts)
        ts = (columnar.timestamp_column(rb.column("timestamp"), n, int(time.time() * 1000))
              if "timestamp" in names else None)
        columns: dict[str, Any] = {"key": keys, "value": values}
        header_bytes = None
        if "headers" in names:
            h = rb.column("headers")
            if h.null_count < n and int(pc.max(pc.list_value_length(h)).as_py() or 0) > 0:
                columns["headers"] = h
                header_bytes = columnar.header_section_sizes(h, n)
        table = pa.table(columns)
        sizes = columnar.encoded_sizes(keys, values, header_bytes)
        first = int(parts[0])
        groups = ([(first, None)] if bool((parts == first).all())
                  else [(p, np.flatnonzero(parts == p))  # partitions are 0..num-1: count, don't sort
                     for p in np.flatnonzero(np.bincount(parts, minlength=num)).tolist()])
        for p, idx in groups:
            rows = self.pending.get((topic, p))
            if rows is None:
                rows = self.pending[(topic, p)] = _Rows()
            sub = table if idx is None else table.take(columnar.numeric_array(idx))
            sub_sizes = sizes if idx is None else sizes[idx]
            rows.tables.append(sub)
            rows.stamps.append(ts if ts is None or idx is None else ts[idx])
            rows.sizes.append(sub_sizes)
            rows.size += int(sub_sizes.sum())
            if rows.size >= self.opts.batch_bytes:
                self._flush(topic, p, full_only=True)
        if bool(unkeyed.any()):
            self.sticky.batch_closed(topic, num)

    def _flush(self, topic: str, partition: int, *, full_only: bool = False) -> None:
        """Build and send the partition's rows as batches of at most batch.size (all of
        them, or with ``full_only`` only whole batches, keeping the rest pending)."""
        rows = self.pending.pop((topic, partition), None)
        if rows is None or not rows.tables:
            return
        table = (pa.concat_tables(rows.tables, promote_options="default")  # headers may be absent
                 if len(rows.tables) > 1 else rows.tables[0])
        sizes = np.concatenate(rows.sizes) if len(rows.sizes) > 1 else rows.sizes[0]
        stamps: npt.NDArray[np.int64] | None = None
        if any(t is not None for t in rows.stamps):
            now = int(time.time() * 1000)
            stamps = np.concatenate([np.full(len(tb), now, np.int64) if t is None else t
                                     for tb, t in zip(rows.tables, rows.stamps, strict=True)])
        cum = np.cumsum(sizes)
        limit = max(1, self.opts.batch_bytes - HEADER_SIZE)
        start = 0
        n = len(sizes)
        while start < n:
            base = int(cum[start - 1]) if start else 0
            stop = max(start + 1, int(np.searchsorted(cum, base + limit, side="right")))
            if full_only and stop == n and int(cum[-1]) - base < limit:
                rest = _Rows()
                rest.tables = [table.slice(start)]
                rest.stamps = [None if stamps is None else stamps[start:]]
                rest.sizes = [sizes[start:]]
                rest.size = int(cum[-1]) - base
                self.pending[(topic, partition)] = rest
                return
            chunk = table.slice(start, stop - start)
            batch = columnar.build_batch_columns(
                chunk.column("key"), chunk.column("value"),
                None if stamps is None else stamps[start:stop],
                chunk.column("headers") if "headers" in chunk.column_names else None,
                compression=self.opts.compression,
            )
            self._send(topic, partition, batch, stop - start)
            start = stop

    def flush_all(self) -> None:
        for topic, p in list(self.pending):
            self._flush(topic, p)

    def _send(self, topic: str, partition: int, batch: bytes, count: int) -> None:
        fut = self.client.send_batches(topic, {partition: batch}, acks=self.opts.acks)
        self.inflight.append((fut, topic, partition, count))
        self.wait(_IN_FLIGHT)

    def wait(self, keep: int) -> None:
        """Wait for acknowledgements until at most ``keep`` requests are unanswered."""
        while len(self.inflight) > keep:
            fut, topic, partition, count = self.inflight.popleft()
            fut.result()
            c = self.commit
            c.records += count
            c.batches += 1
            name = f"{topic}-{partition}"
            c.partitions[name] = c.partitions.get(name, 0) + count

    def abandon(self) -> None:
        """After a failure: let requests still in flight finish (errors already raised)."""
        for fut, *_ in self.inflight:
            try:
                fut.result()
            except Exception:  # the first failure is what the task reports
                pass
        self.inflight.clear()


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
