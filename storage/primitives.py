"""Kafka's variable-length integers, defined once: unsigned varints and zig-zag.

Kafka writes an unsigned varint as little-endian base-128 groups, the high bit of
each byte set on every byte but the last (``ByteUtils.writeUnsignedVarint``), and a
signed one as the unsigned varint of its zig-zag code (``(v << 1) ^ (v >> 63)``),
so small magnitudes of either sign take one byte. Record batches (storage) and
flexible protocol messages (protocol) both use them; this module sits in
``storage/`` because storage may import nothing outside itself, and
``protocol/primitives.py`` re-exports it for the protocol side.

Invariants:
- writers emit the shortest encoding; readers accept padded (non-canonical)
  encodings up to the width Kafka allows (5 bytes for int32, 10 for int64);
- a bounded reader never reads at or past ``end`` and raises ``VarintError``
  (a ``CorruptRecordError``) for a truncated or over-long varint;
- ``read_uvarint_trusted`` has no bounds check: only for bytes already validated
  (segment bytes checked on append or in recovery).

Hot loops in ``storage/records.py`` and ``storage/batch_search.py`` decode one- and
two-byte varints inline and call these readers only for longer ones; each such
place says so and why (bench/bench_records.py, bench/bench_storage.py).
"""

from __future__ import annotations

from storage.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview

__all__ = [
    "VarintError",
    "read_uvarint",
    "read_uvarint_trusted",
    "read_varint",
    "read_varlong",
    "unzigzag",
    "uvarint_bytes",
    "varint_bytes",
    "write_uvarint",
    "write_varint",
    "zigzag",
]


class VarintError(CorruptRecordError):
    """A varint that is truncated or longer than its type allows."""


def zigzag(v: int) -> int:
    """The zig-zag code of a signed 64-bit ``v`` (0, -1, 1, -2 … -> 0, 1, 2, 3 …)."""
    return (v << 1) ^ (v >> 63)


def unzigzag(u: int) -> int:
    """The signed value of zig-zag code ``u``."""
    return (u >> 1) ^ -(u & 1)


def write_uvarint(v: int, out: bytearray) -> None:
    """Append the unsigned varint of ``v`` >= 0 to ``out``."""
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def write_varint(v: int, out: bytearray) -> None:
    """Append the zig-zag varint of a signed 64-bit ``v`` to ``out``."""
    write_uvarint((v << 1) ^ (v >> 63), out)


_ONE_BYTE = [bytes((v,)) for v in range(0x80)]  # every protocol length and tag count


def uvarint_bytes(v: int) -> bytes:
    """The unsigned varint of ``v``; ValueError for a negative ``v``."""
    if 0 <= v < 0x80:
        return _ONE_BYTE[v]
    if v < 0:
        raise ValueError(f"an unsigned varint cannot encode negative {v}")
    out = bytearray()
    write_uvarint(v, out)
    return bytes(out)


def varint_bytes(v: int) -> bytes:
    """The zig-zag varint of a signed 64-bit ``v``."""
    out = bytearray()
    write_uvarint((v << 1) ^ (v >> 63), out)
    return bytes(out)


def read_uvarint(data: Buffer, p: int, end: int, max_bytes: int = 10) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at ``p``, reading at most
    ``max_bytes`` bytes and nothing at or past ``end``."""
    result = 0
    shift = 0
    limit = min(end, p + max_bytes)
    while p < limit:
        b = data[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, p
        shift += 7
    if p >= end:
        raise VarintError("varint runs past the end of the records")
    raise VarintError(f"varint longer than {max_bytes} bytes")


def read_varint(data: Buffer, p: int, end: int) -> tuple[int, int]:
    """Zig-zag int32 at ``p`` (Kafka's ``ByteUtils.readVarint``: at most 5 bytes)."""
    if p < end:
        b = data[p]
        if b < 0x80:  # the common one-byte case, without the general loop
            return (b >> 1) ^ -(b & 1), p + 1
    u, p = read_uvarint(data, p, end, 5)
    u &= 0xFFFFFFFF
    return (u >> 1) ^ -(u & 1), p


def read_varlong(data: Buffer, p: int, end: int) -> tuple[int, int]:
    """Zig-zag int64 at ``p`` (``ByteUtils.readVarlong``: at most 10 bytes)."""
    u, p = read_uvarint(data, p, end, 10)
    u &= 0xFFFFFFFFFFFFFFFF
    return (u >> 1) ^ -(u & 1), p


def read_uvarint_trusted(data: Buffer, p: int) -> tuple[int, int]:
    """Unsigned varint at ``p`` without bounds or width checks: only for bytes that
    were validated before (segment bytes, checked on append or in recovery); it runs
    per record on the lookup path."""
    b = data[p]
    if b < 0x80:
        return b, p + 1
    u = b & 0x7F
    shift = 7
    while True:
        p += 1
        b = data[p]
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u, p + 1
        shift += 7
