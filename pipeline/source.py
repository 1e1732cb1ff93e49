"""``format("chronolog")``: Chronolog as a Spark source and sink (Python Data Source API).

Where each piece runs, and why it is shaped this way:
- ``ChronologDataSource`` is created by Spark from the options in a planner
  process; it only parses options (so bad options fail before any job starts).
- ``reader()`` / ``partitions()`` run in that planner process. ``partitions()``
  resolves the bounds with the broker (one ListOffsets round per bound) and
  returns ``OffsetRangePartition``s that carry everything a task needs (topic,
  partition, offsets, bootstrap servers): the reader is pickled before
  ``partitions()`` and again to executors, so it holds no connection.
- With ``eventTime`` the planner asks the broker for the window's plan
  (PlanTimeWindow) instead and returns ``EventTimePartition``s: a task reads only
  planned offset ranges and keeps the rows with start <= timestamp < end. A
  positional time window (no ``eventTime``) over partitions whose timestamps
  arrived out of order logs one WARNING from the planner (:mod:`pipeline.disorder`).
- With ``remoteStorage`` the planner also reads the tier's manifests and turns what the
  bucket holds into ``RemoteSegmentPartition``s (:mod:`pipeline.remote`): their tasks do
  ranged GETs of segment objects instead of fetches; the rest stays with the broker.
- ``read()`` runs on executors, opens its own connection (or its own object store)
  and yields Arrow batches (:mod:`pipeline.fetcher`). Nothing assumes a shared disk or
  process.
- The streaming reader keeps a broker connection in the planner process across
  micro-batches (dropped when pickled); its offsets are plain JSON-able dicts
  ``{"topic": {"0": 42}}`` that Spark checkpoints, so a restarted query resumes
  exactly where the last committed micro-batch ended.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from client import SyncClient, TopicPartition
from pipeline.disorder import warn_if_disordered
from pipeline.fetcher import read_range, read_ranges
from pipeline.offsets import (
    OffsetRange,
    event_time_tasks,
    latest_offsets,
    plan_event_time,
    resolve_bound,
    resolve_ranges,
    split_ranges,
)
from pipeline.options import (
    OptionError,
    ReadOptions,
    parse_read_options,
    parse_write_options,
)
from pipeline.remote import RemoteTask, Tier, open_store, plan_positional, read_task
from pipeline.remote import plan_event_time as remote_event_time
from pipeline.schema import SPARK_SCHEMA

__all__ = ["ChronologDataSource", "OffsetRangePartition", "EventTimePartition",
           "RemoteSegmentPartition"]


class OffsetRangePartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"OffsetRangePartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


class EventTimePartition(InputPartition):
    """One event-time Spark task: planned offset ranges ``(start, end, bytes)`` of one topic
    partition, read in order, keeping the rows with ``window[0] <= timestamp < window[1]``."""

    def __init__(self, topic: str, partition: int, ranges: tuple[tuple[int, int, int], ...],
                 window: tuple[int, int]) -> None:
        super().__init__((topic, partition, ranges, window))
        self.topic = topic
        self.partition = partition
        self.ranges = ranges
        self.window = window

    @property
    def bytes(self) -> int:
        """The planned bytes of its ranges (of a range cut between tasks, this piece's share)."""
        return sum(b for _, _, b in self.ranges)

    def __repr__(self) -> str:
        spans = ", ".join(f"[{s}, {e})" for s, e, _ in self.ranges)
        return f"EventTimePartition({self.topic}-{self.partition} {spans} ms {self.window})"


class RemoteSegmentPartition(InputPartition):
    """One Spark task reading byte ranges of tiered segments of one partition straight from
    the bucket (``remoteStorage``, :mod:`pipeline.remote`)."""

    def __init__(self, task: RemoteTask) -> None:
        super().__init__(tuple(task))
        self.task = task

    def __repr__(self) -> str:
        t = self.task
        spans = ", ".join(f"[{s.start}, {s.end})" for s in t.spans)
        return f"RemoteSegmentPartition({t.topic}-{t.partition} {spans})"


def event_time_partitions(client: SyncClient, opts: ReadOptions) -> list[InputPartition]:
    """The tasks of an event-time batch read (what ``partitions()`` returns); with
    ``remoteStorage`` the tiered part becomes remote tasks, one per planned segment."""
    plan = plan_event_time(client, opts)
    window = opts.event_window()
    remote: list[InputPartition] = []
    if opts.remote:
        parts = opts.subscription.select(client.list_topics())
        tasks, plan = remote_event_time(Tier(open_store(opts.remote)), client, parts, window,
                                        plan, opts.isolation_level)
        remote = [RemoteSegmentPartition(t) for t in tasks]
    pieces = event_time_tasks(plan, opts.min_partitions, opts.max_records_per_partition)
    return remote + [EventTimePartition(t[0].topic, t[0].partition,
                                        tuple((r.start, r.end, r.bytes) for r in t), window)
                     for t in pieces]


def _read(opts: ReadOptions, part: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(part, RemoteSegmentPartition):
        return read_task(opts.remote, part.task, chunk_bytes=opts.fetch_max_bytes,
                         fail_on_data_loss=opts.fail_on_data_loss)
    if isinstance(part, EventTimePartition):
        return read_ranges(
            opts.bootstrap, part.topic, part.partition, part.ranges, window=part.window,
            fetch_max_bytes=opts.fetch_max_bytes, fail_on_data_loss=opts.fail_on_data_loss,
            request_timeout=opts.request_timeout, isolation_level=opts.isolation_level,
        )
    if not isinstance(part, OffsetRangePartition) and part.value is None:
        # Spark plans one placeholder partition when partitions() is empty (nothing to read).
        return iter(())
    if not isinstance(part, OffsetRangePartition):
        raise TypeError(f"chronolog got a foreign input partition {part!r}")
    return read_range(
        opts.bootstrap,
        part.topic,
        part.partition,
        part.start,
        part.end,
        fetch_max_bytes=opts.fetch_max_bytes,
        fail_on_data_loss=opts.fail_on_data_loss,
        request_timeout=opts.request_timeout,
        isolation_level=opts.isolation_level,
    )


def _fixed_schema(schema: StructType) -> None:
    if [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in SPARK_SCHEMA.fields
    ]:
        raise OptionError(
            "format('chronolog') has the fixed schema of Spark's Kafka source "
            f"({SPARK_SCHEMA.simpleString()}); remove .schema(...) and select or cast "
            "columns after load()"
        )


class ChronologDataSource(DataSource):
    """Spark's ``format("chronolog")``: read time windows, stream, and write records."""

    @classmethod
    def name(cls) -> str:
        return "chronolog"

    def schema(self) -> StructType:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _fixed_schema(schema)
        return ChronologBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _fixed_schema(schema)
        return ChronologStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pipeline.writer import ChronologWriter

        if overwrite:
            raise OptionError(
                "mode('overwrite') is not supported: a log is append-only; use mode('append')"
            )
        return ChronologWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pipeline.writer import ChronologStreamWriter

        return ChronologStreamWriter(parse_write_options(self.options), schema)


class ChronologBatchReader(DataSourceReader):
    """Batch read of offset ranges resolved once, at planning time."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        with SyncClient(self.opts.bootstrap, request_timeout=self.opts.request_timeout) as c:
            if self.opts.event_time:
                return event_time_partitions(c, self.opts)
            ranges = resolve_ranges(c, self.opts)
            if self.opts.positional_window:
                warn_if_disordered(c, _by_topic(ranges))
            pieces = split_ranges(
                ranges, self.opts.min_partitions, self.opts.max_records_per_partition
            )
            remote: list[InputPartition] = []
            if self.opts.remote:
                tasks, pieces = plan_positional(Tier(open_store(self.opts.remote)), c, pieces,
                                                self.opts.isolation_level)
                remote = [RemoteSegmentPartition(t) for t in tasks]
        return remote + [OffsetRangePartition(r.topic, r.partition, r.start, r.end)
                         for r in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)


def _by_topic(ranges: Sequence[OffsetRange]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in ranges:
        out.setdefault(r.topic, []).append(r.partition)
    return out


def _as_offsets(d: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(d):
        out.setdefault(tp.topic, {})[str(tp.partition)] = d[tp]
    return out


def _from_offsets(doc: dict[str, Any]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()
    }


class ChronologStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reads of everything appended since the last batch, at most maxOffsetsPerTrigger.

    Offsets are ``{"topic": {"partition": next offset to read}}``. Partitions that
    appear while the query runs start at their earliest offset.
    """

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._client: SyncClient | None = None
        self._target: dict[TopicPartition, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _c(self) -> SyncClient:
        if self._client is None:
            self._client = SyncClient(self.opts.bootstrap, request_timeout=self.opts.request_timeout)
        return self._client

    def _partitions(self) -> dict[str, list[int]]:
        return self.opts.subscription.select(self._c().list_topics())

    def initialOffset(self) -> dict[str, Any]:
        parts = self._partitions()
        start = resolve_bound(
            self._c(), self.opts.starting, parts, "starting", {},
            strategy=self.opts.starting_strategy, isolation_level=self.opts.isolation_level,
        )
        return _as_offsets(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        parts = self._partitions()
        self._target = latest_offsets(
            self._c(), [TopicPartition(t, p) for t, ps in parts.items() for p in ps],
            self.opts.isolation_level,
        )

    def _available(self, start: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Latest offsets of every partition; new partitions begin at their earliest offset."""
        if self._target is not None:
            latest = dict(self._target)
        else:
            parts = self._partitions()
            latest = latest_offsets(
                self._c(), [TopicPartition(t, p) for t, ps in parts.items() for p in ps],
                self.opts.isolation_level,
            )
        new = [tp for tp in latest if tp not in start]
        if new:
            earliest = self._c().list_offsets({tp: -2 for tp in new})
            for tp in new:
                start[tp] = earliest[tp][0]
        return latest

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = _from_offsets(start)
        latest = self._available(begin)
        end = {tp: max(begin.get(tp, off), off) for tp, off in latest.items()}
        for tp, off in begin.items():
            end.setdefault(tp, off)
        if isinstance(limit, ReadMaxRows):
            end = _rate_limit(begin, end, limit.max_rows)
        return _as_offsets(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        parts = self._partitions()
        return _as_offsets(
            latest_offsets(self._c(), [TopicPartition(t, p) for t, ps in parts.items() for p in ps],
                           self.opts.isolation_level)
        )

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = _from_offsets(start)
        stop = _from_offsets(end)
        out: list[InputPartition] = []
        missing = [tp for tp in stop if tp not in begin]
        if missing:
            earliest = self._c().list_offsets({tp: -2 for tp in missing})
            for tp in missing:
                begin[tp] = earliest[tp][0]
        ranges = [
            OffsetRange(tp.topic, tp.partition, begin[tp], stop[tp])
            for tp in sorted(stop)
            if stop[tp] > begin[tp]
        ]
        pieces = split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        out.extend(OffsetRangePartition(r.topic, r.partition, r.start, r.end) for r in pieces)
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, the log keeps the records."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _rate_limit(
    begin: dict[TopicPartition, int], end: dict[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """Cap the total new offsets at ``max_rows``, shared in proportion to each backlog.

    Every partition with a backlog gets its floor share; the rows left by rounding
    go to the partitions with the largest remainders, so the total is exactly
    min(max_rows, backlog) and no partition starves for ever.
    """
    backlog = {tp: end[tp] - begin.get(tp, end[tp]) for tp in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return end
    share: dict[TopicPartition, int] = {}
    rema: list[tuple[float, TopicPartition]] = []
    for tp, size in backlog.items():
        exact = max_rows * size / total
        share[tp] = int(exact)
        rema.append((exact - int(exact), tp))
    left = max_rows - sum(share.values())
    for _, tp in sorted(rema, key=lambda x: (-x[0], x[1]))[:left]:
        share[tp] += 1
    return {tp: begin.get(tp, end[tp]) + min(share[tp], backlog[tp]) for tp in end}

