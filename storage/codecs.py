"""Compression codecs of Kafka record batches (attribute bits 0-2).

A compressed batch carries its records as one blob after the 61-byte header.
The codec ids and wire framings are Kafka's:

- 1 gzip: an RFC 1952 gzip stream (Java's ``GZIPOutputStream``). Reading also
  accepts concatenated gzip members and a bare zlib stream.
- 2 snappy: Kafka writes snappy with *xerial framing* (``SnappyOutputStream``):
  the 16-byte header ``b"\\x82SNAPPY\\x00"`` + int32 version 1 + int32
  compatible-version 1, then blocks of int32 big-endian length + one raw snappy
  chunk of at most 32 KiB of input. Reading accepts that framing and also a single
  raw snappy block (what some non-Java clients send).
- 3 lz4: the LZ4 *frame* format with independent blocks and no content checksum
  (KIP-57; Kafka's reader rejects linked blocks).
- 4 zstd: one or more zstd frames.

Invariants: ``decompress(c, compress(c, d)) == d`` for every codec ``c``; every
failure to decompress raises :class:`CorruptRecordError` (never a codec library's
own exception); a codec id outside 0..4 raises :class:`UnsupportedCompressionError`.
The default levels are Kafka's (KIP-390): gzip 6, lz4 9, zstd 3.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from storage.errors import CorruptRecordError, UnsupportedCompressionError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
"""Kafka's ``compression.type`` names by codec id."""

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024
"""Uncompressed bytes per xerial block, as xerial's ``SnappyOutputStream`` writes."""

_INT32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


def codec_id(name: str) -> int:
    """Map a Kafka ``compression.type`` name (``"gzip"``, ``"none"``, ...) to its id."""
    for cid, cname in CODEC_NAMES.items():
        if cname == name.lower():
            return cid
    raise UnsupportedCompressionError(f"unknown compression type {name!r}")


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` as Kafka's producer would for ``codec`` (0 returns a copy)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_encode(data)
    if codec == LZ4:
        comp = cramjam.lz4.Compressor(
            level=9 if level is None else level, content_checksum=False, block_linked=False
        )
        comp.compress(bytes(data))
        return bytes(comp.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise UnsupportedCompressionError(f"compression codec {codec} is not one of 0..4")


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a batch's records blob; any malformed input is CorruptRecordError."""
    if codec == NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise UnsupportedCompressionError(f"compression codec {codec} is not one of 0..4")
    try:
        if codec == GZIP:
            return _gzip_decode(data)
        if codec == SNAPPY:
            return _snappy_decode(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # each codec library has its own error types
        raise CorruptRecordError(
            f"cannot decompress {CODEC_NAMES[codec]} records: {exc}"
        ) from exc


def _gzip_decode(data: Buffer) -> bytes:
    """Decode gzip (possibly several members, as Java's GZIPInputStream reads) or zlib."""
    out: list[bytes] = []
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(47)  # 32 + 15: auto-detect gzip or zlib header
        out.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("gzip records end before the end of the stream")
        rest = d.unused_data
        if not rest:
            return b"".join(out)


def _xerial_encode(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    pack = _INT32.pack
    compress_raw = cramjam.snappy.compress_raw
    # Empty input still gets one (empty) block: readers such as aiokafka's only
    # recognise the framing when something follows the 16-byte header.
    for start in range(0, max(len(view), 1), XERIAL_BLOCK):
        chunk = bytes(compress_raw(view[start : start + XERIAL_BLOCK]))
        parts.append(pack(len(chunk)))
        parts.append(chunk)
    return b"".join(parts)


def _snappy_decode(data: Buffer) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC or len(view) < 16:
        return bytes(cramjam.snappy.decompress_raw(view))
    # Xerial framing; versions are not checked, as xerial's reader only checks the magic.
    pos = 16
    end = len(view)
    out: list[bytes] = []
    decompress_raw = cramjam.snappy.decompress_raw
    unpack_from = _INT32.unpack_from
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (n,) = unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the data")
        out.append(bytes(decompress_raw(view[pos : pos + n])))
        pos += n
    return b"".join(out)
