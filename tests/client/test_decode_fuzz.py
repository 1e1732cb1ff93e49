"""Whatever bytes a broker sends back, reading them gives records or KafkaError(CORRUPT_MESSAGE)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client import KafkaError
from client.aio import decode_records
from protocol.errors import ErrorCode
from storage import records as rec

VALID = rec.build_batch(
    [rec.Record(i, 1_700_000_000_000 + i, b"k%d" % i, b"v" * i, [("h", b"x")]) for i in range(5)],
    base_offset=40,
) + rec.build_batch([rec.Record(0, 1_700_000_000_100, None, None)], base_offset=45, compression=1)


def _decode_or_corrupt(buf: bytes) -> None:
    try:
        records, nxt = decode_records(buf, "t", 0, 40, None)
    except KafkaError as e:
        assert e.code == ErrorCode.CORRUPT_MESSAGE
        return
    assert nxt >= 40
    assert all(r.offset >= 40 for r in records)


@given(st.binary(max_size=300))
def test_random_bytes_never_escape_as_another_exception(buf: bytes) -> None:
    _decode_or_corrupt(buf)


@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=6),
       st.integers(0, len(VALID)))
def test_mutated_batches_decode_or_fail_cleanly(flips: list[tuple[int, int]], cut: int) -> None:
    buf = bytearray(VALID)
    for pos, byte in flips:
        buf[pos] = byte
    _decode_or_corrupt(bytes(buf[:cut]))


def test_the_unmutated_batches_decode_in_full() -> None:
    records, nxt = decode_records(VALID, "t", 0, 42, None)
    assert [r.offset for r in records] == [42, 43, 44, 45] and nxt == 46
    assert records[-1].key is None and records[-1].value is None


def outside_the_crcs(pos: int) -> bool:
    """Whether byte pos of VALID is one of the second batch's offset/length/epoch/magic/crc
    fields, which lie outside its CRC'd range (the first batch's are below ATTRIBUTES_OFFSET)."""
    first_size = rec.parse_header(VALID).size
    return first_size <= pos < first_size + rec.ATTRIBUTES_OFFSET


def assert_reported_corrupt(buf: bytes, change: str) -> None:
    try:
        decode_records(buf, "t", 0, 40, None)
    except KafkaError as e:
        assert e.code == ErrorCode.CORRUPT_MESSAGE
    else:
        raise AssertionError(f"{change} went unnoticed")


@given(st.integers(rec.ATTRIBUTES_OFFSET, len(VALID) - 1), st.integers(1, 255))
def test_a_flipped_byte_under_the_crc_is_reported_as_corrupt(pos: int, xor: int) -> None:
    if outside_the_crcs(pos):
        return
    buf = bytearray(VALID)
    buf[pos] ^= xor
    assert_reported_corrupt(bytes(buf), f"flipping byte {pos}")


def test_every_single_bit_flip_under_either_crc_is_reported_as_corrupt() -> None:
    """Exhaustive over positions and bits: sign and length fields included."""
    for pos in range(rec.ATTRIBUTES_OFFSET, len(VALID)):
        if outside_the_crcs(pos):
            continue
        for bit in range(8):
            buf = bytearray(VALID)
            buf[pos] ^= 1 << bit
            assert_reported_corrupt(bytes(buf), f"flipping bit {bit} of byte {pos}")
