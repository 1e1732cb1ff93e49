"""Kafka's default partitioner, so keyed records land where every other client puts them.

Invariant: for a non-null key, ``partition_for_key(key, n)`` equals the Java
client's ``Utils.toPositive(Utils.murmur2(key)) % n`` and librdkafka's
``murmur2_random`` partitioner, so producers in different languages agree on the
partition of a key (the property ordering-by-key relies on). Null keys carry no
placement meaning; they are spread by a :class:`StickyPartitioner` (one partition
per batch, rotating), which is what Kafka's default does since KIP-480.
"""

from __future__ import annotations

import random

__all__ = ["murmur2", "partition_for_key", "StickyPartitioner"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit MurmurHash2 with Kafka's seed, as an unsigned int (Java's int reinterpreted)."""
    n = len(data)
    h = (_SEED ^ n) & _MASK
    whole = n - (n & 3)
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = n & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Null-key placement: stay on one partition until told a batch closed, then move on.

    Sticking keeps batches large (one partition fills up instead of n thin ones);
    rotating on each closed batch keeps partitions balanced over time.
    """

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            p = self._rng.randrange(num_partitions)
            self._current[topic] = p
        return p

    def batch_closed(self, topic: str, num_partitions: int) -> None:
        """Advance the topic's sticky partition (round robin) after a batch was sent."""
        p = self._current.get(topic)
        if p is not None and num_partitions > 0:
            self._current[topic] = (p + 1) % num_partitions


def choose_partition(
    key: bytes | None, topic: str, num_partitions: int, sticky: StickyPartitioner
) -> int:
    """Kafka's default: murmur2 of the key, sticky placement for null keys."""
    if key is not None:
        return partition_for_key(key, num_partitions)
    return sticky.partition(topic, num_partitions)
