"""Brute-force answers for the console tests, from the records a test produced."""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Mapping, Sequence

from tests.client.client_oracle import Produced

# Two days ago: in the past (the broker refuses > 1 h ahead), inside 7-day retention.
BASE = (time.time_ns() // 1_000_000 - 2 * 86_400_000) // 60_000 * 60_000

_names = itertools.count()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{time.time_ns() % 10**9}-{next(_names)}"


def first_offset(timestamps: Sequence[int], t: int) -> int:
    """The first offset whose timestamp >= t, or the end of the partition (a scan)."""
    for off, ts in enumerate(timestamps):
        if ts >= t:
            return off
    return len(timestamps)


def bucket_counts(parts: Mapping[int, Sequence[int]], bounds: Sequence[int]) -> list[int]:
    """Per bucket [b_i, b_i+1): the records a reader of that window gets, over all partitions."""
    return [
        sum(first_offset(ts, bounds[i + 1]) - first_offset(ts, bounds[i]) for ts in parts.values())
        for i in range(len(bounds) - 1)
    ]


def merged(parts: Mapping[int, Sequence[Produced]], cursor: Mapping[int, int]) -> list[Produced]:
    """Every record from ``cursor`` on, partitions merged by (timestamp, partition), each
    partition in offset order: the stream merge a reader sees (a brute-force k-way merge)."""
    heads = {p: cursor[p] for p in cursor}
    out: list[Produced] = []
    while True:
        live = [(parts[p][o].timestamp, p) for p, o in heads.items() if o < len(parts[p])]
        if not live:
            return out
        _, p = min(live)
        out.append(parts[p][heads[p]])
        heads[p] += 1


def bucket_of(bounds: Sequence[int], t: int) -> int:
    return bisect.bisect_right(bounds, t) - 1
