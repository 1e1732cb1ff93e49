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
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from client.aio import EARLIEST, LATEST, Client, Record, TopicPartition, decode_records
from protocol.errors import ErrorCode, KafkaError

__all__ = ["Page", "ShownRecord", "format_cursor", "parse_cursor", "read_partition",
           "page_forward", "page_back", "resolve_time"]

_FETCH_BYTES = 256 * 1024
_MAX_FETCH_BYTES = 64 * 1024 * 1024
MAX_LIMIT = 500


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
