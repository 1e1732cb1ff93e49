"""Fetched bytes → Arrow rows, checked against the record-batch codec as the oracle."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.decode import decode_fetch
from pipeline.schema import ARROW_SCHEMA, SPARK_SCHEMA
from storage.errors import CorruptRecordError
from storage.records import Record, build_batch, decode_batch, iter_batches

_blob = st.one_of(
    st.none(),
    st.binary(max_size=0),
    st.binary(min_size=1, max_size=12),
    st.binary(min_size=13, max_size=300),
    st.sampled_from([b"x" * 100, b"y" * 5]),
)
_headers = st.one_of(
    st.just([]),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3),
)
_record = st.builds(
    lambda ts, k, v, h: Record(0, ts, k, v, h),
    st.integers(0, 2**41),
    _blob,
    _blob,
    _headers,
)
_batch = st.tuples(
    st.lists(_record, min_size=1, max_size=80),
    st.sampled_from([0, 0, 1, 2, 3, 4]),
    st.sampled_from([0, 1]),
)


def _log(batches: list[tuple[list[Record], int, int]], base: int) -> bytes:
    out = bytearray()
    offset = base
    for records, codec, ts_type in batches:
        b = bytearray(build_batch(records, compression=codec, timestamp_type=ts_type))
        struct.pack_into(">q", b, 0, offset)
        offset += len(records)
        out += b
    return bytes(out)


def _oracle(buf: bytes, start: int, end: int) -> list[dict[str, object]]:
    rows = []
    for pos, h in iter_batches(buf):
        for r in decode_batch(buf, pos):
            if start <= r.offset < end:
                rows.append(
                    {
                        "key": r.key,
                        "value": r.value,
                        "topic": "events",
                        "partition": 7,
                        "offset": r.offset,
                        "timestamp": r.timestamp * 1000,
                        "timestampType": h.timestamp_type,
                        "headers": [{"key": k, "value": v} for k, v in r.headers],
                    }
                )
    return rows


def _rows(batch: pa.RecordBatch | None) -> list[dict[str, object]]:
    if batch is None:
        return []
    assert batch.schema.equals(ARROW_SCHEMA)
    table = pa.Table.from_batches([batch])
    table = table.set_column(5, "timestamp", table.column("timestamp").cast(pa.int64()))
    return table.to_pylist()


@settings(max_examples=40)
@given(
    batches=st.lists(_batch, min_size=1, max_size=5),
    base=st.integers(0, 2**40),
    cut=st.tuples(st.floats(0, 1), st.floats(0, 1)),
)
def test_rows_equal_the_codec_for_any_window(
    batches: list[tuple[list[Record], int, int]], base: int, cut: tuple[float, float]
) -> None:
    buf = _log(batches, base)
    total = sum(len(b[0]) for b in batches)
    lo, hi = sorted(cut)
    start = base + int(lo * total)
    end = base + int(hi * total) + 1
    got = decode_fetch(buf, "events", 7, start, end)
    assert _rows(got.batch) == _oracle(buf, start, end)
    # Continuing from next_offset must neither skip nor repeat: it is one past the
    # last batch that starts below ``end`` (or ``end`` itself when a later batch was seen).
    expected_next = start
    for _pos, h in iter_batches(buf):
        if h.base_offset >= end:
            expected_next = max(expected_next, end)
            break
        expected_next = max(expected_next, h.last_offset + 1)
    assert got.next_offset == expected_next


def test_runs_of_equal_records_and_changes_between_them_decode_exactly() -> None:
    records = []
    for i in range(3000):
        size = 100 if (i // 200) % 3 else 37
        records.append(Record(0, 10**12 + i * (1 + i % 5), None if i % 11 else b"k", b"v" * size, []))
    buf = _log([(records, 0, 0)], 5)
    got = decode_fetch(buf, "events", 7, 0, 10**9)
    assert _rows(got.batch) == _oracle(buf, 0, 10**9)
    assert got.next_offset == 3005


def test_torn_trailing_batch_is_left_for_the_next_fetch() -> None:
    buf = _log([([Record(0, 1, None, b"a", [])] * 3, 0, 0)] * 2, 10)
    got = decode_fetch(buf[:-5], "events", 7, 10, 100)
    assert [r["offset"] for r in _rows(got.batch)] == [10, 11, 12]
    assert got.next_offset == 13


def test_control_batches_yield_no_rows_but_advance() -> None:
    buf = bytearray(_log([([Record(0, 1, b"\x00\x00\x00\x01", b"x", [])], 0, 0)], 0))
    attributes = struct.unpack_from(">h", buf, 21)[0] | 0x20
    struct.pack_into(">h", buf, 21, attributes)
    from storage.records import compute_crc

    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    data = bytes(buf) + _log([([Record(0, 2, None, b"y", [])], 0, 0)], 1)
    got = decode_fetch(data, "events", 7, 0, 10)
    assert [r["offset"] for r in _rows(got.batch)] == [1]
    assert got.next_offset == 2


def test_a_flipped_byte_is_reported_as_corruption_not_returned() -> None:
    buf = bytearray(_log([([Record(0, 1, b"key", b"value", [])] * 4, 0, 0)], 0))
    buf[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="events-7"):
        decode_fetch(bytes(buf), "events", 7, 0, 10)


def _txn_log() -> bytes:
    """pid 7's transaction (offsets 0-1) is aborted, pid 8's (2-3) committed; markers 4, 5."""
    from storage.records import build_control_batch

    def data(pid: int, base: int) -> bytes:
        return build_batch([Record(0, 1, None, b"%d-%d" % (pid, i), []) for i in range(2)],
                           base_offset=base, producer_id=pid, producer_epoch=0,
                           base_sequence=0, is_transactional=True)

    def marker(pid: int, commit: bool, base: int) -> bytes:
        return build_control_batch(commit, producer_id=pid, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=2, base_offset=base)

    return data(7, 0) + data(8, 2) + marker(7, False, 4) + marker(8, True, 5)


def test_aborted_transactions_yield_no_rows_only_when_the_fetch_lists_them() -> None:
    buf = _txn_log()
    committed = decode_fetch(buf, "events", 7, 0, 6, [(7, 0)])
    assert [(r["offset"], r["value"]) for r in _rows(committed.batch)] == [
        (2, b"8-0"), (3, b"8-1")]
    # read_uncommitted (no list): every data record, no marker.
    assert [r["offset"] for r in _rows(decode_fetch(buf, "events", 7, 0, 6).batch)] == [
        0, 1, 2, 3]


def test_a_flipped_producer_id_is_corruption_not_a_silently_dropped_batch() -> None:
    buf = bytearray(_txn_log())
    second = next(pos for pos, h in iter_batches(bytes(buf)) if h.base_offset == 2)
    buf[second + 43 + 7] ^= 0x0F  # producer id 8 -> 7, the aborted one; CRC not updated
    with pytest.raises(CorruptRecordError, match="events-7: the batch at offset 2"):
        decode_fetch(bytes(buf), "events", 7, 0, 6, [(7, 0)])


def test_arrow_schema_is_the_one_pyspark_derives_from_the_spark_schema() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(SPARK_SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


@settings(max_examples=150)
@given(
    records=st.lists(_record, min_size=1, max_size=30),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mangled_records_with_a_valid_crc_decode_like_the_codec_or_raise_corruption(
    records: list[Record], edits: list[tuple[int, int]]
) -> None:
    from storage.records import compute_crc

    buf = bytearray(build_batch(records))
    for where, byte in edits:
        buf[61 + where % (len(buf) - 61)] = byte
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    data = bytes(buf)
    try:
        expected = _oracle(data, 0, 10**9)
    except CorruptRecordError:
        with pytest.raises(CorruptRecordError):
            decode_fetch(data, "events", 7, 0, 10**9)
        return
    assert _rows(decode_fetch(data, "events", 7, 0, 10**9).batch) == expected
