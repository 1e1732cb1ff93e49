"""Batch compression codecs: round trips, Kafka framings, and what other clients write.

Oracles: aiokafka's codec module (xerial snappy framing, lz4 frame with the
flags Kafka accepts, zstd, gzip — all via cramjam/zlib but with their own
framing code) and kafka-python's gzip.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import pytest
from aiokafka import codec as aio
from hypothesis import given
from hypothesis import strategies as st
from kafka import codec as kp

from storage import codecs
from storage.errors import CorruptRecordError, UnsupportedCompressionError

CODECS = [0, 1, 2, 3, 4]
payloads = st.one_of(
    st.binary(max_size=3000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=50), st.integers(1, 3000)),
)


@pytest.mark.parametrize("codec", CODECS)
@given(data=payloads)
def test_decompress_inverts_compress(codec: int, data: bytes) -> None:
    assert codecs.decompress(codec, codecs.compress(codec, data)) == data


@given(data=payloads)
def test_aiokafka_decodes_what_we_encode(data: bytes) -> None:
    assert aio.gzip_decode(codecs.compress(1, data)) == data
    assert aio.snappy_decode(codecs.compress(2, data)) == data
    assert aio.lz4_decode(codecs.compress(3, data)) == data
    assert aio.zstd_decode(codecs.compress(4, data)) == data
    assert kp.gzip_decode(codecs.compress(1, data)) == data


@given(data=payloads)
def test_we_decode_what_aiokafka_encodes(data: bytes) -> None:
    assert codecs.decompress(1, aio.gzip_encode(data)) == data
    assert codecs.decompress(2, aio.snappy_encode(data)) == data
    assert codecs.decompress(2, aio.snappy_encode(data, xerial_compatible=False)) == data
    assert codecs.decompress(3, aio.lz4_encode(data)) == data
    assert codecs.decompress(4, aio.zstd_encode(data)) == data
    assert codecs.decompress(1, kp.gzip_encode(data)) == data


def test_snappy_is_written_with_kafkas_xerial_framing() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes: three 32 KiB blocks
    out = codecs.compress(2, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert pos == len(out)
    assert [len(b) for b in blocks] == [32768, 32768, 76800 - 65536]
    assert b"".join(blocks) == data


def test_lz4_is_a_frame_with_independent_blocks() -> None:
    out = codecs.compress(3, b"x" * 200_000)
    assert out[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = out[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence (KIP-57: Kafka rejects linked blocks)
    assert not flg & 0x04  # no content checksum


def test_gzip_reads_concatenated_members_and_zlib_streams() -> None:
    assert codecs.decompress(1, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"
    assert codecs.decompress(1, zlib.compress(b"hello")) == b"hello"


def test_zstd_reads_concatenated_frames_and_streamed_frames() -> None:
    two = bytes(cramjam.zstd.compress(b"a" * 1000)) + bytes(cramjam.zstd.compress(b"b" * 10))
    assert codecs.decompress(4, two) == b"a" * 1000 + b"b" * 10
    stream = cramjam.zstd.Compressor()
    stream.compress(b"streamed" * 1000)
    assert codecs.decompress(4, bytes(stream.finish())) == b"streamed" * 1000


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@given(data=st.binary(min_size=1, max_size=200), cut=st.integers(1, 50))
def test_garbage_or_truncated_input_is_corrupt_record(codec: int, data: bytes, cut: int) -> None:
    good = codecs.compress(codec, data * 10)
    for bad in (good[: max(0, len(good) - cut)], b"\x00garbage" + data, good[:2]):
        try:
            out = codecs.decompress(codec, bad)
        except CorruptRecordError:
            continue
        # A few truncations remain valid streams (e.g. whole snappy blocks); they
        # must then decode to a prefix of the original, never to invented bytes.
        assert (data * 10).startswith(out)


def test_xerial_block_overrunning_the_data_is_corrupt() -> None:
    bad = codecs.XERIAL_HEADER + struct.pack(">i", 1000) + b"\x00" * 10
    with pytest.raises(CorruptRecordError):
        codecs.decompress(2, bad)


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_codec_ids_outside_0_to_4_are_unsupported(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError):
        codecs.compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionError):
        codecs.decompress(codec, b"x")


def test_codec_names_are_kafkas() -> None:
    assert [codecs.codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "zstd", "ZSTD")] == [
        0, 1, 2, 3, 4, 4]
    with pytest.raises(UnsupportedCompressionError):
        codecs.codec_id("brotli")


# ---------------------------------------------------------------- bounded output


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@given(data=payloads)
def test_bounded_decompress_accepts_output_within_the_bound(codec: int, data: bytes) -> None:
    blob = codecs.compress(codec, data)
    if codec == 3:
        assert codecs.lz4_output_bound(blob) >= len(data)
    if codec == 4:
        assert codecs.zstd_output_bound(blob) >= len(data)
    generous = max(len(data), 4 * 1024 * 1024)
    assert codecs.decompress(codec, blob, max_size=generous) == data
    if codec in (1, 2):  # exact checks: the limit may equal the output
        assert codecs.decompress(codec, blob, max_size=len(data)) == data
        if data:
            with pytest.raises(CorruptRecordError):
                codecs.decompress(codec, blob, max_size=len(data) - 1)


@given(data=payloads)
def test_output_bounds_walk_frames_other_writers_produce(data: bytes) -> None:
    """aiokafka's framings, concatenated and streamed frames, skippable frames."""
    assert codecs.lz4_output_bound(aio.lz4_encode(data)) >= len(data)
    assert codecs.lz4_output_bound(bytes(cramjam.lz4.compress(data))) >= len(data)
    assert codecs.zstd_output_bound(aio.zstd_encode(data)) >= len(data)
    stream = cramjam.zstd.Compressor()
    stream.compress(data)
    streamed = bytes(stream.finish())
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"abc"
    two = streamed + skippable + bytes(cramjam.zstd.compress(data))
    assert codecs.zstd_output_bound(two) >= 2 * len(data)
    assert codecs.decompress(4, two, max_size=max(1, 2 * len(data)) + (1 << 20)) == data + data


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_decompression_bomb_is_refused_before_it_inflates(codec: int) -> None:
    """64 MiB of zeros compresses to a few kB; with a 1 MiB limit it is corrupt, fast."""
    zeros = bytes(16 * 1024 * 1024)
    if codec == 4:
        z = cramjam.zstd.Compressor()
        for _ in range(4):
            z.compress(zeros)
        blob = bytes(z.finish())
    elif codec == 3:
        lz = cramjam.lz4.Compressor(level=1, content_checksum=False, block_linked=False)
        for _ in range(4):
            lz.compress(zeros)
        blob = bytes(lz.finish())
    else:
        blob = codecs.compress(codec, zeros * 4)
    assert len(blob) < 4 * 1024 * 1024
    with pytest.raises(CorruptRecordError, match="more than"):
        codecs.decompress(codec, blob, max_size=1024 * 1024)


@pytest.mark.parametrize("codec", [3, 4])
@given(data=st.binary(min_size=1, max_size=500), cut=st.integers(1, 40))
def test_output_bound_rejects_truncated_frames(codec: int, data: bytes, cut: int) -> None:
    blob = codecs.compress(codec, data)
    bound = codecs.lz4_output_bound if codec == 3 else codecs.zstd_output_bound
    with pytest.raises(CorruptRecordError):
        bound(blob[: max(0, len(blob) - cut)] or b"\x00")
