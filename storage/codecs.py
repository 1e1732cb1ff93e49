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
The default levels are Kafka's (KIP-390): gzip 6, lz4 9, zstd 3. With
``max_size``, ``decompress`` refuses output beyond it before producing it
(gzip inflates with a cap, snappy blocks declare their length, lz4/zstd frames
are walked block by block for an upper bound), so a small batch cannot inflate
into gigabytes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

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


def decompress(codec: int, data: Buffer, max_size: int | None = None) -> bytes:
    """Decompress a batch's records blob; any malformed input is CorruptRecordError.

    With ``max_size``, output larger than that is refused *before* it is produced
    (CorruptRecordError), so a small "decompression bomb" cannot exhaust memory:
    gzip is inflated with a length cap, snappy declares each block's length, and
    lz4/zstd frames are walked block by block to bound their output first.
    """
    if codec == NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise UnsupportedCompressionError(f"compression codec {codec} is not one of 0..4")
    try:
        if codec == GZIP:
            return _gzip_decode(data, max_size)
        if codec == SNAPPY:
            return _snappy_decode(data, max_size)
        if codec == LZ4:
            if max_size is not None:
                _check_bound(lz4_output_bound(data), max_size, codec)
            return bytes(cramjam.lz4.decompress(data))
        if max_size is not None:
            _check_bound(zstd_output_bound(data), max_size, codec)
        return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # each codec library has its own error types
        raise CorruptRecordError(
            f"cannot decompress {CODEC_NAMES[codec]} records: {exc}"
        ) from exc


def _check_bound(bound: int, max_size: int, codec: int) -> None:
    if bound > max_size:
        raise CorruptRecordError(
            f"{CODEC_NAMES[codec]} records would decompress to up to {bound} bytes, "
            f"more than the {max_size} allowed"
        )


def _too_large(max_size: int, codec: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{CODEC_NAMES[codec]} records decompress to more than the {max_size} bytes allowed"
    )


def _gzip_decode(data: Buffer, max_size: int | None = None) -> bytes:
    """Decode gzip (possibly several members, as Java's GZIPInputStream reads) or zlib."""
    out: list[bytes] = []
    total = 0
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(47)  # 32 + 15: auto-detect gzip or zlib header
        if max_size is None:
            chunk = d.decompress(rest)
        else:
            chunk = d.decompress(rest, max_size - total + 1)
            if total + len(chunk) > max_size:
                raise _too_large(max_size, GZIP)
        total += len(chunk)
        out.append(chunk)
        if not d.eof:
            raise CorruptRecordError("gzip records end before the end of the stream")
        rest = d.unused_data
        if not rest:
            return b"".join(out)


_LE32 = struct.Struct("<I")
_ZSTD_MAGIC = 0xFD2FB528
_LZ4_MAGIC = 0x184D2204
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE = 0x184D2A50  # both formats: magic 0x184D2A5?, int32 LE size, data
_ZSTD_BLOCK_MAX = 128 * 1024
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


def _next_frame(view: memoryview, pos: int, end: int, name: str) -> tuple[int, int | None]:
    """Skip skippable frames from ``pos``: (position, magic) of the next frame.

    The magic is None when no frame is left; the position is then ``end`` or past
    it (a skippable frame that overruns), which the caller reports as truncated.
    Both zstd and LZ4 share the skippable-frame format.
    """
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError(f"{name} frame magic is truncated")
        (magic,) = _LE32.unpack_from(view, pos)
        if magic & _SKIPPABLE_MASK != _SKIPPABLE:
            return pos, magic
        if pos + 8 > end:
            raise CorruptRecordError(f"{name} skippable frame is truncated")
        pos += 8 + _LE32.unpack_from(view, pos + 4)[0]
    return pos, None


def zstd_output_bound(data: Buffer) -> int:
    """An upper bound of what the zstd frames in ``data`` decompress to (RFC 8878).

    Walks frame and block headers only: raw and RLE blocks regenerate exactly
    their Block_Size, a compressed block at most 128 KiB. Malformed framing is
    CorruptRecordError.
    """
    return _frames_bound(data, "zstd", _ZSTD_MAGIC, 5, _zstd_frame_bound)


def lz4_output_bound(data: Buffer) -> int:
    """An upper bound of what the LZ4 frames in ``data`` decompress to.

    Walks frame and block headers only: an uncompressed block regenerates its
    size, a compressed one at most the frame's block maximum size.
    """
    return _frames_bound(data, "lz4", _LZ4_MAGIC, 7, _lz4_frame_bound)


def _frames_bound(data: Buffer, name: str, want_magic: int, header_bytes: int,
                  frame_bound: Callable[[memoryview, int, int], tuple[int, int]]) -> int:
    """The sum of ``frame_bound`` over the frames of ``data`` (skippable frames passed
    over), each of which must start with ``want_magic`` and at least ``header_bytes``;
    ``frame_bound(view, pos, end)`` walks the frame at ``pos`` and returns (position
    after it, its bound). The frames must end exactly at the end of ``data``."""
    view = memoryview(data)
    end = len(view)
    pos = 0
    bound = 0
    while True:
        pos, magic = _next_frame(view, pos, end, name)
        if magic is None:
            break
        if magic != want_magic:
            raise CorruptRecordError(f"not {name} framing (magic {magic:#010x})")
        if pos + header_bytes > end:
            raise CorruptRecordError(f"{name} frame header is truncated")
        pos, frame = frame_bound(view, pos, end)
        bound += frame
    if pos != end:
        raise CorruptRecordError(f"{name} frame is truncated")
    return bound


def _zstd_frame_bound(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    fhd = view[pos + 4]
    single_segment = fhd & 0x20
    fcs_size = (0, 2, 4, 8)[fhd >> 6] or (1 if single_segment else 0)
    pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3] + fcs_size
    bound = 0
    while True:
        if pos + 3 > end:
            raise CorruptRecordError("zstd block header is truncated")
        bh = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
        pos += 3
        kind = (bh >> 1) & 3
        size = bh >> 3
        if kind == 0:
            bound += size
            pos += size
        elif kind == 1:
            bound += size
            pos += 1
        elif kind == 2:
            bound += _ZSTD_BLOCK_MAX
            pos += size
        else:
            raise CorruptRecordError("zstd block uses the reserved block type")
        if bh & 1:
            break
    if fhd & 0x04:
        pos += 4
    return pos, bound


def _lz4_frame_bound(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    flg = view[pos + 4]
    block_max = _LZ4_BLOCK_MAX.get((view[pos + 5] >> 4) & 7)
    if block_max is None:
        raise CorruptRecordError("lz4 frame declares an invalid block size")
    pos += 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1
    block_checksum = 4 if flg & 0x10 else 0
    bound = 0
    while True:
        if pos + 4 > end:
            raise CorruptRecordError("lz4 block header is truncated")
        (bh,) = _LE32.unpack_from(view, pos)
        pos += 4
        if bh == 0:
            break
        size = bh & 0x7FFFFFFF
        bound += size if bh & 0x80000000 else block_max
        pos += size + block_checksum
    if flg & 0x04:
        pos += 4
    return pos, bound


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


def _snappy_decode(data: Buffer, max_size: int | None = None) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC or len(view) < 16:
        if max_size is not None and cramjam.snappy.decompress_raw_len(view) > max_size:
            raise _too_large(max_size, SNAPPY)
        return bytes(cramjam.snappy.decompress_raw(view))
    # Xerial framing; versions are not checked, as xerial's reader only checks the magic.
    pos = 16
    end = len(view)
    blocks: list[memoryview] = []
    total = 0
    raw_len = cramjam.snappy.decompress_raw_len
    unpack_from = _INT32.unpack_from
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (n,) = unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the data")
        block = view[pos : pos + n]
        if max_size is not None:
            total += raw_len(block)  # each raw block starts with its uncompressed length
            if total > max_size:
                raise _too_large(max_size, SNAPPY)
        blocks.append(block)
        pos += n
    decompress_raw = cramjam.snappy.decompress_raw
    return b"".join([bytes(decompress_raw(b)) for b in blocks])
