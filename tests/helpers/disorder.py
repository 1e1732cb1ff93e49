"""Record timestamps in the shapes out-of-order data takes, for event-time tests."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

#: in order; a run far behind everything else; all equal; scattered around the base.
SHAPES = ["in_order", "late", "ties", "shuffled"]


def disordered(shape: str, n: int, base: int, late_base: int, rng: random.Random) -> list[int]:
    """``n`` timestamps near ``base`` in ``shape`` (a "late" run sits at ``late_base``)."""
    if shape == "in_order":
        return sorted(base + rng.randint(0, 3000) for _ in range(n))
    if shape == "late":
        return [late_base + rng.randint(0, 10_000) for _ in range(n)]
    if shape == "ties":
        return [base] * n
    return [base + rng.randint(-500_000, 500_000) for _ in range(n)]


def shaped_batches(last_partition: int, last_position: int) -> st.SearchStrategy[Any]:
    """1..25 batches to produce, each (partition 0..last_partition, shape, 1..30 records,
    position 0..last_position) for :func:`batch_timestamps`."""
    return st.lists(st.tuples(st.integers(0, last_partition), st.sampled_from(SHAPES),
                              st.integers(1, 30), st.integers(0, last_position)),
                    min_size=1, max_size=25)


def batch_timestamps(batches: list[tuple[int, str, int, int]], t0: int,
                     rng: random.Random) -> list[tuple[int, list[int]]]:
    """(partition, timestamps) of each batch: its shape around t0 + 5 ms x its position,
    a "late" run at t0."""
    return [(p, disordered(shape, n, t0 + at * 5, t0, rng)) for p, shape, n, at in batches]
