"""Brute-force answers over what a test produced: the reference every lookup is checked against."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

_names = itertools.count()


def unique_topic(prefix: str = "t") -> str:
    """A topic name no other example in this process has used (tests share one broker)."""
    return f"{prefix}-{next(_names)}"


@dataclass(frozen=True)
class Produced:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def by_partition(log: Sequence[Produced]) -> dict[int, list[Produced]]:
    out: dict[int, list[Produced]] = {}
    for r in sorted(log, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append(r)
    return out


def first_at_or_after(records: Sequence[Produced], ts: int) -> tuple[int, int] | None:
    """Kafka's ListOffsets answer by scanning: the smallest offset whose timestamp >= ts."""
    for r in sorted(records, key=lambda r: r.offset):
        if r.timestamp >= ts:
            return (r.offset, r.timestamp)
    return None


def end_offset(records: Sequence[Produced]) -> int:
    return max((r.offset for r in records), default=-1) + 1


def time_range(records: Sequence[Produced], start_ms: int, end_ms: int) -> list[Produced]:
    """Records of [first offset with ts >= start, first offset with ts >= end) by scanning."""
    hw = end_offset(records)
    s = first_at_or_after(records, start_ms)
    e = first_at_or_after(records, end_ms)
    lo = hw if s is None else s[0]
    hi = hw if e is None else e[0]
    return [r for r in sorted(records, key=lambda r: r.offset) if lo <= r.offset < max(lo, hi)]


def query_times(timestamps: Sequence[int]) -> list[int]:
    """Every interesting lookup time: each timestamp, its neighbours, and both ends."""
    ts: set[int] = set()
    for t in timestamps:
        ts.update((t - 1, t, t + 1))
    if timestamps:
        ts.update((min(timestamps) - 100, max(timestamps) + 100))
    return sorted(t for t in ts if t >= 0)
