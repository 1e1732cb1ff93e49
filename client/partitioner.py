"""Kafka's default partitioner, so keyed records land where every other client puts them.

Invariant: for a non-null key, ``partition_for_key(key, n)`` equals the Java
client's ``Utils.toPositive(Utils.murmur2(key)) % n`` and librdkafka's
``murmur2_random`` partitioner, so producers in different languages agree on the
partition of a key (the property ordering-by-key relies on). Null keys carry no
placement meaning; they are spread by a :class:`StickyPartitioner` (one partition
per batch, rotating), which is what Kafka's default does since KIP-480.


``partitions_for_keys`` is the same partitioner for a whole Arrow column at
once: keys of equal length are hashed together with NumPy ``uint32``
arithmetic (which wraps mod 2**32, as Java's int does), so a column costs tens
of nanoseconds per key instead of ~7 µs (~15 ns when every key has one length:
the data buffer is then reshaped into the key matrix instead of gathered). Its result equals
``partition_for_key`` for every non-null key and is -1 for null keys (property
tested).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from client._lazy import LazyModule

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

    from storage import columnar
else:  # NumPy and PyArrow only when a whole column is partitioned
    np = LazyModule("numpy")
    pa = LazyModule("pyarrow")
    columnar = LazyModule("storage.columnar")

__all__ = ["murmur2", "partition_for_key", "partitions_for_keys", "StickyPartitioner"]

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


def _finish32(h: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    h ^= h >> np.uint32(13)
    h *= np.uint32(_M)
    h ^= h >> np.uint32(15)
    return h


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> npt.NDArray[np.int64]:
    """Partition of every key of a binary/string column; -1 where the key is null."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    col = keys
    if not (pa.types.is_binary(col.type)):
        col = col.cast(pa.binary())
    n = len(col)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return out
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int32)[col.offset : col.offset + n + 1]
    data_buf = col.buffers()[2]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    valid = (
        np.ones(n, dtype=bool) if col.null_count == 0
        else columnar.validity(col)
    )
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    first = int(lengths[0])
    uniform = col.null_count == 0 and bool((lengths == first).all())
    with np.errstate(over="ignore"):
        for length in [first] if uniform else np.unique(lengths[valid]).tolist():
            # Keys of one length side by side (e.g. numbers as strings): the data
            # buffer is already the key matrix, no gather needed.
            idx = slice(None) if uniform else np.flatnonzero(valid & (lengths == length))
            count = n if uniform else len(idx)  # type: ignore[arg-type]
            h = np.full(count, np.uint32(_SEED) ^ np.uint32(length & 0xFFFFFFFF), dtype=np.uint32)
            if length:
                if uniform:
                    mat = data[int(starts[0]) : int(starts[0]) + n * length].reshape(n, length)
                else:
                    mat = data[starts[idx][:, None] + np.arange(length, dtype=np.int64)]
                whole = length - (length & 3)
                if whole:
                    words = np.ascontiguousarray(mat[:, :whole]).view("<u4")
                    for j in range(whole // 4):
                        k = words[:, j].astype(np.uint32)
                        k *= np.uint32(_M)
                        k ^= k >> np.uint32(24)
                        k *= np.uint32(_M)
                        h *= np.uint32(_M)
                        h ^= k
                tail = length & 3
                if tail == 3:
                    h ^= mat[:, whole + 2].astype(np.uint32) << np.uint32(16)
                if tail >= 2:
                    h ^= mat[:, whole + 1].astype(np.uint32) << np.uint32(8)
                if tail >= 1:
                    h ^= mat[:, whole].astype(np.uint32)
                    h *= np.uint32(_M)
            h = _finish32(h)
            out[idx] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_partitions
    return out
