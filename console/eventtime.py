"""Records per time bucket by their own timestamps (event time), exact on out-of-order data.

The positional timeline (``console.timeline``) counts the offsets between the first
offsets at or after two times: what a reader of that window replays, which under
out-of-order CreateTime leaves buckets empty that hold records. This module counts
every record in the bucket its timestamp falls in: bucket ``[t1, t2)`` holds the
records with ``t1 <= timestamp < t2``, summed over partitions.

A Chronolog broker answers the count itself (CountTimeWindows, key 10001: exact
per-bucket counts from its sorted-timestamp indexes), so a chart is one request and
nothing is kept here. A broker without it (Kafka) gets the fallback: the console reads
every record's timestamp once (the Arrow path, one column kept) and keeps them, sorted,
per partition; a chart is then one binary search per boundary and chunk.

Invariants:
- with CountTimeWindows a chart's counts are the broker's, exact for [log start, high
  watermark) as the count saw them (the page's offsets come from the PlanTimeWindow
  asked just before); bounds that depend on the data's extent get it from one more
  CountTimeWindows over a ladder of boundaries (an extent that encloses every record:
  from below the smallest timestamp — within 1/400 of the data's span when the smallest
  lies within twice the span below the first records' timestamps, else within 10 % of
  its distance — to the largest + 1 exactly, ListOffsets MAX_TIMESTAMP);
- a partition's cache covers the offsets ``[log_start, end)`` and holds the timestamp
  of every record there that a read_uncommitted consumer receives (control records
  and compacted-away offsets hold none), as sorted ``int64`` chunks, each with the
  offset range it was read from;
- before a chart is counted, each partition is brought to the broker's current log
  start and high watermark: chunks below a new log start are dropped (the one it cuts
  is read again from it), records past ``end`` are read and added; a high watermark
  or log start that went back (topic re-created, truncation) or a broker record count
  below the cached one (compaction) drops the partition's cache and reads it again, and
  so does a batch at the last offset read whose header is not the one read then (the
  topic was deleted and created again under its name);
- a chart's counts are therefore exact for the offsets ``[log start, high watermark)``
  the page reports, and its buckets add up to the records whose timestamps lie in the
  chart's range;
- at most ``max_records`` timestamps are kept (8 bytes each), least recently charted
  topics dropped first; a chart that needs more is refused (``TooLarge``) rather than
  read on every request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from client.aio import COUNT_TIME_WINDOWS, EARLIEST, LATEST, MAX_TIMESTAMP, Client, TopicPartition
from console.timeline import Chart
from protocol.errors import ErrorCode, KafkaError

__all__ = ["DEFAULT_MAX_RECORDS", "EventTimeline", "PartitionState", "TimestampCache", "TooLarge",
           "Warming", "partition_states"]

log = logging.getLogger(__name__)

I64 = npt.NDArray[np.int64]
#: Timestamps one console keeps (8 bytes each: 40M is 320 MB).
DEFAULT_MAX_RECORDS = 40_000_000
#: Kafka's batch header up to and including the CRC (which covers the rest of the batch).
_MARK_BYTES = 21
#: Records per sorted chunk: small enough to re-sort when new records join the last one.
CHUNK = 1 << 18


class TooLarge(Exception):
    """The chart needs more timestamps than the console keeps."""


class Warming(Exception):
    """The chart is not ready yet: its records are still being read (``done`` of about
    ``total`` offsets); the reading goes on without the caller."""

    def __init__(self, topic: str, done: int, total: int) -> None:
        super().__init__(f"{topic}: read {done:,} of about {total:,} records")
        self.topic, self.done, self.total = topic, done, total


class PartitionState(NamedTuple):
    """A partition as the broker reports it, before a chart is counted."""

    log_start: int
    high_watermark: int
    #: Data records in [log start, log end) (PlanTimeWindow's count); None from a
    #: broker without PlanTimeWindow.
    records: int | None
    late_records: int | None
    max_lateness_ms: int | None


async def partition_states(client: Client, topic: str, parts: Sequence[int]
                           ) -> dict[int, PartitionState]:
    """Log start, high watermark and disorder counts per partition: one PlanTimeWindow of
    an empty window (no range computed), or ListOffsets from a broker without it."""
    try:
        plans = await client.plan_time_window(topic, 0, 0, parts)
    except KafkaError as e:
        if e.code != ErrorCode.UNSUPPORTED_VERSION:
            raise
    else:
        return {p: PartitionState(pl.log_start_offset, pl.high_watermark, pl.disorder.records,
                                  pl.disorder.late_records, pl.disorder.max_lateness_ms)
                for p, pl in plans.items()}
    tps = [TopicPartition(topic, p) for p in parts]
    lo, hi = await asyncio.gather(client.list_offsets(dict.fromkeys(tps, EARLIEST)),
                                  client.list_offsets(dict.fromkeys(tps, LATEST)))
    return {tp.partition: PartitionState(lo[tp][0], hi[tp][0], None, None, None) for tp in tps}


#: The extent probe (broker_extent): this many even steps over twice the data's span
#: below the first records' smallest timestamp, and as many steps growing 10 % each
#: beyond, up to 2**62 ms (few boundaries: the counts of every partition come back).
_EVEN_STEPS = 800
_LADDER = np.unique(np.round(np.geomspace(1.0, float(1 << 62), 450)).astype(np.int64))


async def broker_extent(client: Client, topic: str, parts: Sequence[int],
                        states: dict[int, PartitionState]) -> tuple[int, int] | None:
    """[lo, largest timestamp + 1) enclosing every record of ``parts`` (None when they
    hold none): the largest timestamp from ListOffsets MAX_TIMESTAMP, and lo from one
    CountTimeWindows over a ladder below the first records' smallest timestamp (the
    records there are not the smallest under disorder; the ladder finds the step below
    the smallest: module docstring)."""
    if all(s.high_watermark <= s.log_start for s in states.values()):
        return None
    tps = [TopicPartition(topic, p) for p in parts]
    first, mx = await asyncio.gather(client.list_offsets(dict.fromkeys(tps, 0)),
                                     client.list_offsets(dict.fromkeys(tps, MAX_TIMESTAMP)))
    firsts = [ts for off, ts in first.values() if off >= 0]
    lasts = [ts for off, ts in mx.values() if off >= 0]
    if not firsts or not lasts:
        return None
    guess, hi = min(firsts), max(lasts) + 1
    span = max(hi - guess, 1)
    even = guess - np.linspace(0, 2 * span, _EVEN_STEPS).astype(np.int64)
    far = guess - 2 * span - _LADDER
    ladder = np.unique(np.concatenate([[-(1 << 63)], far[far > -(1 << 63)], even]).astype(np.int64))
    per = await client.count_time_windows(topic, ladder.tolist(), parts)
    below = np.sum([np.asarray(c, dtype=np.int64) for c in per.values()], axis=0)
    nz = np.flatnonzero(below)
    lo = int(ladder[nz[0]]) if len(nz) else guess
    return min(lo, guess), max(hi, guess + 1)


@dataclass
class _Chunk:
    first: int  # the offsets it was read from: [first, next)
    next: int
    ts: I64  # sorted


@dataclass
class _Partition:
    log_start: int = 0
    end: int = 0
    chunks: list[_Chunk] = field(default_factory=list)
    #: (offset, header of the batch holding it) for the last offset read: a re-created
    #: topic of the same name may reach the same offsets, but not with the same batch.
    mark: tuple[int, bytes] | None = None

    @property
    def records(self) -> int:
        return sum(len(c.ts) for c in self.chunks)

    def counts(self, bounds: I64) -> I64:
        out = np.zeros(len(bounds) - 1, dtype=np.int64)
        for c in self.chunks:
            out += np.diff(np.searchsorted(c.ts, bounds, side="left"))
        return out


@dataclass(kw_only=True)
class EventTimeline(Chart):
    """Counts per bucket by the records' own timestamps (module docstring)."""

    per_partition: dict[int, list[int]]
    log_starts: dict[int, int]
    states: dict[int, PartitionState]
    #: Records read from the broker for this chart (0 when the cache was current).
    read_records: int = 0
    by: str = "event"

    def partition_counts(self, partition: int) -> list[int]:
        return self.per_partition[partition]

    def as_json(self) -> dict[str, object]:
        return self._json(
            partition_counts={str(p): v for p, v in self.per_partition.items()},
            high_watermarks={str(p): v for p, v in self.high_watermarks.items()},
            log_starts={str(p): v for p, v in self.log_starts.items()},
            total=self.total,
            read_records=self.read_records,
            server_ms=round(self.server_ms, 3),
        )


def _chart(topic: str, parts: list[int], bounds: list[int], per: dict[int, list[int]],
           states: dict[int, PartitionState], read_records: int, t0: float) -> EventTimeline:
    """The chart of the per-partition bucket counts ``per``, read from the cache or
    counted by the broker, ``t0`` (perf_counter) being when the request started."""
    counts = ([sum(col) for col in zip(*per.values(), strict=True)] if per
              else [0] * (len(bounds) - 1))
    return EventTimeline(
        topic=topic, partitions=parts, bounds=bounds, counts=counts, per_partition=per,
        high_watermarks={p: states[p].high_watermark for p in parts},
        log_starts={p: states[p].log_start for p in parts}, states=states,
        read_records=read_records, server_ms=(time.perf_counter() - t0) * 1000)


class TimestampCache:
    """Every record's timestamp per partition, kept current by reading only what changed."""

    def __init__(self, max_records: int = DEFAULT_MAX_RECORDS, *, broker_counts: bool = True
                 ) -> None:
        self.max_records = max_records
        #: Ask a broker that has CountTimeWindows for the counts (False: always read and
        #: keep the timestamps, as against Kafka).
        self.broker_counts = broker_counts
        self._topics: OrderedDict[str, dict[int, _Partition]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        #: Charts being counted (kept so a chart a page stopped waiting for runs on).
        self._running: set[asyncio.Future[EventTimeline]] = set()
        #: Per topic being read: offsets read so far, and to read.
        self._progress: dict[str, tuple[int, int]] = {}

    @property
    def records(self) -> int:
        return sum(p.records for t in self._topics.values() for p in t.values())

    def forget(self, topic: str) -> None:
        self._topics.pop(topic, None)

    async def timeline(
        self, client: Client, topic: str,
        bounds: Sequence[int] | Callable[[tuple[int, int] | None], Sequence[int]],
        partitions: Sequence[int] | None = None, *, wait_s: float | None = None,
    ) -> EventTimeline:
        """Exact counts of ``topic``'s records in each bucket between consecutive ``bounds``;
        ``bounds`` may be a function of the records' extent (smallest timestamp, largest
        + 1; None without records), called once the cache is current.

        With ``wait_s``, a chart not ready within that many seconds (a first chart reads
        every record) raises :class:`Warming`; the reading goes on, so a later call finds
        the cache (nearly) current."""
        parts = list(partitions) if partitions is not None else await client.partitions_for(topic)
        task = asyncio.ensure_future(self._count(client, topic, bounds, parts))
        self._running.add(task)
        task.add_done_callback(self._finished)
        try:
            return await asyncio.wait_for(asyncio.shield(task), wait_s)
        except TimeoutError:
            done, total = self._progress.get(topic, (0, 0))
            raise Warming(topic, done, total) from None

    def _finished(self, task: asyncio.Future[EventTimeline]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.info("event-time chart failed: %s", task.exception())

    async def _count(
        self, client: Client, topic: str,
        bounds: Sequence[int] | Callable[[tuple[int, int] | None], Sequence[int]],
        parts: list[int],
    ) -> EventTimeline:
        t0 = time.perf_counter()
        if self.broker_counts and client.supports(COUNT_TIME_WINDOWS):
            return await self._count_on_broker(client, topic, bounds, parts, t0)
        lock = self._locks.setdefault(topic, asyncio.Lock())
        async with lock:
            states = await partition_states(client, topic, parts)
            need = sum(max(0, s.high_watermark - s.log_start) for s in states.values())
            if need > self.max_records:
                raise TooLarge(f"{topic} holds up to {need:,} records in the partitions asked; "
                               f"the console keeps at most {self.max_records:,} timestamps")
            cached = self._topics.setdefault(topic, {})
            self._topics.move_to_end(topic)
            self._evict(keep=topic, room=need - sum(cached[p].records for p in parts if p in cached))
            ahead = sum(max(0, states[p].high_watermark - max(cached[p].end, states[p].log_start))
                        if p in cached else states[p].high_watermark - states[p].log_start
                        for p in parts)
            self._progress[topic] = (0, ahead)
            try:
                reads = await asyncio.gather(*(
                    self._sync(client, topic, p, cached.setdefault(p, _Partition()), states[p])
                    for p in parts))
            finally:
                self._progress.pop(topic, None)
            if callable(bounds):
                bounds = bounds(self._extent(cached, parts))
            b = np.asarray(bounds, dtype=np.int64)
            per = {p: cached[p].counts(b).tolist() for p in parts}
        return _chart(topic, parts, list(bounds), per, states, sum(reads), t0)

    async def _count_on_broker(
        self, client: Client, topic: str,
        bounds: Sequence[int] | Callable[[tuple[int, int] | None], Sequence[int]],
        parts: list[int], t0: float,
    ) -> EventTimeline:
        """The chart from the broker's exact counts (CountTimeWindows): one request, or
        two when the bounds depend on the data's extent."""
        states = await partition_states(client, topic, parts)
        if callable(bounds):
            bounds = bounds(await broker_extent(client, topic, parts, states))
        b = [int(x) for x in bounds]
        per = await client.count_time_windows(topic, b, parts)
        return _chart(topic, parts, b, per, states, 0, t0)

    @staticmethod
    def _extent(cached: dict[int, _Partition], parts: Sequence[int]) -> tuple[int, int] | None:
        chunks = [c.ts for p in parts for c in cached[p].chunks if len(c.ts)]
        if not chunks:
            return None
        return min(int(c[0]) for c in chunks), max(int(c[-1]) for c in chunks) + 1

    def _evict(self, keep: str, room: int) -> None:
        """Drop the least recently charted topics until ``room`` more timestamps fit."""
        while len(self._topics) > 1 and self.records + room > self.max_records:
            oldest = next(iter(self._topics))
            if oldest == keep:
                break
            del self._topics[oldest]

    async def _sync(self, client: Client, topic: str, p: int, part: _Partition,
                    state: PartitionState) -> int:
        """Bring ``part`` to the broker's [log start, high watermark); the records read."""
        ls, hw = state.log_start, state.high_watermark
        if hw < part.end or ls < part.log_start or (
                part.mark is not None and ls <= part.mark[0] < hw
                and await self._mark(client, topic, p, part.mark[0]) != part.mark[1]):
            # Gone back (truncated), or not the log we read: the topic was re-created.
            part.chunks.clear()
            part.log_start = part.end = ls
            part.mark = None
        if not part.chunks:
            part.log_start = part.end = max(part.end, ls)
        read = 0
        if ls > part.log_start:
            kept = [c for c in part.chunks if c.next > ls]
            if kept and kept[0].first < ls:
                cut = kept.pop(0)
                fresh = await self._read(client, topic, p, ls, cut.next)
                read += sum(len(c.ts) for c in fresh)
                kept[:0] = fresh
            part.chunks = kept
            part.log_start = ls
            part.end = max(part.end, ls)
        if hw > part.end:
            fresh = await self._read(client, topic, p, part.end, hw)
            read += sum(len(c.ts) for c in fresh)
            last = part.chunks[-1] if part.chunks else None
            if fresh and last is not None and len(last.ts) + len(fresh[0].ts) <= CHUNK:
                # Timsort merges the sorted run and the new records in about linear time.
                add = fresh.pop(0)
                last.ts = np.sort(np.concatenate([last.ts, add.ts]), kind="stable")
                last.next = add.next
            part.chunks += fresh
            part.end = hw
            part.mark = (hw - 1, await self._mark(client, topic, p, hw - 1))
        if state.records is not None and part.records > state.records:
            # The broker counts fewer records in [log start, log end) than we hold for
            # [log start, high watermark): some left from the middle (compaction).
            part.chunks = await self._read(client, topic, p, ls, hw)
            read += part.records
        return read

    @staticmethod
    async def _mark(client: Client, topic: str, p: int, offset: int) -> bytes:
        """The fixed header (base offset, length, leader epoch, magic, CRC) of the batch
        holding ``offset``: the same bytes as long as that batch is the one we read."""
        try:
            res = await client.fetch_raw(topic, p, offset, 1)
        except KafkaError as e:
            if e.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            return b""
        return res.records_bytes[:_MARK_BYTES]

    async def _read(self, client: Client, topic: str, p: int, start: int, end: int) -> list[_Chunk]:
        """The timestamps of the records in offsets [start, end) as sorted chunks that
        cover the range without gaps (each ends where the next begins, the last at end)."""
        out: list[_Chunk] = []
        first = start
        cols: list[I64] = []
        held = 0
        async for batch in client.consume_arrow(topic, p, start, end):
            if held >= CHUNK:
                nxt = int(batch.column("offset")[0].as_py())
                out.append(_Chunk(first, nxt, np.sort(np.concatenate(cols))))
                first, cols, held = nxt, [], 0
            cols.append(batch.column("timestamp").to_numpy())
            held += batch.num_rows
            done, total = self._progress.get(topic, (0, 0))
            self._progress[topic] = (done + batch.num_rows, total)
        if cols:
            out.append(_Chunk(first, end, np.sort(np.concatenate(cols))))
        return out
