"""Decode fetched record batches straight into Arrow columns (Spark's Kafka schema).

A Fetch answer is a run of v2 record batches. Instead of materialising one
Python object per record (``storage.records.decode_batch``), this module finds
each record's body in one pass and then decodes every field of every record
with vectorised numpy gathers; keys and values become Arrow ``binary_view``
arrays pointing into the fetched bytes, which Arrow's C++ cast copies into the
``binary`` columns Spark expects. Only records that carry headers take a
per-record Python path, and only for their headers.

Invariants:
- The rows produced for a batch equal ``storage.records.decode_batch`` of that
  batch (offsets, timestamps with LogAppendTime semantics, keys, values, null
  keys/values, headers), restricted to offsets in ``[start, end)``; the tests
  check this against that codec as the oracle.
- Control batches (transaction markers) yield no rows, as Kafka consumers hide them.
- Every batch's CRC-32C is verified and every record's fields must add up to its
  declared length; anything else raises ``CorruptRecordError`` naming the
  topic, partition and offset: a pipeline never silently reads garbage.
- ``next_offset`` is one past the last offset of the last whole batch looked at,
  so a reader that continues from it neither skips nor repeats a record.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pipeline.schema import ARROW_SCHEMA, HEADER_STRUCT, HEADERS_TYPE, TIMESTAMP_TYPE
from storage import codecs
from storage.errors import CorruptRecordError
from storage.records import HEADER_SIZE, crc_ok, iter_batches

__all__ = ["DecodedFetch", "decode_fetch", "empty_batch"]

_PAD = 16
"""Zero bytes appended to the decode buffer so fixed-width gathers never run off its end."""

_SMALL_BATCH = 24
"""Below this many records a batch's record walk is done in Python (numpy calls cost more)."""


I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class DecodedFetch:
    """Rows decoded from one fetch answer, and where the next fetch should start."""

    batch: pa.RecordBatch | None
    next_offset: int
    batches_seen: int
    records_decoded: int


def empty_batch() -> pa.RecordBatch:
    """A zero-row batch of the source schema."""
    return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)


def decode_fetch(
    buf: bytes | bytearray | memoryview, topic: str, partition: int, start: int, end: int
) -> DecodedFetch:
    """Decode the records of ``buf`` (concatenated batches) with offsets in ``[start, end)``.

    Batches entirely below ``start`` are skipped without decoding; decoding stops
    at the first batch whose base offset is ``>= end``. A torn trailing batch (a
    fetch cut at max_bytes) is ignored; ``next_offset`` then points at it.
    """
    view = memoryview(buf)
    sections: list[bytes | memoryview] = []
    counts: list[int] = []
    base_offsets: list[int] = []
    base_ts: list[int] = []
    max_ts: list[int] = []
    log_append: list[int] = []
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
        if last < start or h.records_count <= 0 or h.attributes & 0x20:
            continue
        if not crc_ok(view, pos, h):
            raise CorruptRecordError(
                f"{topic}-{partition}: the batch at offset {h.base_offset} fails its CRC-32C"
            )
        codec = h.attributes & 0x07
        body = view[pos + HEADER_SIZE : pos + h.batch_length + 12]
        sections.append(body if codec == 0 else codecs.decompress(codec, body))
        counts.append(h.records_count)
        base_offsets.append(h.base_offset)
        base_ts.append(h.base_timestamp)
        max_ts.append(h.max_timestamp)
        log_append.append(1 if h.attributes & 0x08 else 0)
    if not sections:
        return DecodedFetch(None, next_offset, seen, 0)
    sections.append(bytes(_PAD))
    data = b"".join(sections)
    sections.pop()
    d = np.frombuffer(data, dtype=np.uint8)
    starts, lengths = _record_bodies(data, d, sections, counts, topic, partition, base_offsets)
    n_rec = len(starts)
    rec_batch = np.repeat(np.arange(len(counts)), counts)
    rows = _decode_fields(d, starts, lengths, topic, partition, base_offsets, rec_batch)
    offsets = np.asarray(base_offsets, dtype=np.int64)[rec_batch] + rows["offset_delta"]
    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        # Records outside the range are not returned, but their headers are still
        # checked: a batch is either valid as a whole or reported as corrupt.
        dropped = np.flatnonzero(~keep & (rows["header_count"] > 0))
        if len(dropped):
            sub = {k: v[dropped] for k, v in rows.items()}
            ends = (starts + lengths)[dropped]
            _headers(data, sub, ends, topic, partition, offsets[dropped])
        idx = np.flatnonzero(keep)
        offsets = offsets[idx]
        rec_batch = rec_batch[idx]
        rows = {k: v[idx] for k, v in rows.items()}
        starts = starts[idx]
        lengths = lengths[idx]
    n = len(offsets)
    if n == 0:
        return DecodedFetch(None, next_offset, seen, n_rec)
    lat = np.asarray(log_append, dtype=np.int32)[rec_batch]
    ts_ms = np.where(
        lat == 1,
        np.asarray(max_ts, dtype=np.int64)[rec_batch],
        np.asarray(base_ts, dtype=np.int64)[rec_batch] + rows["ts_delta"],
    )
    headers = _headers(data, rows, starts + lengths, topic, partition, offsets)
    tb = topic.encode("utf-8")
    topic_arr = pa.Array.from_buffers(
        pa.string(),
        n,
        [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(tb)), pa.py_buffer(tb * n)],
    )
    batch = pa.RecordBatch.from_arrays(
        [
            _binary(d, rows["key_pos"], rows["key_len"]),
            _binary(d, rows["value_pos"], rows["value_len"]),
            topic_arr,
            pa.array(np.full(n, partition, dtype=np.int32)),
            pa.array(offsets),
            pa.array(ts_ms * 1000, type=TIMESTAMP_TYPE),
            pa.array(lat),
            headers,
        ],
        schema=ARROW_SCHEMA,
    )
    return DecodedFetch(batch, next_offset, seen, n_rec)


def _corrupt(topic: str, partition: int, offset: int, why: str) -> CorruptRecordError:
    return CorruptRecordError(f"{topic}-{partition}: batch at offset {offset}: {why}")


def _record_bodies(
    data: bytes,
    d: npt.NDArray[np.uint8],
    sections: list[bytes | memoryview],
    counts: list[int],
    topic: str,
    partition: int,
    base_offsets: list[int],
) -> tuple[I64, I64]:
    """Absolute start and length of every record body (after its length varint)."""
    starts: list[I64] = []
    lengths: list[I64] = []
    pos = 0
    for i, sec in enumerate(sections):
        end = pos + len(sec)
        found = _find_bodies(data, d, pos, end, counts[i], topic, partition, base_offsets[i])
        starts.extend(found[0])
        lengths.extend(found[1])
        pos = end
    return np.concatenate(starts), np.concatenate(lengths)


def _find_bodies(
    data: bytes,
    d: npt.NDArray[np.uint8],
    pos: int,
    end: int,
    n: int,
    topic: str,
    partition: int,
    base_offset: int,
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
            raise _corrupt(topic, partition, base_offset, f"records end after {i} of {n}")
        length, k = _prefix(data, p, end, topic, partition, base_offset)
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
            s, ln, p = _walk(data, p, end, take, topic, partition, base_offset)
            starts.append(s)
            lengths.append(ln)
            i += take
    if p != end:
        raise _corrupt(topic, partition, base_offset, f"{end - p} bytes after the last record")
    return starts, lengths


def _prefix(
    data: bytes, p: int, end: int, topic: str, partition: int, base_offset: int
) -> tuple[int, int]:
    """(record length, size of its varint prefix) at ``p``."""
    v = 0
    shift = 0
    k = 0
    while True:
        if p + k >= end or shift > 28:
            raise _corrupt(topic, partition, base_offset, "bad record length varint")
        b = data[p + k]
        k += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    length = (v >> 1) ^ -(v & 1)
    if length < 1 or p + k + length > end:
        raise _corrupt(topic, partition, base_offset, f"record length {length} does not fit")
    return length, k


def _walk(
    data: bytes, p: int, end: int, n: int, topic: str, partition: int, base_offset: int
) -> tuple[I64, I64, int]:
    """Walk n length prefixes one record at a time; returns (starts, lengths, next position)."""
    starts = [0] * n
    lengths = [0] * n
    for i in range(n):
        if p >= end:
            raise _corrupt(topic, partition, base_offset, "records end before their count")
        b = data[p]
        if b < 0x80 and b > 1:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            length, k = _prefix(data, p, end, topic, partition, base_offset)
            p += k
        if p + length > end:
            raise _corrupt(topic, partition, base_offset, f"record length {length} does not fit")
        starts[i] = p
        lengths[i] = length
        p += length
    return np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64), p


def _varints(d: npt.NDArray[np.uint8], pos: I64, width: int) -> tuple[I64, I64, bool]:
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
    d: npt.NDArray[np.uint8],
    starts: I64,
    lengths: I64,
    topic: str,
    partition: int,
    base_offsets: list[int],
    rec_batch: I64,
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
        raise _corrupt(
            topic, partition, base_offsets[int(rec_batch[i])], "record fields do not fit its length"
        )
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


def _words(d: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """A little-endian uint32 view of ``d`` starting at every byte (unaligned, no copy)."""
    return np.ndarray(shape=(len(d) - 3,), dtype="<u4", buffer=d, offset=0, strides=(1,))


_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)


def _binary(d: npt.NDArray[np.uint8], pos: I64, length: I64) -> pa.Array:
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
        views[:, 2] = np.where(
            long_rows, 0, words[pos + 4] & _MASKS[np.clip(ln - 4, 0, 4)]
        )
        views[:, 3] = np.where(
            long_rows, pos, words[pos + 8] & _MASKS[np.clip(ln - 8, 0, 4)]
        )
    validity = None if bool(valid.all()) else pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), pa.py_buffer(d)]
    )
    return arr.cast(pa.binary())


def _headers(
    data: bytes,
    rows: dict[str, I64],
    ends: I64,
    topic: str,
    partition: int,
    offsets: I64,
) -> pa.Array:
    """The headers column; records with headers are parsed one by one, the rest cost nothing."""
    counts = rows["header_count"]
    n = len(counts)
    with_headers = np.flatnonzero(counts > 0)
    if len(with_headers) == 0:
        return pa.ListArray.from_arrays(
            pa.array(np.zeros(n + 1, dtype=np.int32)),
            pa.array([], type=HEADER_STRUCT),
            type=HEADERS_TYPE,
        )
    keys: list[str] = []
    values: list[bytes | None] = []
    hpos = rows["header_pos"]
    for i in with_headers.tolist():
        p = int(hpos[i])
        end = int(ends[i])
        for _ in range(int(counts[i])):
            klen, p = _read_varint(data, p, end)
            if klen < 0 or p + klen > end:
                raise _corrupt(topic, partition, int(offsets[i]), "header key does not fit")
            keys.append(data[p : p + klen].decode("utf-8", errors="replace"))
            p += klen
            vlen, p = _read_varint(data, p, end)
            if vlen < 0:
                values.append(None)
            elif p + vlen > end:
                raise _corrupt(topic, partition, int(offsets[i]), "header value does not fit")
            else:
                values.append(data[p : p + vlen])
                p += vlen
        if p != end:
            raise _corrupt(topic, partition, int(offsets[i]), "record headers do not fit its length")
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    struct = pa.StructArray.from_arrays(
        [pa.array(keys, type=pa.string()), pa.array(values, type=pa.binary())],
        fields=list(HEADER_STRUCT),
    )
    return pa.ListArray.from_arrays(pa.array(list_offsets), struct, type=HEADERS_TYPE)


def _read_varint(data: bytes, p: int, end: int) -> tuple[int, int]:
    v = 0
    shift = 0
    while True:
        if p >= end or shift > 28:
            raise CorruptRecordError("bad varint in record headers")
        b = data[p]
        p += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return (v >> 1) ^ -(v & 1), p
        shift += 7
