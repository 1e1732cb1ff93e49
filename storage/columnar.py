"""Record batches from columns and back: the codec of :mod:`storage.records`, column-wise.

Building one record at a time costs ~0.8 µs per record in Python
(:func:`storage.records.build_batch`); a batch here is built from whole columns
(keys, values, timestamps, optional headers — Arrow arrays, NumPy arrays or
lists of bytes): every varint width and position is computed with NumPy, the
records are assembled by one Arrow kernel (``binary_join_element_wise``, one
copy of the key and value bytes), the CRC-32C runs in C over the finished
bytes and a codec compresses them in one call. Reading is the inverse:
:func:`decode_columns` finds every record body in one pass and decodes every
field with vectorised gathers into Arrow columns (keys and values are views
into the fetched bytes until one C++ cast copies them).

Invariants:
- :func:`build_batch_columns` returns exactly the bytes of
  ``storage.records.build_batch`` for the same records (offset deltas 0..n-1,
  baseTimestamp = the first record's, maxTimestamp = the largest, the same
  attributes, producer fields and codec); the tests check this with hypothesis
  and against batches librdkafka wrote.
- :func:`decode_columns` yields, per batch, what ``storage.records.decode_batch``
  yields (offsets, timestamps with LogAppendTime semantics, null keys/values,
  headers), restricted to offsets in ``[start, end)``; control batches yield no
  rows; every batch's CRC-32C is checked and every record's fields must add up
  to its declared length, else :class:`CorruptRecordError` names the batch.
- ``next_offset`` is one past the last offset of the last whole batch looked
  at, so a reader that continues from it neither skips nor repeats a record.

This module depends on NumPy and PyArrow and on nothing above ``storage``.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, NamedTuple, Unpack

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from storage import codecs
from storage.errors import CorruptRecordError, InvalidRecordError
from storage.primitives import read_varint, varint_bytes
from storage.records import (
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    BatchOptions,
    assemble_batch,
    check_batch_options,
    crc_ok,
    encode_headers,
    iter_batches,
)

__all__ = [
    "ColumnBatch",
    "HEADERS_TYPE",
    "HEADER_STRUCT_TYPE",
    "binary_column",
    "build_batch_columns",
    "decode_columns",
    "encoded_sizes",
    "header_section_sizes",
    "timestamp_column",
    "warm_up",
]

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
U8 = npt.NDArray[np.uint8]

HEADER_STRUCT_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
"""One header as Arrow sees it (Spark's Kafka schema: ``struct<key:string,value:binary>``)."""
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_STRUCT_TYPE))

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# Building never calls pa.array or pa.scalar on Python objects: those make pyarrow
# import pandas (~0.5 s), which a CLI run or the broker's UDP ingest would pay for
# nothing. Arrays are made from NumPy buffers instead.


def numeric_array(values: npt.NDArray[Any]) -> pa.Array:
    """A NumPy int/float array as an Arrow array over the same memory (no pandas import)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def _empties(n: int) -> pa.BinaryArray:
    """n empty binary values (the join's separators)."""
    return pa.Array.from_buffers(  # type: ignore[return-value]
        pa.binary(), n, [None, pa.py_buffer(np.zeros(n + 1, dtype=np.int32)), pa.py_buffer(b"")])


def validity(col: pa.Array) -> npt.NDArray[np.bool_]:
    """True where ``col`` holds a value, read from its validity bitmap."""
    n = len(col)
    bitmap = col.buffers()[0]
    if bitmap is None or not col.null_count:
        return np.ones(n, dtype=bool)
    if col.null_count == n:
        return np.zeros(n, dtype=bool)
    # Unpack only the bytes this slice covers: a slice of a long column shares its
    # parent's bitmap, and unpacking all of it per batch cost more than the batch.
    first = col.offset // 8
    raw = np.frombuffer(bitmap, dtype=np.uint8)[first : (col.offset + n + 7) // 8]
    bits = np.unpackbits(raw, bitorder="little")
    start = col.offset - 8 * first
    return bits[start : start + n].astype(bool)


def _nulls_as_empty(col: pa.BinaryArray) -> pa.BinaryArray:
    """``col`` with its nulls read as empty values (the join would make a null row)."""
    if not col.null_count:
        return col
    n = len(col)
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int32)[col.offset : col.offset + n + 1]
    valid = validity(col)
    if not np.diff(offsets)[~valid].any():  # null slots take no bytes: drop the bitmap
        return pa.Array.from_buffers(  # type: ignore[return-value]
            pa.binary(), n, [None, col.buffers()[1], col.buffers()[2]], offset=col.offset)
    return col.fill_null(b"")  # type: ignore[no-any-return]


def _from_list(values: Sequence[Any]) -> pa.BinaryArray:
    """A list of bytes/None as an Arrow binary array built from one join; a list
    with ``str`` values goes through ``pa.array``.

    Not ``pa.array`` for every list: its first call imports pandas (0.2 s, and ~30k
    more objects for every later garbage collection to walk)."""
    n = len(values)
    try:  # no None, no str (the usual values): one join, no count of the nulls first
        data = b"".join(values)
    except TypeError:
        pass
    else:
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.fromiter(map(len, values), dtype=np.int32, count=n), out=offsets[1:])
        if int(offsets[-1]) != len(data):
            return _from_list(_as_bytes(values))
        return pa.Array.from_buffers(  # type: ignore[return-value]
            pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    try:
        nulls = values.count(None)  # type: ignore[attr-defined]  # list or tuple
    except ValueError:  # a NumPy array among the values: == None is elementwise
        return _from_list(_as_bytes(values))
    if nulls == n:
        return pa.nulls(n, pa.binary())  # type: ignore[return-value]
    present = [v for v in values if v is not None]
    try:
        data = b"".join(present)  # bytes, bytearray and byte memoryviews alike
    except TypeError:  # str values: Arrow encodes them as UTF-8
        return pa.array(_as_bytes(values), type=pa.binary())  # type: ignore[return-value]
    lengths = np.fromiter(map(len, present), dtype=np.int32, count=len(present))
    if int(lengths.sum()) != len(data):
        return _from_list(_as_bytes(values))
    valid = np.fromiter(map(operator.is_not, values, repeat(None)), dtype=bool, count=n)
    full = np.zeros(n + 1, dtype=np.int32)
    full[1:][valid] = lengths
    np.cumsum(full[1:], out=full[1:])
    validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(  # type: ignore[return-value]
        pa.binary(), n, [validity, pa.py_buffer(full), pa.py_buffer(data)], null_count=nulls)


def _as_bytes(values: Sequence[Any]) -> list[Any]:
    """Buffers other than bytes, bytearray and str as bytes: ``len`` of a memoryview or
    array whose items are wider than a byte counts items, which would cut the joined
    data at the wrong places."""
    return [v if v is None or isinstance(v, bytes | bytearray | str) else bytes(v)
            for v in values]


RECORD_BOUND = 1 + 5 + 10 + 5 + 5 + 5 + 1
"""Most bytes a record adds beyond its key, value and header bytes (every varint at
its widest plus the attributes and an empty header count): an upper bound that
lets a caller cap a batch's size before building it."""


# ---------------------------------------------------------------- column inputs


def binary_column(col: Any, n: int | None = None) -> pa.BinaryArray:
    """``col`` as one Arrow ``binary`` array (nulls kept).

    Accepts an Arrow array or chunked array of binary/string (any offset width,
    or views), a NumPy object array, a 2-D ``uint8`` array (one row per record),
    a list of ``bytes``/``str``/``None``, or ``None`` for ``n`` nulls.
    """
    if col is None:
        if n is None:
            raise ValueError("a column of nulls needs its length")
        return pa.nulls(n, pa.binary())  # type: ignore[return-value]
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(col, np.ndarray) and col.ndim == 2 and col.dtype == np.uint8:
        rows, width = col.shape
        offsets = np.arange(rows + 1, dtype=np.int32) * width
        data = np.ascontiguousarray(col)
        return pa.Array.from_buffers(  # type: ignore[return-value]
            pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if isinstance(col, list | tuple):
        col = _from_list(col)
    elif not isinstance(col, pa.Array):
        col = pa.array(col, type=pa.binary())
    if pa.types.is_string(col.type):
        # Same layout as binary: a view, where a cast copied every value (Spark's
        # string keys reach the sink this way).
        return col.view(pa.binary())  # type: ignore[no-any-return]
    if not pa.types.is_binary(col.type):
        col = col.cast(pa.binary())
    return col  # type: ignore[no-any-return]


def timestamp_column(ts: Any, n: int, now_ms: int | None = None) -> I64:
    """Epoch-ms timestamps as int64: a scalar, a list (``None`` = now), NumPy, or Arrow
    (int64 ms, or a timestamp type of any unit; nulls = now)."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if ts is None:
        return np.full(n, now, dtype=np.int64)
    if isinstance(ts, int):
        return np.full(n, ts, dtype=np.int64)
    if isinstance(ts, pa.ChunkedArray):
        ts = ts.combine_chunks()
    if isinstance(ts, pa.Array):
        if pa.types.is_timestamp(ts.type):
            ts = ts.cast(pa.timestamp("ms", tz=ts.type.tz), safe=False).cast(pa.int64())
        elif not pa.types.is_int64(ts.type):
            ts = ts.cast(pa.int64())
        if ts.null_count:
            ts = ts.fill_null(now)
        return np.asarray(ts.to_numpy(zero_copy_only=False), dtype=np.int64)
    if isinstance(ts, np.ndarray):
        return ts.astype(np.int64, copy=False)
    try:  # no None (the usual case): one C pass, no scan for None first
        return np.fromiter(ts, dtype=np.int64, count=len(ts))
    except TypeError:
        if None not in ts:
            raise
    return np.fromiter([now if t is None else t for t in ts], dtype=np.int64, count=len(ts))


def _lengths(col: pa.BinaryArray) -> tuple[I64, I64]:
    """(start in the data buffer, length) of every row; length -1 for nulls."""
    n = len(col)
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int32)[col.offset : col.offset + n + 1]
    length = np.diff(offsets).astype(np.int64)
    if col.null_count:
        valid = validity(col)
        length = np.where(valid, length, -1)
    return offsets[:-1].astype(np.int64), length


# ---------------------------------------------------------------- varints


def _zigzag(v: I64) -> U64:
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _sizes(z: U64) -> I64:
    """Bytes of the unsigned varint of each value (1..10)."""
    size = np.ones(len(z), dtype=np.int64)
    rest = z >> np.uint64(7)
    while True:
        more = rest != 0
        if not bool(more.any()):
            return size
        size += more
        rest >>= np.uint64(7)


def _put(mat: U8, z: U64, size: I64) -> None:
    """Write varints ``z`` (``size`` bytes each) left-aligned into the rows of ``mat``.

    Columns past a row's size get 0 (the value is used up); callers cut rows to
    their size or write a suffix there afterwards.
    """
    rest = z.copy()
    for c in range(mat.shape[1]):
        byte = (rest & np.uint64(0x7F)).astype(np.uint8)
        byte |= np.where(size > c + 1, np.uint8(0x80), np.uint8(0))
        mat[:, c] = byte
        rest >>= np.uint64(7)


def _pack_rows(mat: U8, widths: I64) -> pa.BinaryArray:
    """Row i of ``mat`` cut to ``widths[i]`` bytes, as an Arrow binary array."""
    n, w = mat.shape
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(widths, out=offsets[1:])
    data = mat.reshape(-1) if n and int(widths.min()) == w else mat[np.arange(w) < widths[:, None]]
    return pa.Array.from_buffers(  # type: ignore[return-value]
        pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


_SMALL_TABLE = 1 << 14
"""Varints below this (one and two bytes) come from a table by one Arrow ``take``."""


def _varint_table(size_limit: int, prefix: bytes, suffix: bytes) -> tuple[pa.BinaryArray, I64]:
    """``prefix + varint(z) + suffix`` for every z below ``size_limit``, and each one's size."""
    z = np.arange(size_limit, dtype=np.uint64)
    return _varints_column(z, prefix, suffix)


def _varints_column(z: U64, prefix: bytes, suffix: bytes) -> tuple[pa.BinaryArray, I64]:
    """``prefix + varint(z[i]) + suffix`` per row, written column by column with NumPy."""
    size = _sizes(z)
    width = int(size.max()) if len(z) else 1
    mat = np.zeros((len(z), len(prefix) + width + len(suffix)), dtype=np.uint8)
    for j, b in enumerate(prefix):
        mat[:, j] = b
    _put(mat[:, len(prefix) : len(prefix) + width], z, size)
    rows = np.arange(len(z))
    for j, b in enumerate(suffix):
        mat[rows, len(prefix) + size + j] = b
    widths = size + len(prefix) + len(suffix)
    return _pack_rows(mat, widths), widths


_TABLES: dict[tuple[int, bytes, bytes], tuple[pa.BinaryArray, I64]] = {}
_OFFSET_DELTAS: dict[bytes, tuple[pa.BinaryArray, I64]] = {}


def _varint_column(z: U64, prefix: bytes = b"", suffix: bytes = b"") -> tuple[pa.BinaryArray, I64]:
    """``prefix + varint(z[i]) + suffix`` per row as an Arrow binary column, and each row's size.

    Varints of one or two bytes, nearly all of a batch's, are gathered from a
    table in C++ (one ``take``); a column with larger ones (e.g. timestamp deltas
    of seconds) is written byte column by byte column with NumPy.
    """
    top = int(z.max()) if len(z) else 0
    if top >= _SMALL_TABLE:
        return _varints_column(z, prefix, suffix)
    key = (_SMALL_TABLE, prefix, suffix)
    table = _TABLES.get(key)
    if table is None:
        table = _TABLES[key] = _varint_table(_SMALL_TABLE, prefix, suffix)
    idx = z.view(np.int64)
    return table[0].take(numeric_array(idx)), table[1][idx]  # type: ignore[return-value]


def _one_length(length: I64) -> bool:
    """Every row has this one length (nulls, -1, count as a length), a one- or two-byte varint."""
    first = int(length[0])
    return -64 <= first < 8192 and bool((length == first).all())


_SUFFIXES_KEPT = 16
"""Offset-delta columns cached (one per suffix: each shared length is a suffix)."""


def _offset_deltas(n: int, suffix: bytes) -> tuple[pa.BinaryArray, I64]:
    """Varints of the offset deltas 0..n-1, then ``suffix`` (the same for every batch:
    built once per suffix, then sliced)."""
    cached = _OFFSET_DELTAS.get(suffix)
    if cached is None and len(_OFFSET_DELTAS) >= _SUFFIXES_KEPT:
        _OFFSET_DELTAS.clear()
    if cached is None or len(cached[1]) < n:
        m = max(n, 1 << 16)
        cached = _OFFSET_DELTAS[suffix] = _varints_column(
            np.arange(m, dtype=np.uint64) << np.uint64(1), b"", suffix)
    col, size = cached
    return col.slice(0, n), size[:n]  # type: ignore[return-value]


def _encode_headers(
    headers: Sequence[Any] | pa.Array | None, n: int
) -> tuple[pa.BinaryArray | None, I64]:
    """Each record's encoded header section (count + pairs) and its length.

    Records without headers get the one byte ``0``; records with headers are
    encoded in Python (they are rare, and a header list has no columnar shape).
    The column is None when no record has headers (every section is ``0``).
    """
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if isinstance(headers, pa.Array):
        if headers.null_count == len(headers) or (
            int(pc.max(pc.list_value_length(headers)).as_py() or 0) == 0
        ):
            headers = None
        else:
            headers = [
                [(h["key"], h["value"]) for h in row] if row else None
                for row in headers.to_pylist()
            ]
    if headers is None or not any(headers):
        return None, np.ones(n, dtype=np.int64)
    blobs = [b"\x00" if not h else bytes(encode_headers(h)) for h in headers]
    if len(blobs) != n:
        raise ValueError(f"{len(blobs)} header lists for {n} records")
    arr = pa.array(blobs, type=pa.binary())
    return arr, np.fromiter(map(len, blobs), dtype=np.int64, count=n)  # type: ignore[return-value]


def header_section_sizes(headers: Sequence[Any] | pa.Array | None, n: int) -> I64:
    """Each record's encoded header bytes beyond the one :data:`RECORD_BOUND` counts."""
    return _encode_headers(headers, n)[1] - 1




# ---------------------------------------------------------------- building


def encoded_sizes(keys: pa.BinaryArray, values: pa.BinaryArray, header_bytes: I64 | None = None
                  ) -> I64:
    """An upper bound of each record's encoded size (see :data:`RECORD_BOUND`), for
    cutting a column into batches that stay under a byte limit before building them."""
    _, vlen = _lengths(values)
    size = RECORD_BOUND + np.maximum(vlen, 0)
    if keys.null_count < len(keys):
        size += np.maximum(_lengths(keys)[1], 0)
    if header_bytes is not None:
        size += header_bytes
    return size  # type: ignore[no-any-return]


def build_batch_columns(
    keys: Any,
    values: Any,
    timestamps: Any = None,
    headers: Sequence[Any] | pa.Array | None = None,
    **options: Unpack[BatchOptions],
) -> bytes:
    """One v2 batch of ``len(values)`` records from columns; see the module docstring.

    ``keys`` may be ``None`` (every key null); ``timestamps`` a column, one int
    for all, or ``None`` (now); ``headers`` ``None`` or one header list (or None)
    per record. The result equals ``storage.records.build_batch`` of the rows.
    """
    check_batch_options(options.get("compression", 0), options.get("timestamp_type", 0))
    vcol = binary_column(values)
    n = len(vcol)
    kcol = binary_column(keys, n)
    if len(kcol) != n:
        raise ValueError(f"{len(kcol)} keys for {n} values")
    ts = timestamp_column(timestamps, n)
    if len(ts) != n:
        raise ValueError(f"{len(ts)} timestamps for {n} values")
    hcol, hlen = _encode_headers(headers, n)
    if n:
        base_ts = int(ts[0])
        max_ts = int(ts.max())
        lo = int(ts.min()) - base_ts
        if max_ts - base_ts > _INT64_MAX or lo < _INT64_MIN:
            raise InvalidRecordError("a record timestamp is out of the int64 delta range")
        no_keys = kcol.null_count == n
        _, vlen = _lengths(vcol)
        no_headers = hcol is None
        # Columns joined row by row: fixed bytes ride along as prefixes and suffixes
        # of the varint columns (the attributes byte after the length, a null key's
        # length after the offset delta, and, without headers, each record's header
        # count 0 before the next record's length), so fewer columns are joined.
        # One timestamp for every record (Spark's "now", a bulk load's fixed time):
        # each delta is the byte 0, carried by the length column's suffix.
        same_ts = max_ts == base_ts and lo == 0
        # Likewise a length every record shares (keys of one length; without keys,
        # values of one length) follows the offset delta: it rides on the offset
        # deltas' suffix instead of a column of its own.
        suffix = b"\x01" if no_keys else b""
        klen = None if no_keys else _lengths(kcol)[1]
        fold_k = klen is not None and _one_length(klen)
        fold_v = no_keys and _one_length(vlen)
        if fold_k:
            suffix = varint_bytes(int(klen[0]))  # type: ignore[index]
        elif fold_v:
            suffix += varint_bytes(int(vlen[0]))
        od_col, s_od = _offset_deltas(n, suffix)
        body = (2 if same_ts else 1) + s_od + np.maximum(vlen, 0) + hlen
        if not fold_v:
            vl_col, s_vl = _varint_column(_zigzag(vlen))
            body += s_vl
        if not same_ts:
            ts_col, s_ts = _varint_column(_zigzag(ts - base_ts))
            body += s_ts
        if klen is not None:
            body += np.maximum(klen, 0)
            if not fold_k:
                kl_col, s_kl = _varint_column(_zigzag(klen))
                body += s_kl
        len_col, _ = _varint_column((body << 1).view(np.uint64),
                                    b"\x00" if no_headers else b"",
                                    b"\x00\x00" if same_ts else b"\x00")
        cols: list[pa.Array] = [len_col, od_col] if same_ts else [len_col, ts_col, od_col]
        if not no_keys:
            if not fold_k:
                cols.append(kl_col)
            cols.append(_nulls_as_empty(kcol))
        if not fold_v:
            cols.append(vl_col)
        cols.append(_nulls_as_empty(vcol))
        if hcol is not None:
            cols.append(hcol)
        joined = pc.binary_join_element_wise(*cols, _empties(n))
        offs = joined.buffers()[1]
        first, last = np.frombuffer(offs, dtype=np.int32)[[joined.offset, joined.offset + n]]
        records = memoryview(joined.buffers()[2])[int(first) : int(last)]
        # Without headers the first byte is a header count no record owns, and the
        # last record's count is still to come.
        parts: list[Any] = [records[1:], b"\x00"] if no_headers else [records]
    else:
        base_ts = max_ts = -1
        parts = []
    return assemble_batch(parts, n, base_ts, max_ts, **options)


def warm_up() -> None:
    """Build the varint tables and initialise the Arrow kernels now (~0.1-0.3 s once per
    process), so a latency-sensitive caller (UDP ingest) does not stall on its first batch."""
    build_batch_columns([None, b"k"], [b"v", None], [0, 1 << 40], [[("h", b"")], None])
    build_batch_columns(None, [b"v"] * 100, 0)


# ---------------------------------------------------------------- decoding


_PAD = 16
"""Zero bytes appended to the decode buffer so fixed-width gathers never run off its end."""

_SMALL_BATCH = 24
"""Below this many records a batch's record walk is done in Python (numpy calls cost more)."""


@dataclass(frozen=True)
class ColumnBatch:
    """Records decoded from concatenated batches, as Arrow columns, and where to continue.

    ``timestamp`` is epoch ms (int64), ``timestamp_type`` 0 (CreateTime) or 1
    (LogAppendTime) per row; ``columns`` is None when no record was in range.
    """

    columns: dict[str, pa.Array] | None
    next_offset: int
    batches_seen: int
    records_decoded: int

    @property
    def num_rows(self) -> int:
        return 0 if self.columns is None else len(self.columns["offset"])


class _Bodies:
    """The record sections of the data batches decoded together (decompressed) and the
    header fields their records' columns need, batch by batch."""

    __slots__ = ("sections", "counts", "base_offsets", "base_ts", "max_ts", "log_append")

    def __init__(self) -> None:
        self.sections: list[bytes | memoryview] = []
        self.counts: list[int] = []
        self.base_offsets: list[int] = []
        self.base_ts: list[int] = []
        self.max_ts: list[int] = []
        self.log_append: list[int] = []

    def add(self, view: memoryview, pos: int, h: BatchHeader) -> None:
        codec = h.attributes & 0x07
        body = view[pos + HEADER_SIZE : pos + h.batch_length + LOG_OVERHEAD]
        self.sections.append(body if codec == 0 else codecs.decompress(codec, body))
        self.counts.append(h.records_count)
        self.base_offsets.append(h.base_offset)
        self.base_ts.append(h.base_timestamp)
        self.max_ts.append(h.max_timestamp)
        self.log_append.append(1 if h.attributes & TIMESTAMP_TYPE_MASK else 0)

    def records(self, where: str) -> tuple[bytes, U8, I64, I64, I64]:
        """(joined sections padded by _PAD, their bytes as an array, each record's body
        start and length in them, each record's batch index)."""
        self.sections.append(bytes(_PAD))
        data = b"".join(self.sections)
        self.sections.pop()
        d = np.frombuffer(data, dtype=np.uint8)
        starts, lengths = _record_bodies(data, d, self.sections, self.counts, where,
                                         self.base_offsets)
        return data, d, starts, lengths, np.repeat(np.arange(len(self.counts)), self.counts)


def decode_columns(
    buf: bytes | bytearray | memoryview, start: int, end: int, where: str = "records"
) -> ColumnBatch:
    """Decode the records of ``buf`` (concatenated batches) with offsets in ``[start, end)``.

    Batches entirely below ``start`` are skipped without decoding; decoding stops
    at the first batch whose base offset is ``>= end``. A torn trailing batch (a
    fetch cut at max_bytes) is ignored; ``next_offset`` then points at it.
    ``where`` names the data in errors (e.g. ``"topic-0"``).
    """
    view = memoryview(buf)
    b = _Bodies()
    next_offset = start
    seen = 0
    for pos, h in iter_batches(view):
        if h.base_offset >= end:
            next_offset = max(next_offset, end)
            break
        seen += 1
        last = h.base_offset + h.last_offset_delta
        if last >= next_offset:
            next_offset = last + 1
        if last < start or h.records_count <= 0 or h.attributes & CONTROL_MASK:
            continue
        if not crc_ok(view, pos, h):
            raise CorruptRecordError(
                f"{where}: the batch at offset {h.base_offset} fails its CRC-32C"
            )
        b.add(view, pos, h)
    if not b.sections:
        return ColumnBatch(None, next_offset, seen, 0)
    data, d, starts, lengths, rec_batch = b.records(where)
    base_offsets, base_ts, max_ts, log_append = b.base_offsets, b.base_ts, b.max_ts, b.log_append
    n_rec = len(starts)
    rows = _decode_fields(d, starts, lengths, where, base_offsets, rec_batch)
    offsets = np.asarray(base_offsets, dtype=np.int64)[rec_batch] + rows["offset_delta"]
    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        # Records outside the range are not returned, but their headers are still
        # checked: a batch is either valid as a whole or reported as corrupt.
        dropped = np.flatnonzero(~keep & (rows["header_count"] > 0))
        if len(dropped):
            sub = {k: v[dropped] for k, v in rows.items()}
            ends = (starts + lengths)[dropped]
            _headers(data, sub, ends, where, offsets[dropped])
        idx = np.flatnonzero(keep)
        offsets = offsets[idx]
        rec_batch = rec_batch[idx]
        rows = {k: v[idx] for k, v in rows.items()}
        starts = starts[idx]
        lengths = lengths[idx]
    n = len(offsets)
    if n == 0:
        return ColumnBatch(None, next_offset, seen, n_rec)
    lat = np.asarray(log_append, dtype=np.int32)[rec_batch]
    ts_ms = np.where(
        lat == 1,
        np.asarray(max_ts, dtype=np.int64)[rec_batch],
        np.asarray(base_ts, dtype=np.int64)[rec_batch] + rows["ts_delta"],
    )
    columns = {
        "key": _binary(d, rows["key_pos"], rows["key_len"]),
        "value": _binary(d, rows["value_pos"], rows["value_len"]),
        "offset": numeric_array(offsets),
        "timestamp": numeric_array(ts_ms),
        "timestamp_type": numeric_array(lat),
        "headers": _headers(data, rows, starts + lengths, where, offsets),
    }
    return ColumnBatch(columns, next_offset, seen, n_rec)


class TimestampColumns(NamedTuple):
    """Per data record of some batches: offset, effective timestamp, and its batch's
    producer id and transactional flag (what read_committed filtering needs)."""

    offsets: I64
    timestamps: I64
    producer_ids: I64
    transactional: npt.NDArray[np.bool_]


def decode_timestamps(buf: bytes | bytearray | memoryview, where: str = "records"
                      ) -> TimestampColumns:
    """Every data record's offset and effective timestamp (LogAppendTime: the batch's
    max timestamp) in ``buf`` (whole batches as stored), vectorised like
    decode_columns but without keys, values or headers; control batches hold none. A
    torn trailing batch is ignored. For storage's own reads (the batches were
    validated at append), so CRCs are not checked again."""
    view = memoryview(buf)
    b = _Bodies()
    pids: list[int] = []
    txn: list[bool] = []
    for pos, h in iter_batches(view):
        if h.records_count <= 0 or h.attributes & CONTROL_MASK:
            continue
        b.add(view, pos, h)
        pids.append(h.producer_id)
        txn.append(bool(h.attributes & 0x10))
    if not b.sections:
        e = np.zeros(0, dtype=np.int64)
        return TimestampColumns(e, e, e, np.zeros(0, dtype=np.bool_))
    data, d, starts, lengths, rec_batch = b.records(where)
    base_offsets, base_ts, max_ts, log_append = b.base_offsets, b.base_ts, b.max_ts, b.log_append
    p = starts + 1  # the attributes byte
    ts_delta, s, ok1 = _varints(d, p, 10)
    off_delta, _, ok2 = _varints(d, p + s, 5)
    if not (ok1 and ok2):
        raise _corrupt(where, base_offsets[0], "bad timestamp or offset delta varint")
    offsets = np.asarray(base_offsets, dtype=np.int64)[rec_batch] + off_delta
    ts_ms = np.where(np.asarray(log_append, dtype=np.bool_)[rec_batch],
                     np.asarray(max_ts, dtype=np.int64)[rec_batch],
                     np.asarray(base_ts, dtype=np.int64)[rec_batch] + ts_delta)
    return TimestampColumns(offsets, ts_ms, np.asarray(pids, dtype=np.int64)[rec_batch],
                            np.asarray(txn, dtype=np.bool_)[rec_batch])


def _corrupt(where: str, offset: int, why: str) -> CorruptRecordError:
    return CorruptRecordError(f"{where}: batch at offset {offset}: {why}")


def _record_bodies(
    data: bytes,
    d: U8,
    sections: list[bytes | memoryview],
    counts: list[int],
    where: str,
    base_offsets: list[int],
) -> tuple[I64, I64]:
    """Absolute start and length of every record body (after its length varint)."""
    starts: list[I64] = []
    lengths: list[I64] = []
    pos = 0
    for i, sec in enumerate(sections):
        end = pos + len(sec)
        found = _find_bodies(data, d, pos, end, counts[i], where, base_offsets[i])
        starts.extend(found[0])
        lengths.extend(found[1])
        pos = end
    return np.concatenate(starts), np.concatenate(lengths)


def _find_bodies(
    data: bytes, d: U8, pos: int, end: int, n: int, where: str, base_offset: int
) -> tuple[list[I64], list[I64]]:
    """Locate the n record bodies of one batch's records region ``data[pos:end]``.

    Records are found in runs of equal length: if the record at p has a k-byte
    length prefix encoding L, and the k bytes at p + j*(k+L) are the same for
    j = 0..J-1, then (by induction on j) those J records all have length L and
    are back to back. Such runs are checked with one vectorised comparison; where
    record lengths keep changing, a plain walk over the prefixes takes over.
    """
    starts: list[I64] = []
    lengths: list[I64] = []
    i = 0
    p = pos
    window = 64
    while i < n:
        if p >= end:
            raise _corrupt(where, base_offset, f"records end after {i} of {n}")
        length, k = _prefix(data, p, end, where, base_offset)
        stride = k + length
        m = min(n - i, (end - p) // stride, window)
        run = 0
        if m >= _SMALL_BATCH:
            cand = p + np.arange(m, dtype=np.int64) * stride
            same = d[cand] == data[p]
            for c in range(1, k):
                same &= d[cand + c] == data[p + c]
            run = m if bool(same.all()) else int(np.argmin(same))
            starts.append(cand[:run] + k)
            lengths.append(np.full(run, length, dtype=np.int64))
            i += run
            p += run * stride
            window = window * 4 if run == m else 64
        if run < _SMALL_BATCH:
            take = min(n - i, 2 * _SMALL_BATCH)
            s, ln, p = _walk(data, p, end, take, where, base_offset)
            starts.append(s)
            lengths.append(ln)
            i += take
    if p != end:
        raise _corrupt(where, base_offset, f"{end - p} bytes after the last record")
    return starts, lengths


def _prefix(data: bytes, p: int, end: int, where: str, base_offset: int) -> tuple[int, int]:
    """(record length, size of its varint prefix) at ``p``."""
    v = 0
    shift = 0
    k = 0
    while True:
        if p + k >= end or shift > 28:
            raise _corrupt(where, base_offset, "bad record length varint")
        b = data[p + k]
        k += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    length = (v >> 1) ^ -(v & 1)
    if length < 1 or p + k + length > end:
        raise _corrupt(where, base_offset, f"record length {length} does not fit")
    return length, k


def _walk(
    data: bytes, p: int, end: int, n: int, where: str, base_offset: int
) -> tuple[I64, I64, int]:
    """Walk n length prefixes one record at a time; returns (starts, lengths, next position)."""
    starts = [0] * n
    lengths = [0] * n
    for i in range(n):
        if p >= end:
            raise _corrupt(where, base_offset, "records end before their count")
        b = data[p]
        if 1 < b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            length, k = _prefix(data, p, end, where, base_offset)
            p += k
        if p + length > end:
            raise _corrupt(where, base_offset, f"record length {length} does not fit")
        starts[i] = p
        lengths[i] = length
        p += length
    return np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64), p


def _varints(d: U8, pos: I64, width: int) -> tuple[I64, I64, bool]:
    """Zig-zag varints at every position: (values, sizes, all_well_formed).

    Works one byte column at a time and stops as soon as no varint continues, so
    the common one- and two-byte varints cost two or three array passes.
    """
    b = d[pos]
    active = b >= 0x80
    raw = (b & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), dtype=np.int64)
    c = 1
    while bool(active.any()):
        if c >= width:
            return raw.view(np.int64), size, False
        b = d[pos + c]
        raw |= np.where(active, (b & 0x7F).astype(np.uint64) << np.uint64(7 * c), np.uint64(0))
        size += active
        active &= b >= 0x80
        c += 1
    value = ((raw >> np.uint64(1)) ^ (np.uint64(0) - (raw & np.uint64(1)))).view(np.int64)
    return value, size, True


def _decode_fields(
    d: U8, starts: I64, lengths: I64, where: str, base_offsets: list[int], rec_batch: I64,
) -> dict[str, I64]:
    """Every fixed field of every record, vectorised; validates the layout."""
    ends = starts + lengths
    p = starts + 1  # attributes byte, unused by magic 2
    ts_delta, s, ok1 = _varints(d, p, 10)
    p = p + s
    off_delta, s, ok2 = _varints(d, p, 5)
    p = p + s
    key_len, s, ok3 = _varints(d, p, 5)
    key_pos = p + s
    p = key_pos + np.maximum(key_len, 0)
    value_len, s, ok4 = _varints(d, np.minimum(p, ends), 5)
    value_pos = p + s
    p = value_pos + np.maximum(value_len, 0)
    header_count, s, ok5 = _varints(d, np.minimum(p, ends), 5)
    header_pos = p + s
    # Any negative key or value length means null, as Kafka's DefaultRecord reads it.
    bad = (
        (header_count < 0)
        | (header_pos > ends)
        | ((header_count == 0) & (header_pos != ends))
    )
    if not (ok1 and ok2 and ok3 and ok4 and ok5) or bool(bad.any()):
        i = int(np.argmax(bad)) if bool(bad.any()) else 0
        raise _corrupt(where, base_offsets[int(rec_batch[i])], "record fields do not fit its length")
    return {
        "ts_delta": ts_delta,
        "offset_delta": off_delta,
        "key_pos": key_pos,
        "key_len": key_len,
        "value_pos": value_pos,
        "value_len": value_len,
        "header_count": header_count,
        "header_pos": header_pos,
    }


def _words(d: U8) -> npt.NDArray[np.uint32]:
    """A little-endian uint32 view of ``d`` starting at every byte (unaligned, no copy)."""
    return np.ndarray(shape=(len(d) - 3,), dtype="<u4", buffer=d, offset=0, strides=(1,))


_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)


def _binary(d: U8, pos: I64, length: I64) -> pa.Array:
    """A ``binary`` column whose row i is ``d[pos[i]:pos[i]+length[i]]`` (null if length < 0).

    Built as Arrow ``binary_view`` rows (inline up to 12 bytes, else a 4-byte
    prefix and an offset into ``d``) from three unaligned 32-bit gathers per row,
    then cast to ``binary`` by Arrow's C++ kernel in one copy.
    """
    n = len(pos)
    valid = length >= 0
    ln = np.where(valid, length, 0)
    words = _words(d)
    views = np.empty((n, 4), dtype=np.uint32)
    views[:, 0] = ln
    views[:, 1] = words[pos] & _MASKS[np.minimum(ln, 4)]
    long_rows = ln > 12
    if bool(long_rows.all()):
        views[:, 2] = 0
        views[:, 3] = pos
    else:
        views[:, 2] = np.where(long_rows, 0, words[pos + 4] & _MASKS[np.clip(ln - 4, 0, 4)])
        views[:, 3] = np.where(long_rows, pos, words[pos + 8] & _MASKS[np.clip(ln - 8, 0, 4)])
    validity = None if bool(valid.all()) else pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), pa.py_buffer(d)])
    return arr.cast(pa.binary())


def _headers(data: bytes, rows: dict[str, I64], ends: I64, where: str, offsets: I64) -> pa.Array:
    """The headers column; records with headers are parsed one by one, the rest cost nothing."""
    counts = rows["header_count"]
    n = len(counts)
    with_headers = np.flatnonzero(counts > 0)
    if len(with_headers) == 0:
        return pa.ListArray.from_arrays(
            pa.array(np.zeros(n + 1, dtype=np.int32)),
            pa.array([], type=HEADER_STRUCT_TYPE),
            type=HEADERS_TYPE,
        )
    keys: list[str] = []
    values: list[bytes | None] = []
    hpos = rows["header_pos"]
    for i in with_headers.tolist():
        p = int(hpos[i])
        end = int(ends[i])
        for _ in range(int(counts[i])):
            klen, p = read_varint(data, p, end)
            if klen < 0 or p + klen > end:
                raise _corrupt(where, int(offsets[i]), "header key does not fit")
            keys.append(data[p : p + klen].decode("utf-8", errors="replace"))
            p += klen
            vlen, p = read_varint(data, p, end)
            if vlen < 0:
                values.append(None)
            elif p + vlen > end:
                raise _corrupt(where, int(offsets[i]), "header value does not fit")
            else:
                values.append(data[p : p + vlen])
                p += vlen
        if p != end:
            raise _corrupt(where, int(offsets[i]), "record headers do not fit its length")
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    struct_arr = pa.StructArray.from_arrays(
        [pa.array(keys, type=pa.string()), pa.array(values, type=pa.binary())],
        fields=list(HEADER_STRUCT_TYPE),
    )
    return pa.ListArray.from_arrays(pa.array(list_offsets), struct_arr, type=HEADERS_TYPE)
