"""Kafka's variable-length primitives on a buffer and a position: the one definition.

Unsigned varints (KIP-482 compact lengths, tag numbers and sizes) as the
generated codecs (``protocol.codegen``) read and write them.

Invariants:
- A uvarint is at most 5 bytes (Kafka's int32 uvarint); a longer one raises
  ``KafkaDecodeError``; a buffer that ends inside one raises ``IndexError``.
- ``uvarint_bytes`` refuses negative numbers (``KafkaEncodeError``).
"""

from __future__ import annotations

from typing import Any

from protocol.wire import KafkaDecodeError, KafkaEncodeError


def read_uvarint_at(buf: Any, pos: int) -> tuple[int, int]:
    """The uvarint at ``pos`` and the position after it."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    for i in range(1, 5):
        b = buf[pos + i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + i + 1
        shift += 7
    raise KafkaDecodeError("uvarint longer than 5 bytes")


_SMALL = [bytes((n,)) for n in range(0x80)]


def uvarint_bytes(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _SMALL[n]
    if n < 0:
        raise KafkaEncodeError(f"uvarint cannot encode negative {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
