"""Record timestamps in the shapes out-of-order data takes, for event-time tests."""

from __future__ import annotations

import random

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
