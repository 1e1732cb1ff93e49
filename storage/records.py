"""The record-batch codec (magic 2): Kafka's wire format and on-disk format in one.

A batch is a 61-byte big-endian header followed by its records (one compressed
blob when the codec is not 0). See ``docs/record-format.md`` for the layout.

Invariants this module keeps:

- The CRC-32C (``crc32c``) covers byte 21 (attributes) to the end of the batch,
  so :func:`set_base_offset` and :func:`set_partition_leader_epoch` never touch
  it, and :func:`set_max_timestamp` recomputes it only when it changed a byte.
- Every malformed input raises :class:`CorruptRecordError` (or
  :class:`InvalidRecordError` / :class:`UnsupportedCompressionError` where Kafka
  answers with those codes), never ``IndexError`` or ``struct.error``.
- Under LogAppendTime every record reports the batch's maxTimestamp; deltas are
  kept on disk but ignored, as Kafka's ``RecordIterator`` does.

Reading:

- :func:`parse_header`, :func:`iter_batches` (shallow walk that stops silently at a
  torn trailing batch), :func:`crc_ok`, :func:`decode_batch`, :func:`record_timestamps`.

Building: :func:`build_batch`.

The append path (one call per Produce'd batch, no ``Record`` objects made):

- :func:`validate_client_batch` runs every check of Kafka's ``LogValidator`` for a
  client batch (magic, CRC, one batch, base offset 0, count, control flag,
  idempotent sequence, records parse exactly to the end, offset deltas 0..n-1) and
  returns a :class:`BatchScan`: the header plus the records' true min and max
  timestamps and the offset delta of the first record carrying the max. The max is
  what the time index and ``set_max_timestamp`` need; min/max decide CreateTime
  validation without another pass.
- :func:`scan_timestamps` is the same timestamp scan without the client checks
  (for recovery and for batches already in the log).
- :func:`timestamp_errors` lists Kafka's per-record INVALID_TIMESTAMP messages; it
  is only called once min/max showed that some record is out of range.
- :func:`set_base_offset`, :func:`set_partition_leader_epoch`,
  :func:`set_max_timestamp` rewrite a batch in place.

Speed: a per-record Python loop validates ~150 MB/s of 100-byte records at best
(~0.8 µs per record); runs of records sharing one layout are instead walked
column-wise in C (see the comment above :func:`_scan`), ~2 GB/s for regular
batches. The per-record loop remains the reference and handles everything else.
A compressed batch is inflated whole, refused first if it would exceed
:data:`MAX_UNCOMPRESSED_BYTES`.
"""

from __future__ import annotations

import importlib.util
import mmap
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from types import ModuleType
from typing import NamedTuple, Protocol, TypedDict, Unpack

import crc32c as _crc32c

from storage import codecs
from storage.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from storage.primitives import read_varint as _read_varint
from storage.primitives import read_varlong as _read_varlong
from storage.primitives import uvarint_bytes
from storage.primitives import write_uvarint as _encode_uvarint
from storage.zonemap import count_late as _count_late_seq

HAVE_NUMPY = importlib.util.find_spec("numpy") is not None
"""numpy is the arrow extra's: without it an unsorted run's lateness is counted in Python."""
_np: ModuleType | None = importlib.import_module("numpy") if HAVE_NUMPY else None

Buffer = bytes | bytearray | memoryview

HEADER_SIZE = 61
"""Bytes in a v2 batch header (Kafka's RECORD_BATCH_OVERHEAD)."""
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes not counted by batchLength."""
MAGIC = 2
NO_TIMESTAMP = -1

# Field offsets inside the header.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

MAX_UNCOMPRESSED_BYTES = 256 * 1024 * 1024
"""The most a compressed batch may inflate to; beyond it the batch is corrupt.

Kafka streams records out of a compressed batch; this codec inflates the whole
blob, so a few kilobytes of zstd that claim gigabytes must be refused before
they are inflated (see codecs.decompress). Legitimate batches are far smaller:
Kafka's max.message.bytes (about 1 MiB) compressed at even 100:1.
"""

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies (batchLength excludes the first 12)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


@dataclass(slots=True)
class Record:
    """One record as a reader sees it (absolute offset, effective timestamp)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


class RecordLike(Protocol):
    """What :func:`build_batch` reads from each record (offsets are positional)."""

    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


class BatchScan(NamedTuple):
    """What the append path needs to know about one batch, from one pass.

    ``min_timestamp``/``max_timestamp`` are the records' effective timestamps
    (under LogAppendTime both are the header's maxTimestamp); for an empty batch
    both are -1. ``offset_delta_of_max`` is the delta of the first record whose
    timestamp equals the max (0 under LogAppendTime, as Kafka's
    ``offsetOfMaxTimestamp`` answers the base offset).

    ``late``/``max_lateness`` are the batch's disorder, from the same walk, exact: how
    many records have a timestamp below the largest one before them (in the batch, and
    the ``running`` max the caller passed for the records before the batch), and the
    largest such gap.
    """

    header: BatchHeader
    min_timestamp: int
    max_timestamp: int
    offset_delta_of_max: int
    late: int = 0
    max_lateness: int = 0


# ---------------------------------------------------------------- header level


def parse_header(buf: Buffer, pos: int = 0, *, require_body: bool = True) -> BatchHeader:
    """Parse the header at ``pos``.

    Raises CorruptRecordError when fewer than 61 bytes remain, magic is not 2, the
    length is smaller than a header, or (with ``require_body``, the default) the
    batch does not fit in ``buf``. ``require_body=False`` lets a caller that read
    just the 61 header bytes from a file parse them.
    """
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch header at {pos} needs {HEADER_SIZE} bytes, {max(0, len(buf) - pos)} remain"
        )
    h = BatchHeader._make(HEADER_STRUCT.unpack_from(buf, pos))
    if h.magic != MAGIC:
        raise CorruptRecordError(f"batch at {pos} has magic {h.magic}, only magic 2 is supported")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch at {pos} has length {h.batch_length}, below a header")
    if require_body and pos + h.batch_length + LOG_OVERHEAD > len(buf):
        raise CorruptRecordError(
            f"batch at {pos} declares {h.batch_length + LOG_OVERHEAD} bytes, "
            f"{len(buf) - pos} remain"
        )
    return h


def iter_batches(
    buf: Buffer, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each whole batch in ``buf[pos:end]``.

    Stops silently at a torn trailing batch (fewer bytes than its header or its
    declared length), as Kafka's ``FileLogInputStream`` does. A batch whose
    header is invalid (magic, length below a header) raises CorruptRecordError:
    that is corruption, not a torn write. CRCs are not checked (see crc_ok).
    """
    if pos < 0:
        raise ValueError(f"position {pos} is negative")  # struct would count from the end
    stop = len(buf) if end is None else min(end, len(buf))
    unpack_from = HEADER_STRUCT.unpack_from
    make = BatchHeader._make
    while stop - pos >= HEADER_SIZE:
        h = make(unpack_from(buf, pos))
        if h.magic != MAGIC:
            raise CorruptRecordError(f"batch at {pos} has magic {h.magic}, only magic 2 is supported")
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch at {pos} has length {h.batch_length}, below a header")
        size = h.batch_length + LOG_OVERHEAD
        if pos + size > stop:
            return
        yield pos, h
        pos += size


def crc_ok(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    """True when the stored CRC-32C matches attributes..end of the batch at ``pos``."""
    end = pos + header.batch_length + LOG_OVERHEAD
    if end > len(buf):
        return False
    return _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]) == header.crc


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of attributes..end for the batch of ``size`` bytes at ``pos``."""
    return int(_crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]))


# ---------------------------------------------------------------- in-place rewrites


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Write baseOffset (outside the CRC, so the CRC stays valid)."""
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Write partitionLeaderEpoch (outside the CRC)."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: bytearray | memoryview, pos: int, ts: int, timestamp_type: int
) -> bool:
    """Set the timestamp-type bit and maxTimestamp; recompute the CRC if either changed.

    Mirrors Kafka's ``DefaultRecordBatch.setMaxTimestamp``: the CreateTime path
    passes the records' true max (fixing a wrong producer value), LogAppendTime
    passes the broker's clock. Returns True when the batch bytes changed.
    """
    attrs = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    current = _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
    if timestamp_type == LOG_APPEND_TIME:
        new_attrs = attrs | TIMESTAMP_TYPE_MASK
    elif timestamp_type == CREATE_TIME:
        new_attrs = attrs & ~TIMESTAMP_TYPE_MASK
    else:
        raise ValueError(f"timestamp type {timestamp_type} is neither 0 nor 1")
    if new_attrs == attrs and current == ts:
        return False
    size = _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, new_attrs)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))
    return True


# ---------------------------------------------------------------- records


_NO_COPY_BYTES = 64 * 1024
"""A records region at least this large is read in place from the ``bytes`` a view
points into (finding where costs a few µs), rather than copied."""


def _offset_in_bytes(view: memoryview) -> int | None:
    """Where ``view`` starts inside the ``bytes`` object it is a slice of, or None when it
    is not a plain byte slice of a ``bytes`` object (a Produce payload is a view of
    its request frame, so the record walk can read the frame itself, uncopied)."""
    obj = view.obj
    if not isinstance(obj, bytes) or view.format != "B" or not view.c_contiguous:
        return None
    try:
        off = _buffer_address(view) - _buffer_address(obj)
    except (OSError, ValueError, AttributeError):  # no CPython buffer API: copy instead
        return None
    if off < 0 or off + view.nbytes > len(obj):
        return None
    return off


def _buffer_address(obj: object) -> int:
    """The address of ``obj``'s bytes, through CPython's buffer protocol (ctypes, a
    ~2 ms import, where NumPy would cost the broker 0.14 s and 15 MiB)."""
    import ctypes

    buf = _py_buffer_type()()
    ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(obj), ctypes.byref(buf), 0)
    try:
        return int(buf.buf or 0)
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(buf))


_PY_BUFFER: list[type] = []


def _py_buffer_type() -> type:
    """CPython's ``Py_buffer`` struct as a ctypes Structure (made once)."""
    if not _PY_BUFFER:
        import ctypes

        class PyBuffer(ctypes.Structure):
            _fields_ = [
                ("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p),
            ]

        _PY_BUFFER.append(PyBuffer)
    return _PY_BUFFER[0]


def _records_data(
    buf: Buffer, pos: int, h: BatchHeader, max_size: int = MAX_UNCOMPRESSED_BYTES
) -> tuple[Buffer, int, int]:
    """The records region of the batch: (data, start, end), decompressed if needed.

    An uncompressed region inside a memoryview (a Produce payload is a view of its
    request frame) is read in place from that frame when it is large (see
    :data:`_NO_COPY_BYTES`), else copied to ``bytes`` once: the record walk takes strided
    columns, which bytes slice about ten times faster than a memoryview's
    ``tobytes`` does (3 vs 38 µs for a 5,000-record column here), and indexes single
    bytes, also faster on bytes. The copy is one memcpy (~12 µs for 0.5 MiB).
    """
    start = pos + HEADER_SIZE
    end = pos + h.batch_length + LOG_OVERHEAD
    codec = h.attributes & COMPRESSION_MASK
    if codec == 0:
        if isinstance(buf, memoryview):
            base = _offset_in_bytes(buf) if end - start >= _NO_COPY_BYTES else None
            frame = buf.obj
            if base is not None and isinstance(frame, bytes):
                return frame, base + start, base + end
            return buf[start:end].tobytes(), 0, end - start
        return buf, start, end
    if codec > 4:
        raise UnsupportedCompressionError(f"batch at {pos} uses compression codec {codec}")
    data = codecs.decompress(codec, memoryview(buf)[start:end], max_size)
    return data, 0, len(data)


def _decode_scalar(
    data: bytes, p: int, end: int, i0: int, n: int, base_offset: int, base_ts: int,
    lat: int | None, out: list[Record],
) -> int:
    """Parse records i0..i0+n-1 from p into ``out``; return the position after them.

    ``lat`` is the LogAppendTime every record reports, or None for CreateTime.
    Raises CorruptRecordError on any structural error, including a record whose
    body length does not match its fields. One- and two-byte varints are decoded
    inline, as in _scan_scalar.
    """
    append = out.append
    read_varint = _read_varint
    i = i0
    try:
        for i in range(i0, i0 + n):
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                u = (b & 0x7F) | (data[p + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                length, p = read_varint(data, p, end)
            body_end = p + length
            if length < 1 or body_end > end:
                raise CorruptRecordError(f"record {i} length {length} does not fit the batch")
            b = data[p + 1]
            if b < 0x80:
                td = (b >> 1) ^ -(b & 1)
                p += 2
            elif data[p + 2] < 0x80:
                u = (b & 0x7F) | (data[p + 2] << 7)
                td = (u >> 1) ^ -(u & 1)
                p += 3
            else:
                td, p = _read_varlong(data, p + 1, body_end)
            b = data[p]
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                u = (b & 0x7F) | (data[p + 1] << 7)
                od = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                od, p = read_varint(data, p, body_end)
            b = data[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                u = (b & 0x7F) | (data[p + 1] << 7)
                klen = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                klen, p = read_varint(data, p, body_end)
            key: bytes | None = None
            if klen >= 0:
                key = data[p : p + klen]
                p += klen
            b = data[p]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                u = (b & 0x7F) | (data[p + 1] << 7)
                vlen = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                vlen, p = read_varint(data, p, body_end)
            value: bytes | None = None
            if vlen >= 0:
                value = data[p : p + vlen]
                p += vlen
            headers: list[tuple[str, bytes | None]] = []
            if data[p] == 0:
                p += 1
            else:
                nh, p = read_varint(data, p, body_end)
                if nh < 0:
                    raise CorruptRecordError(f"record {i} has a negative header count {nh}")
                for _h in range(nh):
                    hk, p = read_varint(data, p, body_end)
                    if hk < 0 or p + hk > body_end:
                        raise CorruptRecordError(
                            f"record {i} header key length {hk} does not fit the record")
                    hkey = data[p : p + hk].decode("utf-8", errors="replace")
                    p += hk
                    hv, p = read_varint(data, p, body_end)
                    hval: bytes | None = None
                    if hv >= 0:
                        hval = data[p : p + hv]
                        p += hv
                    if p > body_end:
                        raise CorruptRecordError(f"record {i} header overruns the record")
                    headers.append((hkey, hval))
            if p != body_end:
                raise CorruptRecordError(
                    f"record {i} body is {length} bytes but its fields end at {p - body_end:+d}"
                )
            append(Record(base_offset + od, base_ts + td if lat is None else lat, key, value,
                          headers))
    except IndexError:
        raise CorruptRecordError(f"record {i} runs past the end of the records") from None
    return p


def _decode_run(
    data: bytes, p: int, lay: _Layout, k: int, i0: int, base_offset: int, base_ts: int,
    lat: int | None,
) -> list[Record]:
    """Records of a proven same-layout run (see _scan), built column by column."""
    size = lay.size
    span = k * size  # an empty field may sit at the record's end: count from its own start
    if lat is None:
        key, lane, half = _run_keys(data, p, size, lay.ts_off, lay.ts_width, k)
        timestamps: Iterable[int] = _lanes_list(key, k, lane, base_ts - half)
    else:
        timestamps = repeat(lat, k)
    if _run_offsets_ok(data, p, lay, k, i0):
        offsets: Iterable[int] = range(base_offset + i0, base_offset + i0 + k)
    else:
        key, lane, half = _run_keys(data, p, size, lay.od_off, lay.od_width, k)
        offsets = _lanes_list(key, k, lane, base_offset - half)
    koff, klen = lay.key
    keys: Iterable[bytes | None] = (
        [data[x : x + klen] for x in range(p + koff, p + koff + span, size)] if klen >= 0 else repeat(None, k)
    )
    voff, vlen = lay.value
    values: Iterable[bytes | None] = (
        [data[x : x + vlen] for x in range(p + voff, p + voff + span, size)] if vlen >= 0 else repeat(None, k)
    )
    headers: list[list[tuple[str, bytes | None]]]
    if not lay.headers:
        headers = [[] for _ in range(k)]
    else:
        columns = []
        for hkoff, hklen, hvoff, hvlen in lay.headers:
            hkeys = [data[x : x + hklen].decode("utf-8", errors="replace")
                     for x in range(p + hkoff, p + hkoff + span, size)]
            hvals: Iterable[bytes | None] = (
                [data[x : x + hvlen] for x in range(p + hvoff, p + hvoff + span, size)]
                if hvlen >= 0 else repeat(None, k)
            )
            columns.append(zip(hkeys, hvals, strict=False))
        headers = [list(pairs) for pairs in zip(*columns, strict=False)]
    return list(map(Record, offsets, timestamps, keys, values, headers))


def _decode_records(
    data: Buffer, p: int, end: int, count: int, base_offset: int, base_ts: int, lat: int | None,
    fast: bool = True,
) -> list[Record]:
    """Fully parse ``count`` records into Record objects (see _decode_scalar).

    Runs of same-layout records are decoded column-wise, as _scan walks them;
    everything else record by record (``fast=False``: everything). Bytes left
    over after the last record are CorruptRecordError.
    """
    if not isinstance(data, bytes):
        # One copy of the region makes every key/value slice a bytes object.
        data = bytes(data[p:end])
        end -= p
        p = 0
    out: list[Record] = []
    i = 0
    stretch = 32
    while i < count:
        left = count - i
        if fast and left >= _MIN_RUN:
            k = 1
            if _next_has_same_size(data, p, end):
                lay = _layout(data, p, end)
                kmax = min(left, (end - p) // lay.size)
                k = _run_length(data, p, lay, kmax) if kmax >= _MIN_RUN else 1
                if k >= _MIN_RUN and lay.ts_width <= 8 and lay.od_width <= 4:
                    out.extend(_decode_run(data, p, lay, k, i, base_offset, base_ts, lat))
                    p += k * lay.size
                    i += k
                    stretch = 32
                    continue
            n = min(left, max(k, stretch))
            stretch = min(stretch * 2, 4096)
        else:
            n = left
        p = _decode_scalar(data, p, end, i, n, base_offset, base_ts, lat, out)
        i += n
    if p != end:
        raise CorruptRecordError(f"{end - p} bytes remain after the batch's {count} records")
    return out


def decode_batch(buf: Buffer, pos: int = 0) -> list[Record]:
    """Decode every record of the batch at ``pos`` (any codec). CRC is not checked.

    Offsets are baseOffset + offsetDelta. Timestamps are baseTimestamp + delta
    under CreateTime and the batch maxTimestamp under LogAppendTime.
    """
    h = parse_header(buf, pos)
    if h.records_count < 0:
        raise CorruptRecordError(f"batch at {pos} has a negative record count")
    data, start, end = _records_data(buf, pos, h)
    lat = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
    return _decode_records(data, start, end, h.records_count, h.base_offset, h.base_timestamp, lat)


def record_timestamps(buf: Buffer, pos: int = 0) -> list[int]:
    """Each record's effective timestamp, in record order (see decode_batch)."""
    return [r.timestamp for r in decode_batch(buf, pos)]


# ---------------------------------------------------------------- building


_SMALL_UVARINTS: list[bytes] | None = None


def small_uvarints() -> list[bytes]:
    """Encodings of 0..16383 (every one- and two-byte varint), built on first use.

    Built whole, then published with one assignment, so a thread never sees a
    half-filled table.
    """
    global _SMALL_UVARINTS
    table = _SMALL_UVARINTS
    if table is None:
        table = [uvarint_bytes(v) for v in range(1 << 14)]
        _SMALL_UVARINTS = table
    return table


def encode_headers(headers: Sequence[tuple[str, bytes | str | None]]) -> bytearray:
    """A record's header section: the count, then each UTF-8 key and its value (a str
    value UTF-8 encoded, None written as length -1)."""
    out = bytearray()
    _encode_uvarint(2 * len(headers), out)
    for hkey, hval in headers:
        kb = hkey.encode("utf-8")
        _encode_uvarint(2 * len(kb), out)
        out += kb
        if hval is None:
            out.append(1)
        else:
            vb = hval.encode("utf-8") if isinstance(hval, str) else hval
            _encode_uvarint(2 * len(vb), out)
            out += vb
    return out


def _encode_records(
    records: Iterable[RecordLike],
) -> tuple[list[bytes | bytearray | memoryview], int, int, int]:
    """Encode records as byte pieces; returns (pieces, count, base timestamp, max timestamp).

    Varints below 16384 come from a table; everything is joined once by the caller.
    """
    small = small_uvarints()
    big = uvarint_bytes
    null = b"\x01"
    zero = b"\x00"
    pieces: list[bytes | bytearray | memoryview] = []
    extend = pieces.extend
    count = 0
    base_ts = NO_TIMESTAMP
    max_ts = NO_TIMESTAMP
    for i, r in enumerate(records):
        ts = r.timestamp
        if count == 0:
            base_ts = max_ts = ts
        elif ts > max_ts:
            max_ts = ts
        delta = ts - base_ts
        if not _INT64_MIN <= delta <= _INT64_MAX or not _INT64_MIN <= ts <= _INT64_MAX:
            raise InvalidRecordError(f"record {i} timestamp {ts} is out of the int64 delta range")
        zz = ((delta << 1) ^ (delta >> 63)) & 0xFFFFFFFFFFFFFFFF
        tsv = small[zz] if zz < 16384 else big(zz)
        odv = small[2 * i] if i < 8192 else big(2 * i)
        key = r.key
        value = r.value
        size = 1 + len(tsv) + len(odv)
        if key is None:
            kv = null
            size += 1
            key = b""
        else:
            k = 2 * len(key)
            kv = small[k] if k < 16384 else big(k)
            size += len(kv) + len(key)
        if value is None:
            vv = null
            size += 1
            value = b""
        else:
            v = 2 * len(value)
            vv = small[v] if v < 16384 else big(v)
            size += len(vv) + len(value)
        headers = r.headers
        if headers:
            hv: bytes | bytearray = encode_headers(headers)
        else:
            hv = zero
        size += len(hv)
        lv = small[2 * size] if size < 8192 else big(2 * size)
        extend((lv, zero, tsv, odv, kv, key, vv, value, hv))
        count += 1
    return pieces, count, base_ts, max_ts


class BatchOptions(TypedDict, total=False):
    """The header fields and codec settings of a batch being built (``build_batch``,
    ``storage.columnar.build_batch_columns``); defaults as in :func:`assemble_batch`."""

    base_offset: int
    compression: int
    timestamp_type: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    compression_level: int | None


def build_batch(records: Iterable[RecordLike], **options: Unpack[BatchOptions]) -> bytes:
    """Build one v2 batch; offset deltas are the records' positions (0..n-1).

    baseTimestamp is the first record's timestamp and maxTimestamp the largest
    (both -1 for no records), as Kafka's producer writes them. The requested codec
    is always applied, even when compressing does not shrink the records.
    """
    check_batch_options(options.get("compression", 0), options.get("timestamp_type", 0))
    pieces, count, base_ts, max_ts = _encode_records(records)
    return assemble_batch([b"".join(pieces)], count, base_ts, max_ts, **options)


def check_batch_options(compression: int, timestamp_type: int) -> None:
    """Refuse a codec outside 0..4 and a timestamp type other than 0/1 (before any work)."""
    if not 0 <= compression <= 4:
        raise UnsupportedCompressionError(f"compression codec {compression} is not one of 0..4")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"timestamp type {timestamp_type} is neither 0 nor 1")


def assemble_batch(
    parts: list[Buffer],
    count: int,
    base_ts: int,
    max_ts: int,
    *,
    base_offset: int = 0,
    compression: int = 0,
    timestamp_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Header + records: compress the encoded records (``parts``, concatenated), write
    the header, CRC-32C over attributes..end, one join. Shared by :func:`build_batch`
    and ``storage.columnar.build_batch_columns``; the requested codec is always
    applied, even when compressing does not shrink the records."""
    if count > _INT32_MAX:
        raise InvalidRecordError("too many records for one batch")
    if compression:
        parts = [codecs.compress(compression, b"".join(parts), compression_level)]
    attributes = compression
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    size = HEADER_SIZE + sum(len(p) for p in parts)
    if size - LOG_OVERHEAD > _INT32_MAX:
        raise InvalidRecordError("batch larger than 2 GiB")
    header = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        header, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0,
        attributes, count - 1, base_ts, max_ts, producer_id, producer_epoch, base_sequence, count,
    )
    crc = _crc32c.crc32c(memoryview(header)[ATTRIBUTES_OFFSET:])
    for p in parts:
        crc = _crc32c.crc32c(p, crc)
    _U32.pack_into(header, CRC_OFFSET, crc)
    return b"".join((header, *parts))


# ---------------------------------------------------------------- append path


# ---------------------------------------------------------------- the record walk
#
# Validation needs every record's timestamp and offset delta, and the Python
# loop (_scan_scalar) costs ~0.75 µs per record (~150 MB/s for 100-byte records).
# Most batches are made of long *runs* of records with identical layout: the same
# total size and the same bytes in every length field, so each field sits at the
# same position in each record and a field of all records of the run is one
# strided slice ``data[start::size]``, taken in C. The fast path:
#
# 1. parses one record in Python, noting where its varints are (its *layout*);
# 2. finds how many following records share that layout by comparing strided
#    columns (length-field bytes equal, timestamp/offset varints of the same
#    width; memcmp/isascii, a prefix search only where a run ends), galloping so
#    a short run costs little;
# 3. decodes the run's timestamp deltas as lanes of one big integer (SWAR with
#    Python ints: varint groups merged, zig-zag mapped to an order-preserving
#    key) and reduces them to min, max and the first index of the max in
#    O(log n) big-int operations;
# 4. checks the offset deltas by comparing columns with the canonical varint
#    bytes of i0..i0+k-1.
#
# The fast path never rejects anything: whenever it cannot prove a run valid
# (short run, wide varints, non-canonical offset varints), the scalar walk
# handles those records and is the one that raises. decode_batch uses the same
# runs (_decode_run) to build Records column by column.

_MIN_RUN = 40  # below this a run costs more than the per-record loop (measured)
HIGH_BIT = bytes(1 if b >= 0x80 else 0 for b in range(256))
_FLIP_HIGHBIT = bytes(b ^ 0x80 for b in range(256))
_NOT_EQUAL = [b"\x01" * v + b"\x00" + b"\x01" * (255 - v) for v in range(256)]
_EQ = 0
_CONT = 1
_TERM = 2
_LANE_BYTES = (1, 1, 2, 4, 4, 8, 8, 8, 8)  # by varint width 0..8


class _Layout(NamedTuple):
    size: int
    checks: tuple[tuple[int, int, bytes], ...]  # (offset in record, kind, byte for _EQ)
    ts_off: int
    ts_width: int
    od_off: int
    od_width: int
    key: tuple[int, int]  # (offset in record, length); length < 0 is null
    value: tuple[int, int]
    headers: tuple[tuple[int, int, int, int], ...]  # (key off, key len, value off, value len)


def _layout(data: Buffer, p: int, end: int) -> _Layout:
    """Parse the record at p, noting the position of each varint (raises if invalid)."""
    checks: list[tuple[int, int, bytes]] = []

    def eq(a: int, b: int) -> None:
        for q in range(a, b):
            checks.append((q - p, _EQ, bytes((data[q],))))

    length, q = _read_varint(data, p, end)
    body_end = q + length
    if length < 1 or body_end > end:
        raise CorruptRecordError(f"record length {length} does not fit the batch")
    eq(p, q)
    ts_at = q + 1
    _td, q = _read_varlong(data, ts_at, body_end)
    tw = q - ts_at
    for j in range(tw):
        checks.append((ts_at + j - p, _CONT if j < tw - 1 else _TERM, b""))
    od_at = q
    _od, q = _read_varint(data, od_at, body_end)
    ow = q - od_at
    for j in range(ow):
        checks.append((od_at + j - p, _CONT if j < ow - 1 else _TERM, b""))
    kv: list[tuple[int, int]] = []
    for _field in range(2):  # key, value
        a = q
        n, q = _read_varint(data, q, body_end)
        eq(a, q)
        kv.append((q - p, n))
        if n > 0:
            q += n
            if q > body_end:
                raise CorruptRecordError("record key or value overruns the record")
    headers: list[tuple[int, int, int, int]] = []
    a = q
    nh, q = _read_varint(data, q, body_end)
    eq(a, q)
    if nh < 0:
        raise CorruptRecordError(f"record has a negative header count {nh}")
    for _h in range(nh):
        a = q
        hk, q = _read_varint(data, q, body_end)
        eq(a, q)
        if hk < 0:
            raise CorruptRecordError(f"header key length {hk} is negative")
        hk_at = q
        q += hk
        a = q
        hv, q = _read_varint(data, q, body_end)
        eq(a, q)
        headers.append((hk_at - p, hk, q - p, hv))
        if hv > 0:
            q += hv
        if q > body_end:
            raise CorruptRecordError("header overruns the record")
    if q != body_end:
        raise CorruptRecordError(f"record body length {length} does not match its fields")
    return _Layout(body_end - p, tuple(checks), ts_at - p, tw, od_at - p, ow,
                   kv[0], kv[1], tuple(headers))


def column(data: Buffer | mmap.mmap, start: int, n: int, step: int) -> bytes:
    """Bytes data[start], data[start+step], ... (n of them), copied in C (shared by
    the codec's record walk and the segment's timestamp search)."""
    col = data[start : start + (n - 1) * step + 1 : step]
    return col.tobytes() if isinstance(col, memoryview) else bytes(col)


def _run_length(data: Buffer, p: int, lay: _Layout, kmax: int) -> int:
    """How many records from p (at most kmax, record 0 included) share ``lay``."""
    size = lay.size
    done = 1
    window = 256  # a first window this small costs about the same as one of 40
    while done < kmax:
        want = min(kmax - done, window)
        n = want
        base = p + done * size
        for off, kind, byte in lay.checks:
            col = column(data, base + off, n, size)
            # Fast whole-column checks first; the prefix search runs only at a run's end.
            if kind == _EQ:
                if col == byte * n:
                    continue
                bad = col.translate(_NOT_EQUAL[byte[0]]).find(1)
            elif kind == _CONT:
                flipped = col.translate(_FLIP_HIGHBIT)
                if flipped.isascii():
                    continue
                bad = flipped.translate(HIGH_BIT).find(1)
            else:
                if col.isascii():
                    continue
                bad = col.translate(HIGH_BIT).find(1)
            n = bad
            if n == 0:
                return done
        done += n
        if n < want:
            return done
        window *= 4
    return done


def _lane_ones(k: int, lane: int) -> int:
    return int.from_bytes((b"\x01" + bytes(lane - 1)) * k, "little")


def _lane_max(x: int, n: int, lane_bits: int, ones: int) -> int:
    """Largest lane of x (n lanes, each value below 2**(lane_bits - 1)).

    A tournament: the low half of the lanes against the high half, lane-wise,
    until one lane is left. (A | top) - B keeps each lane's top bit iff A >= B,
    and no borrow crosses lanes because every value is below the top bit.
    """
    full = (1 << lane_bits) - 1
    top_shift = lane_bits - 1
    while n > 1:
        h = n >> 1
        hb = h * lane_bits
        mask = (1 << hb) - 1
        a = x & mask
        b = (x >> hb) & mask
        extra = x >> (2 * hb)
        high = (ones & mask) << top_shift
        ge = (((a | high) - b) & high) >> top_shift
        m = ge * full
        x = (a & m) | (b & (mask ^ m)) | (extra << hb)
        n -= h
    return x


_LANE_TYPECODES = {array(t).itemsize: t for t in "QLIHB"}  # lane bytes -> unsigned typecode


def _run_keys(data: Buffer, p: int, size: int, off: int, width: int, k: int) -> tuple[int, int, int]:
    """Decode k zig-zag varints of ``width`` bytes at data[p + off + i*size] into lanes.

    Returns (keys, lane bytes, half range): lane i of ``keys`` holds the value
    plus ``half range``, so unsigned lane order is signed value order.
    """
    lane = _LANE_BYTES[width]
    start = p + off
    if lane == 1:
        v = int.from_bytes(column(data, start, k, size), "little")
        ones = _lane_ones(k, 1)
    else:
        lanes = bytearray(k * lane)
        for j in range(width):
            lanes[j::lane] = column(data, start + j, k, size)
        x = int.from_bytes(lanes, "little")
        ones = _lane_ones(k, lane)
        # Merge the 7-bit groups: byte j (at bit 8j of its lane) lands at bit 7j.
        v = 0
        for j in range(width):
            v |= (x >> j) & (ones * (0x7F << (7 * j)))
    half_range = 1 << (7 * width - 1)
    sign = v & ones
    half = (v >> 1) & (ones * (half_range - 1))
    # Zig-zag decode shifted by half_range: odd z -> H-1-z//2, even z -> H+z//2.
    key = (half ^ (sign * (half_range - 1))) | ((ones ^ sign) * half_range)
    return key, lane, half_range


def _lanes_list(key: int, k: int, lane: int, add: int) -> list[int]:
    """The k lanes of ``key`` as Python ints, each plus ``add``."""
    arr = array(_LANE_TYPECODES[lane], key.to_bytes(k * lane, "little"))
    if sys.byteorder != "little":
        arr.byteswap()
    return list(map(add.__add__, arr))


def _run_timestamps(data: Buffer, p: int, lay: _Layout, k: int
                    ) -> tuple[int, int, int, bool, int, int, int]:
    """(min delta, max delta, index of first max, non-decreasing, lanes, lane bytes,
    half range) over the run's timestamp varints (the last three as _run_keys)."""
    key, lane, half_range = _run_keys(data, p, lay.size, lay.ts_off, lay.ts_width, k)
    lane_bits = 8 * lane
    ones = _lane_ones(k, lane)
    high = ones << (lane_bits - 1)
    # Producers mostly stamp records in order: when every lane is >= the one before
    # it (lane i+1 against lane i with _lane_max's borrow-free compare, all at once),
    # min and max are the first and last lanes and the two tournaments are skipped.
    rest = (k - 1) * lane_bits
    below_last = (1 << rest) - 1
    tops = high & below_last
    ordered = (((key >> lane_bits) | tops) - (key & below_last)) & tops == tops
    if ordered:
        mx = key >> rest
        mn = key & ((1 << lane_bits) - 1)
    else:
        mx = _lane_max(key, k, lane_bits, ones)
        top = (1 << (7 * lay.ts_width)) - 1
        mn = top - _lane_max(ones * top - key, k, lane_bits, ones)
    # First lane equal to mx: zero lanes of key ^ mx stay below the top bit after -1.
    z = key ^ (ones * mx)
    equal = high ^ (((z | high) - ones) & high)
    first = ((equal & -equal).bit_length() - 1) // lane_bits
    return mn - half_range, mx - half_range, first, ordered, key, lane, half_range


def _run_late(key: int, k: int, lane: int, half_range: int, lm: int) -> tuple[int, int]:
    """(late records, largest lateness) of a run whose k timestamp deltas are the lanes
    of ``key`` (each plus ``half_range``), after records whose largest delta is ``lm``:
    lane i is late when below max(lm, lanes 0..i-1). Vectorised with numpy (a
    prefix maximum); in Python without it."""
    if _np is not None and -(1 << 62) < lm < (1 << 62):
        v = _np.frombuffer(key.to_bytes(k * lane, "little"), dtype=f"<u{lane}")
        d = v.astype(_np.int64) - half_range  # |delta| < 2**55: no overflow
        before = _np.maximum.accumulate(d)
        before[1:] = before[:-1]
        before[0] = lm
        _np.maximum(before, lm, out=before)
        gap = before - d
        late = int(_np.count_nonzero(gap > 0))
        return late, (int(gap.max()) if late else 0)
    return _count_late_seq(_lanes_list(key, k, lane, -half_range), lm)


_OFFSET_WIDTH_START = (0, 0, 64, 8192, 1 << 20, 1 << 27)  # first delta needing w bytes
_OFFSET_WIDTH_END = (0, 64, 8192, 1 << 20, 1 << 27, 1 << 31)
_offset_columns: dict[int, list[bytes]] = {}


def _expected_offset_columns(width: int, upto: int) -> list[bytes]:
    """Canonical varint bytes of offset deltas [start(width), upto), one column per byte."""
    cols = _offset_columns.get(width)
    start = _OFFSET_WIDTH_START[width]
    if cols is None or start + len(cols[0]) < upto:
        stop = min(_OFFSET_WIDTH_END[width], max(upto, 2 * (start + (len(cols[0]) if cols else 0)), 64))
        zz = [2 * i for i in range(start, stop)]
        cols = [
            bytes(((z >> (7 * j)) & 0x7F) | (0x80 if j < width - 1 else 0) for z in zz)
            for j in range(width)
        ]
        _offset_columns[width] = cols
    return cols


def _run_offsets_ok(data: Buffer, p: int, lay: _Layout, k: int, i0: int) -> bool:
    """True when the run's offset deltas are exactly i0..i0+k-1, canonically encoded."""
    w = lay.od_width
    if w > 5 or i0 < _OFFSET_WIDTH_START[w] or i0 + k > _OFFSET_WIDTH_END[w]:
        return False
    cols = _expected_offset_columns(w, i0 + k)
    a = i0 - _OFFSET_WIDTH_START[w]
    start = p + lay.od_off
    for j in range(w):
        if column(data, start + j, k, lay.size) != cols[j][a : a + k]:
            return False
    return True


def _scan_scalar(
    data: Buffer, p: int, end: int, i0: int, n: int, check_offsets: bool,
    mx: int = -(1 << 63), lm: int = -(1 << 63),
) -> tuple[int, int, int, int, int, int]:
    """Walk records i0..i0+n-1 from p; return (p after, min delta, max delta, first max
    index, late records, max lateness).

    ``mx`` is the largest delta before record i0 (the returned max includes it);
    ``lm`` (at least ``mx``) is the running max lateness is measured against, which
    may include records before the batch. A record below it is late, counted in the
    branch the max test already takes, so in-order records pay nothing for it: a
    record above ``lm`` is above ``mx`` too.

    Validates the whole structure (as _decode_records) without making objects.
    With ``check_offsets``, offset delta i must equal i (InvalidRecordError).
    One- and two-byte varints are decoded inline (the common case), repeated per
    field on purpose: a helper call per field is the walk's main cost (measured by
    bench/bench_records.py, commits 4024546, dadac1f, 75ac146; its row "varint decode:
    a call per field vs inline" shows ~3x per field). Longer varints go to
    storage.primitives. Reads may
    run past a record's end, which the ``p != body_end`` check then rejects, and
    past the buffer, which the IndexError handler turns into CorruptRecordError.
    """
    read_varint = _read_varint
    read_varlong = _read_varlong
    mn = _INT64_MAX
    imx = i0
    i = i0
    late = 0
    worst = 0
    if lm < mx:
        lm = mx
    try:
        for i in range(i0, i0 + n):
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                c = data[p + 1]
                if c < 0x80:
                    u = (b & 0x7F) | (c << 7)
                    length = (u >> 1) ^ -(u & 1)
                    p += 2
                else:
                    length, p = read_varint(data, p, end)
            body_end = p + length
            if length < 1 or body_end > end:
                raise CorruptRecordError(f"record {i} length {length} does not fit the batch")
            b = data[p + 1]
            if b < 0x80:
                td = (b >> 1) ^ -(b & 1)
                p += 2
            else:
                c = data[p + 2]
                if c < 0x80:
                    u = (b & 0x7F) | (c << 7)
                    td = (u >> 1) ^ -(u & 1)
                    p += 3
                else:
                    td, p = read_varlong(data, p + 1, body_end)
            if td < mn:
                mn = td
            if td > lm:
                lm = mx = td
                imx = i
            elif td < lm:
                late += 1
                if lm - td > worst:
                    worst = lm - td
                if td > mx:
                    mx = td
                    imx = i
            elif td > mx:
                mx = td
                imx = i
            b = data[p]
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                c = data[p + 1]
                if c < 0x80:
                    u = (b & 0x7F) | (c << 7)
                    od = (u >> 1) ^ -(u & 1)
                    p += 2
                else:
                    od, p = read_varint(data, p, body_end)
            if od != i and check_offsets:
                raise InvalidRecordError(f"record {i} has offset delta {od}, expected {i}")
            # Key, then value (unrolled): negative lengths mean null.
            b = data[p]
            if b < 0x80:
                p += 1 if b & 1 else 1 + (b >> 1)
            else:
                c = data[p + 1]
                if c < 0x80:
                    p += 2 if b & 1 else 2 + (((b & 0x7F) | (c << 7)) >> 1)
                else:
                    klen, p = read_varint(data, p, body_end)
                    if klen > 0:
                        p += klen
            b = data[p]
            if b < 0x80:
                p += 1 if b & 1 else 1 + (b >> 1)
            else:
                c = data[p + 1]
                if c < 0x80:
                    p += 2 if b & 1 else 2 + (((b & 0x7F) | (c << 7)) >> 1)
                else:
                    vlen, p = read_varint(data, p, body_end)
                    if vlen > 0:
                        p += vlen
            if data[p] == 0:
                p += 1
            else:
                nh, p = read_varint(data, p, body_end)
                if nh < 0:
                    raise CorruptRecordError(f"record {i} has a negative header count {nh}")
                for _h in range(nh):
                    hk, p = read_varint(data, p, body_end)
                    if hk < 0:
                        raise CorruptRecordError(f"record {i} header key length {hk} is negative")
                    p += hk
                    hv, p = read_varint(data, p, body_end)
                    if hv > 0:
                        p += hv
                    if p > body_end:
                        raise CorruptRecordError(f"record {i} header overruns the record")
            if p != body_end:
                raise CorruptRecordError(
                    f"record {i} body length {length} does not match its fields"
                )
    except IndexError:
        raise CorruptRecordError(f"record {i} runs past the end of the records") from None
    return p, mn, mx, imx, late, worst


def _next_has_same_size(data: Buffer, p: int, end: int) -> bool:
    """Cheap pre-check before _layout: does the record after p start with p's length bytes?

    In batches whose record sizes vary this is almost always False, which skips
    the costlier layout parse and run search.
    """
    if p >= end:
        return False
    b = data[p]
    if b < 0x80:
        n = 1
        length = (b >> 1) ^ -(b & 1)
    elif p + 1 < end and data[p + 1] < 0x80:
        n = 2
        u = (b & 0x7F) | (data[p + 1] << 7)
        length = (u >> 1) ^ -(u & 1)
    else:
        return True  # unusual length encoding: let _layout decide
    q = p + n + length
    return length > 0 and q + n <= end and data[q : q + n] == data[p : p + n]


def _scan(
    data: Buffer, p: int, end: int, count: int, check_offsets: bool, fast: bool = True
) -> tuple[int, int, int]:
    """Walk ``count`` records; return (min ts delta, max ts delta, index of first max).

    Every record is validated structurally and the records must end exactly at
    ``end``. ``fast=False`` forces the scalar walk (the tests compare the two).
    """
    return _scan_disorder(data, p, end, count, check_offsets, fast)[:3]  # type: ignore[return-value]


def _scan_disorder(
    data: Buffer, p: int, end: int, count: int, check_offsets: bool, fast: bool = True,
    running: int = _INT64_MIN,
) -> tuple[int, int, int, int, int]:
    """_scan plus the batch's disorder: (min, max, first max index, late, max
    lateness), where a record is late when its delta is below the largest delta before
    it, ``running`` (the largest delta of the records before the batch) included.
    Exact: a run in order that starts at or above the running max or ends below it is
    late as a whole or not at all; any other run is counted from its lanes
    (_run_late)."""
    if count == 0:
        if p != end:
            raise CorruptRecordError(f"{end - p} bytes remain after the batch's 0 records")
        return 0, 0, 0, 0, 0
    mn = _INT64_MAX
    mx = _INT64_MIN
    lm = running  # max(running, mx): what lateness is measured against
    imx = 0
    i = 0
    late = 0
    worst = 0
    stretch = 32
    while i < count:
        left = count - i
        if fast and left >= _MIN_RUN:
            k = 1
            if _next_has_same_size(data, p, end):
                lay = _layout(data, p, end)
                kmax = min(left, (end - p) // lay.size)
                k = _run_length(data, p, lay, kmax) if kmax >= _MIN_RUN else 1
                if k >= _MIN_RUN and lay.ts_width <= 8 and (
                    not check_offsets or _run_offsets_ok(data, p, lay, k, i)
                ):
                    rmn, rmx, ridx, ordered, key, lane, half = _run_timestamps(data, p, lay, k)
                    if rmx < lm:  # the whole run lies below what came before
                        late += k
                        if lm - rmn > worst:
                            worst = lm - rmn
                    elif not ordered or rmn < lm:
                        rlate, rworst = _run_late(key, k, lane, half, lm)
                        late += rlate
                        if rworst > worst:
                            worst = rworst
                    if rmn < mn:
                        mn = rmn
                    if rmx > mx:
                        mx = rmx
                        imx = i + ridx
                        if rmx > lm:
                            lm = rmx
                    p += k * lay.size
                    i += k
                    stretch = 32
                    continue
            n = min(left, max(k, stretch))
            stretch = min(stretch * 2, 4096)
        else:
            n = left
        p, smn, smx, simx, slate, sworst = _scan_scalar(data, p, end, i, n, check_offsets,
                                                        mx, lm)
        if smn < mn:
            mn = smn
        if smx > mx:
            mx = smx
            imx = simx
            if smx > lm:
                lm = smx
        late += slate
        if sworst > worst:
            worst = sworst
        i += n
    if p != end:
        raise CorruptRecordError(f"{end - p} bytes remain after the batch's {count} records")
    return mn, mx, imx, late, worst


def _running_delta(running: int, base_timestamp: int) -> int:
    """The running max as a delta from the batch's base timestamp, within int64."""
    return min(max(running - base_timestamp, _INT64_MIN), _INT64_MAX)


def scan_timestamps(buf: Buffer, pos: int = 0, header: BatchHeader | None = None,
                    running: int = _INT64_MIN) -> BatchScan:
    """The records' true min/max timestamps and the offset delta of the first max;
    late records counted against ``running``, the largest timestamp before the batch
    (BatchScan).

    Decompresses compressed batches. Under LogAppendTime, min = max = the header's
    maxTimestamp and the delta is 0, with no record walk. Structural errors raise
    CorruptRecordError.
    """
    h = parse_header(buf, pos) if header is None else header
    if h.attributes & TIMESTAMP_TYPE_MASK:
        return BatchScan(h, h.max_timestamp, h.max_timestamp, 0)
    if h.records_count <= 0:
        return BatchScan(h, NO_TIMESTAMP, NO_TIMESTAMP, 0)
    data, start, end = _records_data(buf, pos, h)
    bts = h.base_timestamp
    mn, mx, imx, late, worst = _scan_disorder(data, start, end, h.records_count, False,
                                              running=_running_delta(running, bts))
    return BatchScan(h, bts + mn, bts + mx, imx, late, worst)


def count_late(buf: Buffer, pos: int, h: BatchHeader, running: int) -> tuple[int, int, int]:
    """(late records, largest lateness, running max after) of the batch at ``pos``,
    whose records are compared with ``running`` (the largest timestamp before the
    batch) and with each other: the per-record walk, started at that max."""
    n = h.records_count
    if n <= 0 or h.attributes & CONTROL_MASK:
        return 0, 0, running
    if h.attributes & TIMESTAMP_TYPE_MASK:
        ts = h.max_timestamp
        return (n, running - ts, running) if ts < running else (0, 0, ts)
    data, start, end = _records_data(buf, pos, h)
    bts = h.base_timestamp
    _, _, mx, _, late, worst = _scan_scalar(data, start, end, 0, n, False,
                                            max(running - bts, _INT64_MIN))
    return late, worst, max(running, bts + mx)


def validate_client_batch(
    buf: Buffer, pos: int = 0, end: int | None = None, *,
    max_uncompressed_bytes: int = MAX_UNCOMPRESSED_BYTES, running: int = _INT64_MIN,
) -> BatchScan:
    """Validate a Produce'd partition payload as Kafka's LogValidator does for a client.

    ``buf[pos:end]`` must hold exactly one v2 batch. Raises CorruptRecordError for
    a bad header, size or CRC (CORRUPT_MESSAGE) and InvalidRecordError for the
    append rules (INVALID_RECORD): more or fewer than one batch, baseOffset != 0,
    count != lastOffsetDelta + 1 or count <= 0, a control batch, an idempotent
    batch without a sequence, offset deltas not 0..n-1, or records that do not
    parse exactly to the batch end. A compressed batch that would inflate beyond
    ``max_uncompressed_bytes`` is CorruptRecordError, refused before inflating.
    Returns the timestamp scan (see scan_timestamps; late records counted against
    ``running``, the partition's largest timestamp before the batch).
    """
    stop = len(buf) if end is None else end
    # Not one magic-2 batch at all is INVALID_RECORD in Kafka (ProduceRequest
    # validation), not a retriable CORRUPT_MESSAGE.
    if stop - pos < HEADER_SIZE:
        raise InvalidRecordError(f"produce payload of {stop - pos} bytes is shorter than a batch header")
    if buf[pos + MAGIC_OFFSET] != MAGIC:
        raise InvalidRecordError(
            f"produce payload has magic {buf[pos + MAGIC_OFFSET]}, only magic 2 batches are accepted")
    h = parse_header(buf, pos, require_body=False)
    size = h.batch_length + LOG_OVERHEAD
    if pos + size > stop:
        raise CorruptRecordError(f"batch declares {size} bytes, the payload has {stop - pos}")
    if pos + size != stop:
        raise InvalidRecordError("a produce payload must hold exactly one record batch")
    if not crc_ok(buf, pos, h):
        raise CorruptRecordError("batch CRC-32C does not match its contents")
    if h.base_offset != 0:
        raise InvalidRecordError(f"client batch has base offset {h.base_offset}, expected 0")
    if h.records_count <= 0 or h.records_count != h.last_offset_delta + 1:
        raise InvalidRecordError(
            f"batch record count {h.records_count} does not match last offset delta "
            f"{h.last_offset_delta}"
        )
    if h.attributes & CONTROL_MASK:
        raise InvalidRecordError("clients may not append control batches")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecordError("idempotent batch has no base sequence")
    if h.attributes & COMPRESSION_MASK > 4:
        raise UnsupportedCompressionError(f"batch uses compression codec {h.compression}")
    data, start, rend = _records_data(buf, pos, h, max_uncompressed_bytes)
    bts = h.base_timestamp
    try:
        mn, mx, imx, late, worst = _scan_disorder(data, start, rend, h.records_count, True,
                                                  running=_running_delta(running, bts))
    except CorruptRecordError as exc:
        # Inside a batch whose CRC holds, a record that does not parse is Kafka's
        # InvalidRecordException (INVALID_RECORD), not a transmission error.
        raise InvalidRecordError(str(exc)) from exc
    if h.attributes & TIMESTAMP_TYPE_MASK:
        return BatchScan(h, h.max_timestamp, h.max_timestamp, 0)
    return BatchScan(h, bts + mn, bts + mx, imx, late, worst)


def timestamp_errors(
    buf: Buffer, pos: int, now_ms: int, before_max_ms: int, after_max_ms: int
) -> list[tuple[int, str]]:
    """Kafka's per-record INVALID_TIMESTAMP errors for a CreateTime batch.

    Returns ``(batch_index, message)`` for every record with a timestamp other
    than -1 outside [now - before, now + after]. Only the error path calls this,
    after BatchScan's min/max showed a violation, so a full decode is fine here.
    """
    lo = now_ms - before_max_ms
    hi = now_ms + after_max_ms
    out: list[tuple[int, str]] = []
    for i, r in enumerate(decode_batch(buf, pos)):
        ts = r.timestamp
        if ts != NO_TIMESTAMP and (now_ms - ts > before_max_ms or ts - now_ms > after_max_ms):
            out.append(
                (
                    i,
                    f"Timestamp {ts} of message with offset {r.offset} is out of range. "
                    f"The timestamp should be within [{lo}, {hi}]",
                )
            )
    return out


# ---------------------------------------------------------------- control batches

ABORT_MARKER = 0
COMMIT_MARKER = 1
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def build_control_batch(
    commit: bool, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
    timestamp: int, base_offset: int = 0, timestamp_type: int = CREATE_TIME,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Kafka's end-transaction marker (``MemoryRecords.withEndTransactionMarker``): one
    record, key = int16 version 0 + int16 type (0 ABORT, 1 COMMIT), value = int16 version
    0 + int32 coordinator epoch; attributes transactional + control (0x30, 0x38 under
    LogAppendTime), base sequence -1, no compression; 78 bytes."""
    key = _CONTROL_KEY.pack(0, COMMIT_MARKER if commit else ABORT_MARKER)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    raw = bytearray(build_batch(
        [Record(0, timestamp, key, value, [])], base_offset=base_offset,
        timestamp_type=timestamp_type, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=-1, partition_leader_epoch=partition_leader_epoch, is_transactional=True,
    ))
    raw[ATTRIBUTES_OFFSET + 1] |= CONTROL_MASK
    crc = _crc32c.crc32c(memoryview(raw)[ATTRIBUTES_OFFSET:])
    _U32.pack_into(raw, CRC_OFFSET, crc)
    return bytes(raw)


def control_type(buf: Buffer, pos: int = 0) -> int | None:
    """The marker type (0 ABORT, 1 COMMIT) of the control batch at ``pos``; None if the
    batch is not a control batch or its key is not Kafka's 4-byte control key."""
    h = parse_header(buf, pos)
    if not h.attributes & CONTROL_MASK:
        return None
    recs = decode_batch(buf, pos)
    if len(recs) != 1 or recs[0].key is None or len(recs[0].key) != 4:
        return None
    return int(_CONTROL_KEY.unpack(recs[0].key)[1])
