"""Rebuilding a segment from its ``.log`` after an unclean shutdown or a lost index.

Kafka's ``LogSegment.recover``: every batch from the start of the segment is checked
(header, size, CRC-32C, offsets within the segment's relative range) and, stricter
than Kafka, its offsets against the batch before (the gap rule):

- **contiguous** (the default): the first batch at the segment's base offset (or
  the previous segment's end), each next one right after the previous. A gap can
  only be a damaged base offset, a field the CRC does not cover;
- **gaps allowed** (``allow_gaps``: the log's cleanup.policy includes compact, or
  the segment lies below the cleaner's checkpoint; and for index-only rebuilds,
  which never cut): the cleaner removes records and whole batches, so a batch may
  start past the previous one's end, but offsets must still strictly increase:
  base offset >= the previous batch's last offset + 1 (the first batch >= the
  segment's base and the previous segment's end), last offset delta >= 0, and the
  last offset within base + Int32.MAX. A flipped base-offset bit that lowers an
  offset is still caught; one that raises it, in a compacted segment, reads as a gap.

The first batch that fails ends the valid prefix. The ``.log`` is cut to
that prefix, both indexes are rebuilt with Kafka's recover-time rule (an entry for
a batch when more than ``index.interval.bytes`` lie between its position and the
last indexed batch's position), the final time entry (segment max) is added and
the index files are trimmed.

``scan_log`` does the validation and collects the index entries; it touches no
segment state. ``LogSegment.recover`` (Kafka's name) cuts the file, writes the
indexes and resets the segment's own fields from the scan's result.

Invariant: a batch that was completely written (its CRC holds) and lies before any
damage is never removed; a torn tail or the first corrupt batch and everything after
it in the segment are removed. The caller (``Log``) deletes all later segments when
bytes were cut, as Kafka does.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

import crc32c as _crc32c

from storage.records import HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, MAGIC

INT32_MAX = 0x7FFFFFFF
"""A segment's offsets lie within base + Int32.MAX (index entries hold int32 deltas)."""

_OI = struct.Struct(">ii")
_TI = struct.Struct(">qi")
_CHUNK = 16 * 1024 * 1024


class LogScan(NamedTuple):
    """What ``scan_log`` found in a segment's .log."""

    valid_end: int
    """Bytes of the valid prefix (where the first failing batch starts)."""
    offset_entries: bytes
    """The offset index rebuilt over the prefix (Kafka's recover-time rule)."""
    time_entries: bytes
    """The time index over the prefix, its last entry the segment max."""
    max_timestamp: int
    offset_of_max: int
    next_offset: int
    first_timestamp: int | None
    """The first batch's max timestamp (the segment's rolling base), None when empty."""


def scan_log(fd: int, size: int, *, base: int, min_offset: int | None, allow_gaps: bool,
             index_interval: int, max_offset_entries: int, max_time_entries: int) -> LogScan:
    """Validate the .log open at ``fd`` (``size`` bytes) batch by batch under the gap
    rule (module docstring) and collect the index entries for its valid prefix.

    ``min_offset`` is the first offset the segment may hold (the previous segment's
    end); batches below it are treated as corruption. Reads only; writes nothing.
    """
    gaps = allow_gaps
    interval = index_interval
    expected = base if min_offset is None else max(base, min_offset)
    max_ts = -1
    shallow = base
    last_index_pos = 0
    first_ts: int | None = None
    next_offset = base
    pos = 0
    buf = b""
    view = memoryview(buf)
    buf_pos = 0
    unpack = HEADER_STRUCT.unpack_from
    crc = _crc32c.crc32c
    # Entries are collected and written once at the end (Kafka's rules inlined:
    # offset entries while room, time entries only when the max grows, the last time
    # slot kept for the final entry).
    oi = bytearray()
    ti = bytearray()
    n_oi = n_ti = 0
    max_oi = max_offset_entries
    max_ti = max_time_entries
    last_tts = -1
    pack_oi = _OI.pack
    pack_ti = _TI.pack
    while size - pos >= HEADER_SIZE:
        rel = pos - buf_pos
        if rel + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(_CHUNK, size - pos), pos)
            view = memoryview(buf)
            buf_pos, rel = pos, 0
        (base_off, length, _epoch, magic, stored_crc, _attrs, last_delta, _bts, batch_max,
         _pid, _pep, _seq, _count) = unpack(buf, rel)
        if magic != MAGIC or length < HEADER_SIZE - LOG_OVERHEAD:
            break
        bsize = length + LOG_OVERHEAD
        if pos + bsize > size:
            break  # torn trailing batch
        if rel + bsize > len(buf):
            buf = os.pread(fd, min(max(_CHUNK, bsize), size - pos), pos)
            view = memoryview(buf)
            buf_pos, rel = pos, 0
        if crc(view[rel + 21: rel + bsize]) != stored_crc:
            break
        last = base_off + last_delta
        # The gap rule (module docstring): contiguous offsets, or with gaps allowed,
        # strictly increasing ones. A damaged base offset is not covered by the CRC.
        if (base_off < expected if gaps else base_off != expected) \
                or last_delta < 0 or last - base > INT32_MAX:
            break
        if first_ts is None:
            first_ts = batch_max
        if batch_max > max_ts:
            max_ts = batch_max
            shallow = last
        if pos - last_index_pos > interval:
            # The recover-time rule can want more entries than appends made; a skipped
            # entry only makes a lookup scan from an earlier entry, never miss.
            if n_oi < max_oi:
                oi += pack_oi(last - base, pos)
                n_oi += 1
            if max_ts > last_tts and n_ti < max_ti - 1:
                ti += pack_ti(max_ts, shallow - base)
                n_ti += 1
                last_tts = max_ts
            last_index_pos = pos
        expected = last + 1
        next_offset = last + 1
        pos += bsize
    if max_ts > last_tts and n_ti < max_ti:
        ti += pack_ti(max_ts, shallow - base)  # the final entry: the segment's max
    return LogScan(pos, bytes(oi), bytes(ti), max_ts, shallow, next_offset, first_ts)
