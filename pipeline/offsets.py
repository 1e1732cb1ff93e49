"""Turn read options into per-partition offset ranges, and split ranges into tasks.

Runs where Spark plans (the driver's planner process); only plain data leaves
it, so the ranges pickle to executors on any cluster.

Invariants:
- Each bound is resolved with ONE ListOffsets round covering every partition
  (``startingTimestamp`` T → per partition the first offset whose timestamp is
  >= T, exactly as Kafka's ``offsetsForTimes``). A partition with no record at or
  after T resolves to the latest offset (the high watermark), which may need one
  extra round for the latest offsets when no earlier round produced them.
- Every round is asked at the read's isolation level: under read_committed the
  latest offset is the last stable offset (LSO) and a time whose first match is
  at or past the LSO has no match (Kafka's ListOffsets), so no range reaches
  into a transaction that is still open.
- The result per partition is the half-open range ``[start, end)``; Spark's
  Kafka semantics: the records read are those with offsets in the range, which
  for timestamp bounds are exactly the records from the first at-or-after the
  start time up to (excluding) the first at-or-after the end time.
- ``split_ranges`` partitions every range into contiguous, non-overlapping
  pieces whose union is the range: each record is read once.
- An event-time read (``eventTime``) is planned by the broker instead
  (``plan_event_time``: PlanTimeWindow, one round per topic): per partition the
  offset ranges whose blocks may hold a timestamp in the window, with their bytes.
  ``event_time_tasks`` cuts a partition's ranges into tasks by the same split rules,
  counting only planned offsets, so every task reads only planned ranges and every
  planned offset is in exactly one task.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from client import ErrorCode, KafkaError, SyncClient, TopicPartition
from pipeline.options import EARLIEST, LATEST, Bound, OptionError, ReadOptions

__all__ = [
    "OffsetRange",
    "resolve_bound",
    "resolve_ranges",
    "split_ranges",
    "latest_offsets",
    "plan_event_time",
    "event_time_tasks",
]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition; ``bytes`` is what fetching it reads
    when the broker planned it (an event-time plan), -1 when unknown."""

    topic: str
    partition: int
    start: int
    end: int
    bytes: int = -1

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def _query(
    bound: Bound, parts: Mapping[str, list[int]], side: str
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(ListOffsets query, offsets known without asking) for one bound."""
    query: dict[TopicPartition, int] = {}
    known: dict[TopicPartition, int] = {}
    for topic, ps in parts.items():
        for p in ps:
            tp = TopicPartition(topic, p)
            if bound.kind == "earliest":
                query[tp] = EARLIEST
            elif bound.kind == "latest":
                query[tp] = LATEST
            elif bound.kind == "timestamp":
                query[tp] = bound.timestamp
            else:
                per = bound.per_partition.get(topic)
                if per is None or p not in per:
                    raise OptionError(
                        f"{side} {bound.kind} names no value for {topic}-{p}; Spark's Kafka "
                        "source requires every subscribed partition to be listed"
                    )
                v = per[p]
                if bound.kind == "timestamps" or v < 0:
                    query[tp] = v
                else:
                    known[tp] = v
    extra = [
        f"{t}-{p}"
        for t, per in bound.per_partition.items()
        for p in per
        if t not in parts or p not in parts[t]
    ]
    if extra:
        raise OptionError(f"{side} {bound.kind} names partitions that are not read: {extra}")
    return query, known


def resolve_bound(
    client: SyncClient,
    bound: Bound,
    parts: Mapping[str, list[int]],
    side: str,
    latest: dict[TopicPartition, int],
    *,
    strategy: str = "latest",
    isolation_level: int = 0,
) -> dict[TopicPartition, int]:
    """Offsets of ``bound`` for every partition, in one ListOffsets round.

    ``latest`` caches high watermarks already known (filled in when this round
    asked for LATEST) so a no-match timestamp can fall back to them.
    """
    query, known = _query(bound, parts, side)
    out = dict(known)
    answers = client.list_offsets(query, isolation_level) if query else {}
    unmatched: list[TopicPartition] = []
    for tp, ts in query.items():
        offset, _ = answers[tp]
        if ts == LATEST:
            latest[tp] = offset
        if offset < 0:
            unmatched.append(tp)
        else:
            out[tp] = offset
    if unmatched:
        if side == "starting" and strategy == "error":
            raise OptionError(
                "no record at or after the starting time in "
                + ", ".join(f"{tp.topic}-{tp.partition}" for tp in unmatched)
                + " (startingOffsetsByTimestampStrategy=error)"
            )
        missing = [tp for tp in unmatched if tp not in latest]
        if missing:
            latest.update(latest_offsets(client, missing, isolation_level))
        for tp in unmatched:
            out[tp] = latest[tp]
    return out


def latest_offsets(
    client: SyncClient, tps: Iterable[TopicPartition], isolation_level: int = 0
) -> dict[TopicPartition, int]:
    """High watermark (read_committed: last stable offset) of every partition, in one round."""
    answers = client.list_offsets({tp: LATEST for tp in tps}, isolation_level)
    return {tp: off for tp, (off, _ts) in answers.items()}


def resolve_ranges(client: SyncClient, opts: ReadOptions) -> list[OffsetRange]:
    """The offset range of every selected partition for a batch read."""
    parts = opts.subscription.select(client.list_topics())
    latest: dict[TopicPartition, int] = {}
    end = resolve_bound(client, opts.ending, parts, "ending", latest,
                        isolation_level=opts.isolation_level)
    start = resolve_bound(
        client, opts.starting, parts, "starting", latest, strategy=opts.starting_strategy,
        isolation_level=opts.isolation_level,
    )
    ranges = []
    for tp in sorted(start):
        s, e = start[tp], end[tp]
        if s > e:
            raise OptionError(
                f"{tp.topic}-{tp.partition}: starting offset {s} ({opts.starting.describe()}) is "
                f"after ending offset {e} ({opts.ending.describe()})"
            )
        ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
    return ranges


def split_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: cap records per task, then reach minPartitions.

    Empty ranges are dropped (they would be empty Spark tasks). Pieces of one
    range are contiguous and cover it exactly.
    """
    pieces = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        capped: list[OffsetRange] = []
        for r in pieces:
            capped.extend(_divide(r, math.ceil(r.size / max_records_per_partition)))
        pieces = capped
    if min_partitions and min_partitions > len(pieces):
        total = sum(r.size for r in pieces)
        spread: list[OffsetRange] = []
        for r in pieces:
            parts = max(1, round(r.size / total * min_partitions))
            spread.extend(_divide(r, parts))
        pieces = spread
    return pieces


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    out = []
    start = r.start
    remaining = r.size
    for i in range(parts):
        n = remaining // (parts - i)
        out.append(OffsetRange(r.topic, r.partition, start, start + n))
        start += n
        remaining -= n
    return out


def plan_event_time(client: SyncClient, opts: ReadOptions) -> list[OffsetRange]:
    """The broker's event-time plan of every selected partition: the offset ranges (with
    bytes) that may hold a record with start <= timestamp < end, sorted by partition and
    offset. One PlanTimeWindow round per topic, at the read's isolation level (under
    read_committed no range reaches past the last stable offset)."""
    t1, t2 = opts.event_window()
    parts = opts.subscription.select(client.list_topics())
    out: list[OffsetRange] = []
    for topic, ps in sorted(parts.items()):
        if not ps:
            continue
        try:
            plans = client.plan_time_window(topic, t1, t2, ps,
                                            isolation_level=opts.isolation_level)
        except KafkaError as e:
            if e.code != ErrorCode.UNSUPPORTED_VERSION:
                raise
            raise OptionError(
                f'option "eventTime" needs a Chronolog broker (its PlanTimeWindow API); '
                f"{opts.bootstrap} does not offer it ({e}). Without eventTime the time bounds "
                "are positional (Kafka's offsetsForTimes)") from None
        for p in sorted(plans):
            out.extend(OffsetRange(topic, p, r.start_offset, r.end_offset, r.bytes)
                       for r in plans[p].ranges if r.end_offset > r.start_offset)
    return out


def event_time_tasks(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[tuple[OffsetRange, ...]]:
    """Group a plan's ranges into tasks: by default one per topic partition; with
    ``maxRecordsPerPartition`` / ``minPartitions`` a partition's planned offsets are cut
    exactly as :func:`split_ranges` cuts an offset range, counting planned offsets only.

    Each task is the pieces of one partition's ranges, in offset order; together the
    tasks cover every planned offset once. A range cut in pieces gives each a share of its
    bytes in proportion to its offsets, the shares adding up to the range's bytes (a
    fetch-size hint for the piece, not a promise).
    """
    by_tp: dict[tuple[str, int], list[OffsetRange]] = {}
    for r in ranges:
        if r.size > 0:
            by_tp.setdefault((r.topic, r.partition), []).append(r)
    # One virtual range per partition: its planned offsets laid end to end from 0.
    virtual = [OffsetRange(t, p, 0, sum(r.size for r in rs)) for (t, p), rs in sorted(by_tp.items())]
    tasks: list[tuple[OffsetRange, ...]] = []
    for piece in split_ranges(virtual, min_partitions, max_records_per_partition):
        tasks.append(_real(by_tp[(piece.topic, piece.partition)], piece.start, piece.end))
    return tasks


def _real(ranges: list[OffsetRange], vstart: int, vend: int) -> tuple[OffsetRange, ...]:
    """The real sub-ranges of planned offsets ``[vstart, vend)`` (positions among the
    concatenated ``ranges``)."""
    out: list[OffsetRange] = []
    at = 0
    for r in ranges:
        lo, hi = max(vstart, at), min(vend, at + r.size)
        if lo < hi:
            s, e = r.start + lo - at, r.start + hi - at
            # Cumulative shares, so the pieces of a range add up to exactly its bytes.
            nbytes = r.bytes if r.bytes < 0 else \
                r.bytes * (e - r.start) // r.size - r.bytes * (s - r.start) // r.size
            out.append(OffsetRange(r.topic, r.partition, s, e, nbytes))
        at += r.size
        if at >= vend:
            break
    return tuple(out)
