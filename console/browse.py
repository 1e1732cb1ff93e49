"""Bounded pages of records: one partition from an offset, or merged across partitions.

Invariants:
- A page never holds more than ``limit`` records and never asks the broker for
  more than ``limit`` offsets per partition (Fetch with a byte cap that only
  grows when a single batch is larger than it), so the work per page is bounded
  whatever the topic's size.
- Records are decoded by ``client.aio.decode_records`` (CRC-checked, control
  batches skipped); the timestamp type comes from each record's batch header
  (read here from Kafka's fixed header layout: the console does not import storage/).
- A position is a cursor ``{partition: next offset}``; the merged view takes
  records from the partitions' cursors in timestamp order (ties by partition),
  each partition in offset order — the order a consumer that merges partitions by
  timestamp would see. Under out-of-order CreateTime that is not a global sort.
- A filtered page (:func:`search_forward`) examines records in that same order from
  its cursor and stops at ``limit`` matches, at ``budget`` records examined or at the
  end; every record between its start and next cursors was examined, so successive
  pages search the topic without a gap or an overlap and the result is exact for the
  range the page reports. It reads at most ``budget + partitions x MAX_LIMIT`` offsets.
- An event-time window page (:func:`window_forward`, a timeline bar's records) reads
  only the offset ranges the broker plans for the window (PlanTimeWindow), compares
  timestamps column-wise (Arrow) and shows the records with t1 <= timestamp < t2, each
  partition in offset order; every offset below its ``next`` cursor was read or cannot
  hold a record of the window, so following ``next`` gives the window's records once.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import heapq
import struct
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from client.aio import (
    EARLIEST,
    LATEST,
    Client,
    Record,
    TimeWindowPlan,
    TopicPartition,
    decode_records,
)
from protocol.errors import ErrorCode, KafkaError

__all__ = ["Page", "SearchPage", "ShownRecord", "format_cursor", "parse_cursor", "read_partition",
           "page_forward", "page_back", "resolve_time", "search_forward", "text_matcher", "window_forward"]

_FETCH_BYTES = 256 * 1024
_MAX_FETCH_BYTES = 64 * 1024 * 1024
MAX_LIMIT = 500
#: Records a filtered page examines by default, and at most.
DEFAULT_BUDGET = 5000
MAX_BUDGET = 100_000


@dataclass
class ShownRecord:
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str  # "CreateTime" or "LogAppendTime"
    record: Record


@dataclass
class PartitionRead:
    records: list[ShownRecord]
    next_offset: int
    high_watermark: int
    log_start: int


@dataclass
class Page:
    records: list[ShownRecord]
    start: dict[int, int]  # the cursor this page starts at
    next: dict[int, int]  # the cursor of the following page
    high_watermarks: dict[int, int]
    log_starts: dict[int, int]

    @property
    def at_end(self) -> bool:
        return all(self.next[p] >= self.high_watermarks[p] for p in self.next)

    @property
    def at_start(self) -> bool:
        return all(self.start[p] <= self.log_starts[p] for p in self.start)


def parse_cursor(text: str) -> dict[int, int]:
    """``"0:12,1:40"`` → ``{0: 12, 1: 40}``; raises ValueError on anything else."""
    out: dict[int, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        p, sep, o = part.partition(":")
        if not sep:
            raise ValueError(f"bad cursor part {part!r}; expected partition:offset")
        pi, oi = int(p), int(o)
        if pi < 0 or oi < 0:
            raise ValueError(f"bad cursor part {part!r}; partition and offset are >= 0")
        out[pi] = oi
    if not out:
        raise ValueError("empty cursor")
    return out


def format_cursor(cursor: Mapping[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(cursor.items()))


# Kafka's v2 record batch header: baseOffset int64 @0, batchLength int32 @8,
# attributes int16 @21 (bit 3 = LogAppendTime), lastOffsetDelta int32 @23.
_FRAME = struct.Struct(">qi")
_ATTRS = struct.Struct(">hi")
_HEADER_BYTES = 61
_LOG_APPEND_TIME = 0x08


def _timestamp_types(buf: bytes) -> tuple[list[int], list[str]]:
    """Per whole batch in ``buf``: its last offset (ascending) and its timestamp type.

    Only the fixed header fields are read, from batches ``decode_records`` has
    already CRC-checked; a torn last batch is left out, as it is there.
    """
    lasts: list[int] = []
    types: list[str] = []
    pos, n = 0, len(buf)
    while pos + _HEADER_BYTES <= n:
        base, length = _FRAME.unpack_from(buf, pos)
        end = pos + 12 + length
        if end > n:
            break
        attributes, last_delta = _ATTRS.unpack_from(buf, pos + 21)
        lasts.append(base + last_delta)
        types.append("LogAppendTime" if attributes & _LOG_APPEND_TIME else "CreateTime")
        pos = end
    return lasts, types


async def read_partition(
    client: Client, topic: str, partition: int, start: int, limit: int
) -> PartitionRead:
    """Up to ``limit`` records of offsets ``[start, start + limit)`` that exist.

    A ``start`` below the log start is moved up to it (retention deleted those)
    and the ``limit`` offsets counted from there; a ``start`` at or past the high
    watermark reads nothing.
    """
    out: list[ShownRecord] = []
    if limit <= 0:
        return PartitionRead(out, start, start, 0)
    offset, end, size = start, start + limit, _FETCH_BYTES
    hw = log_start = -1
    for _ in range(limit + 16):  # each round advances or grows the byte cap
        try:
            res = await client.fetch_raw(topic, partition, offset, size)
        except KafkaError as e:
            if e.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            tp = TopicPartition(topic, partition)
            lo, hi = await asyncio.gather(client.list_offsets({tp: EARLIEST}),
                                          client.list_offsets({tp: LATEST}))
            log_start, hw = lo[tp][0], hi[tp][0]
            if offset < log_start:
                offset, end = log_start, log_start + limit
                continue
            break
        hw, log_start = res.high_watermark, res.log_start_offset
        if offset >= hw:
            break
        buf = res.records_bytes
        records, nxt = decode_records(buf, topic, partition, offset, end)
        if records:
            lasts, types = _timestamp_types(buf)
            for r in records:
                i = bisect.bisect_left(lasts, r.offset)
                out.append(ShownRecord(partition, r.offset, r.timestamp,
                                       types[i] if i < len(types) else "CreateTime", r))
        if nxt >= end or nxt >= hw:
            offset = min(nxt, end)
            break
        if nxt > offset:
            offset = nxt
            size = _FETCH_BYTES
            continue
        if buf and size < _MAX_FETCH_BYTES:
            size *= 2  # a batch larger than the cap came back torn
            continue
        break
    return PartitionRead(out, max(offset, start), hw, max(log_start, 0))


async def resolve_time(
    client: Client, topic: str, partitions: list[int], ts_ms: int
) -> dict[int, int]:
    """Per partition, the first offset with timestamp >= ``ts_ms`` (the high watermark if none).

    The same rule as the timeline's boundaries and ``Client.time_range_offsets``.
    """
    tps = [TopicPartition(topic, p) for p in partitions]
    at, latest = await asyncio.gather(
        client.list_offsets({tp: ts_ms for tp in tps}),
        client.list_offsets({tp: LATEST for tp in tps}),
    )
    return {tp.partition: latest[tp][0] if at[tp][0] < 0 else at[tp][0] for tp in tps}


def _merge(reads: Mapping[int, PartitionRead]) -> list[ShownRecord]:
    """Merge partitions (each in offset order) by timestamp, ties by partition."""
    return list(heapq.merge(*(r.records for r in reads.values()),
                            key=lambda s: (s.timestamp, s.partition)))


async def page_forward(client: Client, topic: str, cursor: Mapping[int, int], limit: int) -> Page:
    """The ``limit`` records from ``cursor`` on (merged by timestamp if several partitions)."""
    limit = max(1, min(limit, MAX_LIMIT))
    parts = sorted(cursor)
    reads = dict(zip(parts, await asyncio.gather(
        *(read_partition(client, topic, p, cursor[p], limit) for p in parts)
    ), strict=True))
    taken = _merge(reads)[:limit]
    start = {p: max(cursor[p], reads[p].log_start) for p in parts}
    nxt = dict(start)
    counts = dict.fromkeys(parts, 0)
    for s in taken:
        nxt[s.partition] = s.offset + 1
        counts[s.partition] += 1
    for p in parts:
        if counts[p] == len(reads[p].records):
            # Everything read from p is on the page: skip past the offsets read
            # (compaction gaps, transaction markers) too.
            nxt[p] = max(nxt[p], reads[p].next_offset)
    return Page(taken, start, nxt,
                {p: reads[p].high_watermark for p in parts},
                {p: reads[p].log_start for p in parts})


async def page_back(client: Client, topic: str, cursor: Mapping[int, int], limit: int) -> Page:
    """The ``limit`` records just before ``cursor`` in the same order as :func:`page_forward`."""
    limit = max(1, min(limit, MAX_LIMIT))
    parts = sorted(cursor)
    tps = {p: TopicPartition(topic, p) for p in parts}
    earliest = await client.list_offsets({tp: EARLIEST for tp in tps.values()})
    lows = {p: max(earliest[tps[p]][0], cursor[p] - limit) for p in parts}
    if len(parts) == 1:
        return await page_forward(client, topic, lows, limit)
    reads = dict(zip(parts, await asyncio.gather(
        *(read_partition(client, topic, p, lows[p], cursor[p] - lows[p]) for p in parts)
    ), strict=True))
    start = dict(cursor)
    for s in _merge(reads)[-limit:]:
        start[s.partition] = min(start[s.partition], s.offset)
    return await page_forward(client, topic, start, limit)


@dataclass
class SearchPage(Page):
    """A filtered page: ``records`` are the matches among the ``examined`` records from
    ``start`` (inclusive) to ``next`` (exclusive) per partition."""

    examined: int = 0
    #: The smallest and largest timestamp among the examined records (None if none).
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    #: Why the search stopped: "matches" (``limit`` found), "budget" or "end".
    stopped: str = "end"


def text_matcher(needle: str, where: str = "both") -> Callable[[Record], bool]:
    """A case-insensitive substring test on the key and/or value read as UTF-8 text
    (bytes that are not UTF-8 read as U+FFFD); ``where`` is "key", "value" or "both"."""
    if where not in ("key", "value", "both"):
        raise ValueError(f"in must be key, value or both, got {where!r}")
    folded = needle.casefold()

    def text(b: bytes | None) -> str:
        return "" if b is None else b.decode("utf-8", errors="replace").casefold()

    def match(r: Record) -> bool:
        return ((where != "value" and folded in text(r.key))
                or (where != "key" and folded in text(r.value)))

    return match


async def search_forward(
    client: Client, topic: str, cursor: Mapping[int, int], limit: int, budget: int,
    match: Callable[[Record], bool],
) -> SearchPage:
    """The first ``limit`` records from ``cursor`` on that ``match``, among at most ``budget``
    examined in :func:`page_forward`'s order (see the module's invariants)."""
    limit = max(1, min(limit, MAX_LIMIT))
    budget = max(1, min(budget, MAX_BUDGET))
    parts = sorted(cursor)
    read_at = dict(cursor)  # where each partition's next read starts
    bufs: dict[int, deque[ShownRecord]] = {p: deque() for p in parts}
    done: set[int] = set()
    hw: dict[int, int] = {}
    low: dict[int, int] = {}

    async def refill(p: int) -> None:
        r = await read_partition(client, topic, p, read_at[p], MAX_LIMIT)
        hw[p], low[p] = r.high_watermark, r.log_start
        bufs[p].extend(r.records)
        if not r.records and (r.next_offset >= r.high_watermark or r.next_offset <= read_at[p]):
            done.add(p)  # at the end (or no progress: nothing more to read)
        read_at[p] = max(read_at[p], r.next_offset)

    await asyncio.gather(*(refill(p) for p in parts))
    start = {p: max(cursor[p], low[p]) for p in parts}
    nxt = dict(start)
    found: list[ShownRecord] = []
    examined = 0
    first_ts: int | None = None
    last_ts: int | None = None
    stopped = "end"
    while True:
        if len(found) >= limit:
            stopped = "matches"
            break
        if examined >= budget:
            stopped = "budget"
            break
        empty = [p for p in parts if not bufs[p] and p not in done]
        if empty:
            await asyncio.gather(*(refill(p) for p in empty))
            continue
        live = [p for p in parts if bufs[p]]
        if not live:
            break
        p = min(live, key=lambda q: (bufs[q][0].timestamp, q))
        s = bufs[p].popleft()
        examined += 1
        nxt[p] = s.offset + 1
        first_ts = s.timestamp if first_ts is None else min(first_ts, s.timestamp)
        last_ts = s.timestamp if last_ts is None else max(last_ts, s.timestamp)
        if match(s.record):
            found.append(s)
    for p in parts:
        if not bufs[p]:
            # Everything read from p was examined: skip the offsets read that held no
            # record (compaction gaps, transaction markers) too.
            nxt[p] = max(nxt[p], read_at[p])
    return SearchPage(found, start, nxt, hw, low, examined, first_ts, last_ts, stopped)


#: Records an event-time window page reads by default, and at most (timestamps are
#: compared column-wise; only the records in the window are decoded into rows).
WINDOW_BUDGET = 500_000
MAX_WINDOW_BUDGET = 5_000_000


async def _window_partition(
    client: Client, topic: str, plan: TimeWindowPlan, start: int, t1: int, t2: int,
    limit: int, budget: int, match: Callable[[Record], bool] | None, spent: list[int],
) -> tuple[list[ShownRecord], int, int]:
    """From offset ``start`` through ``plan``'s ranges: the records with t1 <= ts < t2
    (and ``match``) in offset order, until ``limit`` of them, or until the partitions
    read together (``spent[0]``) reach ``budget`` records; returns them, the offset
    everything below which was read, and the records this partition read."""
    import pyarrow.compute as pc

    p = plan.partition
    out: list[ShownRecord] = []
    read = 0
    for rng in plan.ranges:
        if rng.end_offset <= start:
            continue
        lo = max(start, rng.start_offset)
        # Closed when a page stops early, so the Fetch already sent ahead is cancelled.
        batches = cast(AsyncGenerator[Any, None], client.consume_arrow(topic, p, lo, rng.end_offset))
        async with contextlib.aclosing(batches) as it:
            async for batch in it:
                read += batch.num_rows
                spent[0] += batch.num_rows
                offs = batch.column("offset")
                start = int(offs[batch.num_rows - 1].as_py()) + 1
                ts = batch.column("timestamp")
                kept = batch.filter(pc.and_(pc.greater_equal(ts, t1), pc.less(ts, t2)))
                for row in kept.to_pylist():
                    r = Record(row["offset"], row["timestamp"], row["key"], row["value"],
                               [(h["key"], h["value"]) for h in row["headers"] or ()], topic, p)
                    if match is None or match(r):
                        out.append(ShownRecord(p, r.offset, r.timestamp, "LogAppendTime"
                                               if row["timestamp_type"] == 1 else "CreateTime", r))
                if len(out) >= limit or spent[0] >= budget:
                    return out, start, read
        start = max(start, rng.end_offset)
    return out, max(start, plan.high_watermark), read


async def window_forward(
    client: Client, topic: str, plans: Mapping[int, TimeWindowPlan], cursor: Mapping[int, int],
    t1: int, t2: int, limit: int, budget: int, match: Callable[[Record], bool] | None = None,
) -> SearchPage:
    """The next ``limit`` records from ``cursor`` with ``t1 <= timestamp < t2`` (an
    event-time window; ``plans`` is its ``Client.plan_time_window``), each partition in
    offset order, partitions merged by timestamp; the partitions stop reading once they
    have read ``budget`` records together (checked after each Fetch). Only the planned ranges are read (no record outside
    them can be in the window), so successive pages from ``next`` give every record of
    the window once: the result is exact for the offsets below ``next``."""
    limit = max(1, min(limit, MAX_LIMIT))
    budget = max(1, min(budget, MAX_WINDOW_BUDGET))
    parts = sorted(cursor)
    spent = [0]
    reads = await asyncio.gather(*(
        _window_partition(client, topic, plans[p], max(cursor[p], plans[p].log_start_offset),
                          t1, t2, limit, budget, match, spent) for p in parts))
    got = {p: r[0] for p, r in zip(parts, reads, strict=True)}
    read_to = {p: r[1] for p, r in zip(parts, reads, strict=True)}
    examined = sum(r[2] for r in reads)
    start = {p: max(cursor[p], plans[p].log_start_offset) for p in parts}
    taken = list(heapq.merge(*got.values(), key=lambda s: (s.timestamp, s.partition)))[:limit]
    shown = dict.fromkeys(parts, 0)
    for s in taken:
        shown[s.partition] += 1
    nxt = {p: got[p][shown[p]].offset if shown[p] < len(got[p]) else read_to[p] for p in parts}
    hw = {p: plans[p].high_watermark for p in parts}
    stopped = ("end" if all(nxt[p] >= hw[p] for p in parts) else
               "matches" if len(taken) >= limit else "budget")
    return SearchPage(taken, start, nxt, hw, {p: plans[p].log_start_offset for p in parts},
                      examined, min((s.timestamp for s in taken), default=None),
                      max((s.timestamp for s in taken), default=None), stopped)
