"""The column-wise batch builder and decoder, with the row-wise codec as the oracle.

``build_batch_columns`` must produce exactly the bytes of ``records.build_batch``
for the same rows (random keys, values, nulls, headers, timestamps out of order
and far apart, codecs, producer fields), whichever column form the rows come in
(lists, Arrow arrays, NumPy arrays); ``decode_columns`` of a built batch must give
back the rows ``records.decode_batch`` reads from it.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import records as R
from storage.columnar import build_batch_columns, decode_columns
from storage.errors import CorruptRecordError, InvalidRecordError
from storage.records import Record

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

maybe_bytes = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=60, max_size=200))
headers_st = st.one_of(
    st.just([]), st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
                          min_size=1, max_size=3))


@st.composite
def rows(draw: st.DrawFn, with_headers: bool = True) -> list[Record]:
    n = draw(st.integers(0, 40))
    base = draw(st.one_of(st.integers(0, 1 << 45), st.integers(INT64_MIN // 2, INT64_MAX // 2)))
    same = draw(st.booleans())  # equal-sized records: the matrix-column fast path
    one_time = draw(st.integers(0, 3)) == 0  # every record at one time: no delta column
    # Keys of one length (or none) and values of one length: shared lengths ride on
    # the offset-delta column instead of columns of their own.
    key_len = draw(st.one_of(st.none(), st.integers(0, 70)))
    value_len = draw(st.sampled_from([0, 10, 63, 64, 300]))
    out = []
    for i in range(n):
        delta = 0 if one_time else draw(st.one_of(
            st.integers(-70, 70),
            st.integers(-(1 << 20), 1 << 20),
            st.integers(INT64_MIN // 2 - min(base, 0), INT64_MAX // 2 - max(base, 0)),
        ))
        if same:
            key = None if key_len is None else (b"%d" % i).rjust(key_len, b"k")[-key_len:] if key_len else b""
            out.append(Record(0, base + (0 if one_time else delta % 50), key, b"v" * value_len,
                              draw(headers_st) if with_headers and value_len == 300 and i % 3 == 0 else []))
        else:
            out.append(Record(0, base + delta, draw(maybe_bytes), draw(maybe_bytes),
                              draw(headers_st) if with_headers else []))
    return out


def as_form(col: list[bytes | None], form: str) -> Any:
    if form == "list":
        return col
    if form == "numpy":
        return np.array(col + [b""], dtype=object)[:-1]  # object dtype even for equal lengths
    if form == "arrow":
        return pa.array(col, type=pa.binary())
    if form == "chunked":
        half = len(col) // 2
        return pa.chunked_array([pa.array(col[:half], pa.binary()), pa.array(col[half:], pa.binary())])
    if form == "sliced":
        # A slice of a longer column at an offset that is no multiple of 8, as
        # produce_arrow cuts a table: the validity bitmap is the parent's.
        pad: list[Any] = [None, b"p", None]
        return pa.array(pad + list(col) + pad, pa.binary()).slice(len(pad), len(col))
    return pa.array(col, type=pa.large_binary())


@settings(max_examples=300, deadline=None)
@given(
    rs=rows(),
    codec=st.sampled_from([0, 0, 1, 2, 3, 4]),
    form=st.sampled_from(["list", "numpy", "arrow", "chunked", "large", "sliced"]),
    producer=st.one_of(st.just((-1, -1, -1)), st.tuples(
        st.integers(0, INT64_MAX), st.integers(0, 32767), st.integers(0, (1 << 31) - 1))),
    ts_type=st.sampled_from([0, 1]),
    transactional=st.booleans(),
)
def test_columns_build_the_same_bytes_as_rows(
    rs: list[Record], codec: int, form: str, producer: tuple[int, int, int], ts_type: int,
    transactional: bool,
) -> None:
    pid, epoch, seq = producer
    kw: dict[str, Any] = dict(compression=codec, producer_id=pid, producer_epoch=epoch,
                              base_sequence=seq, timestamp_type=ts_type,
                              is_transactional=transactional, base_offset=7,
                              partition_leader_epoch=3)
    expected = R.build_batch(rs, **kw)
    headers = [r.headers for r in rs] if any(r.headers for r in rs) else None
    got = build_batch_columns(
        as_form([r.key for r in rs], form), as_form([r.value for r in rs], form),
        np.array([r.timestamp for r in rs], dtype=np.int64) if form == "numpy"
        else [r.timestamp for r in rs],
        headers, **kw,
    )
    assert got == expected


@settings(max_examples=150, deadline=None)
@given(rs=rows(), codec=st.sampled_from([0, 1, 2, 3, 4]), start=st.integers(0, 45))
def test_decode_columns_returns_the_rows_decode_batch_reads(
    rs: list[Record], codec: int, start: int
) -> None:
    batch = build_batch_columns([r.key for r in rs], [r.value for r in rs],
                                [r.timestamp for r in rs], [r.headers for r in rs],
                                compression=codec, base_offset=100)
    oracle = [r for r in R.decode_batch(batch) if r.offset >= 100 + start]
    got = decode_columns(batch, 100 + start, 1 << 62)
    if not oracle:
        assert got.columns is None
        return
    c = got.columns
    assert c is not None
    assert c["offset"].to_pylist() == [r.offset for r in oracle]
    assert c["timestamp"].to_pylist() == [r.timestamp for r in oracle]
    assert c["key"].to_pylist() == [r.key for r in oracle]
    assert c["value"].to_pylist() == [r.value for r in oracle]
    assert [[(h["key"], h["value"]) for h in hs] for hs in c["headers"].to_pylist()] == [
        list(r.headers) for r in oracle]
    assert got.next_offset == 100 + len(rs)


def test_missing_keys_and_timestamps_mean_null_keys_and_now() -> None:
    batch = build_batch_columns(None, [b"a", b"b"], 5)
    assert [(r.key, r.value, r.timestamp) for r in R.decode_batch(batch)] == [
        (None, b"a", 5), (None, b"b", 5)]


def test_two_dimensional_uint8_values_are_one_record_per_row() -> None:
    vals = np.arange(12, dtype=np.uint8).reshape(3, 4)
    batch = build_batch_columns(None, vals, [1, 2, 3])
    assert [r.value for r in R.decode_batch(batch)] == [bytes(row) for row in vals]


def test_timestamp_deltas_beyond_int64_are_refused_as_the_row_builder_does() -> None:
    ts = [INT64_MIN + 1, INT64_MAX]
    with pytest.raises(InvalidRecordError):
        R.build_batch([Record(0, t, None, b"", []) for t in ts])
    with pytest.raises(InvalidRecordError):
        build_batch_columns(None, [b"", b""], ts)


def test_a_flipped_byte_is_reported_not_decoded() -> None:
    batch = bytearray(build_batch_columns(None, [b"x" * 30] * 40, list(range(40))))
    batch[200] ^= 0x01
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(batch), 0, 1 << 62, "t-0")


@settings(max_examples=60, deadline=None)
@given(rs=rows(with_headers=False), arrow=st.booleans())
def test_string_columns_are_their_utf8_bytes(rs: list[Record], arrow: bool) -> None:
    keys = [None if r.key is None else r.key.decode("latin-1") for r in rs]
    values = [None if r.value is None else r.value.decode("latin-1") for r in rs]
    expected = R.build_batch([
        Record(0, r.timestamp, None if k is None else k.encode(), None if v is None else v.encode(), [])
        for r, k, v in zip(rs, keys, values, strict=True)
    ])
    got = build_batch_columns(pa.array(keys, pa.string()) if arrow else keys,
                              pa.array(values, pa.large_string()) if arrow else values,
                              [r.timestamp for r in rs])
    assert got == expected


def _buffer_of(data: st.DataObject, v: bytes | None) -> Any:
    """``v`` as one of the buffer kinds a caller may hand over, its bytes unchanged."""
    if v is None:
        return None
    kinds = ["bytes", "bytearray", "memoryview"]
    if len(v) % 2 == 0:
        kinds += ["array-h", "numpy-u2"]
    if len(v) % 4 == 0:
        kinds += ["memoryview-I"]
    kind = data.draw(st.sampled_from(kinds))
    if kind == "bytearray":
        return bytearray(v)
    if kind == "memoryview":
        return memoryview(v)
    if kind == "array-h":
        return array("h", v)
    if kind == "numpy-u2":
        return np.frombuffer(v, dtype=np.uint16)
    if kind == "memoryview-I":
        return memoryview(v).cast("I")
    return v


@settings(max_examples=150, deadline=None)
@given(rs=rows(with_headers=False), data=st.data(), with_text=st.booleans())
def test_list_values_of_any_buffer_kind_are_their_bytes(
    rs: list[Record], data: st.DataObject, with_text: bool,
) -> None:
    """A buffer whose items are wider than a byte (``len`` counts items, not bytes) is
    encoded as its bytes, as the row-wise builder's ``bytes(v)`` does, next to None and
    str values; it never shifts the cut between its neighbours."""
    expected = R.build_batch(rs)
    keys = [_buffer_of(data, r.key) for r in rs]
    values = [_buffer_of(data, r.value) for r in rs]
    if with_text:  # a str among them (ASCII: its UTF-8 bytes are the same)
        keys.append("k")
        values.append("v")
        expected = R.build_batch([*rs, Record(0, 5, b"k", b"v", [])])
    got = build_batch_columns(keys, values, [r.timestamp for r in rs] + ([5] if with_text else []))
    assert got == expected
