"""Kafka's ListOffsets answer for one partition, computed from the timestamps produced:
the oracle the raw-wire and ordering tests compare the broker with.
"""

from __future__ import annotations


def expected(version: int, timestamps: list[int], target: int) -> tuple[int, int, int, int]:
    """Kafka's answer (error, timestamp, offset, leader epoch) for one partition, v1+."""
    n = len(timestamps)
    gate = {-3: 7, -4: 8, -5: 9}
    if target in gate and version < gate[target]:
        return 35, -1, -1, -1
    if target == -1:
        return 0, -1, n, 0
    if target in (-2, -4):
        return 0, -1, 0, 0
    if target == -5:
        return 0, -1, -1, -1
    if target == -3:
        if n == 0:
            return 0, -1, -1, -1
        top = max(timestamps)
        return 0, top, timestamps.index(top), 0
    hit = next((o for o, t in enumerate(timestamps) if t >= target), None)
    if hit is None:
        return 0, -1, -1, -1
    return 0, timestamps[hit], hit, 0
