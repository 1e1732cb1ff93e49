"""Kafka's default partitioner (murmur2 of the key) for a whole Arrow column at once.

The writer places keyed rows exactly as ``client.partitioner.partition_for_key``
does (Java's ``Utils.toPositive(Utils.murmur2(key)) % n``), but hashing a key
at a time in Python costs ~7 µs. Here keys of equal length are hashed together
with numpy ``uint32`` arithmetic (which wraps mod 2**32, as Java's int does).

Invariant: ``partitions_for_keys(col, n)[i] == partition_for_key(col[i], n)``
for every non-null key, and -1 for null keys (tests check this with hypothesis).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["partitions_for_keys"]

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)


def _finish(h: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    h ^= h >> np.uint32(13)
    h *= _M
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
        else np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    )
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    with np.errstate(over="ignore"):
        for length in np.unique(lengths[valid]).tolist():
            idx = np.flatnonzero(valid & (lengths == length))
            h = np.full(len(idx), _SEED ^ np.uint32(length & 0xFFFFFFFF), dtype=np.uint32)
            if length:
                mat = data[starts[idx][:, None] + np.arange(length, dtype=np.int64)]
                whole = length - (length & 3)
                if whole:
                    words = np.ascontiguousarray(mat[:, :whole]).view("<u4")
                    for j in range(whole // 4):
                        k = words[:, j].astype(np.uint32)
                        k *= _M
                        k ^= k >> np.uint32(24)
                        k *= _M
                        h *= _M
                        h ^= k
                tail = length & 3
                if tail == 3:
                    h ^= mat[:, whole + 2].astype(np.uint32) << np.uint32(16)
                if tail >= 2:
                    h ^= mat[:, whole + 1].astype(np.uint32) << np.uint32(8)
                if tail >= 1:
                    h ^= mat[:, whole].astype(np.uint32)
                    h *= _M
            h = _finish(h)
            out[idx] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_partitions
    return out
