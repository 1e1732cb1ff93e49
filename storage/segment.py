"""One log segment: ``%020d.log`` plus its ``.index`` and ``.timeindex``.

Invariants:
- the ``.log`` is a sequence of whole v2 batches with strictly increasing offsets,
  all >= the segment's base offset and within base + Int32.MAX;
- index entries follow Kafka's rules per batch (KAFKA-806): after adding a batch's
  max to the running max (remembering the last offset of the first batch that
  reached it), if more than ``index.interval.bytes`` were appended since the last
  entry, write (batch last offset -> batch position) and
  ``time_index.maybe_append(running max, its shallow offset)``;
- ``max_timestamp`` is the largest record timestamp in the segment (-1 when none)
  and ``offset_of_max`` the last offset of the first batch carrying it; a sealed
  segment's last time-index entry is exactly this pair;
- a segment never holds its .log open until first used, so thousands of sealed
  segments cost a Python object each and no file descriptors or mappings; at most
  ``MAX_OPEN_SEGMENTS`` unpinned segments keep files open (LRU), the active
  (pinned) one always does;
- a block summary (``BatchSummary``) of a batch at position p describes the bytes
  at p exactly as they are on disk; summaries are dropped whenever the .log is
  cut (truncation, recovery), never otherwise, since batches never move;
- the timestamp zone map (storage/zonemap.py), when in memory, describes exactly the
  .log's first ``covered`` bytes: appends extend it (``add_zone`` with what validation
  found, or a read-back), a cut drops the blocks reaching it and walks them again; its
  sidecar ``.zonemap`` is written off the append path (background, close) and trusted
  only for the prefix its fingerprint still matches.

The search inside one batch (``first_record_at_or_after``) is exact for any
timestamp order: runs of equal-layout records are searched column-wise (strided
slices, ``bytes.translate``, integer masks); everything else record by record.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from storage import codecs, fsutil
from storage.config import LogConfig
from storage.errors import CorruptRecordError, LogStorageError
from storage.index import OffsetIndex, TimeIndex
from storage.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    HIGH_BIT,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    column,
    count_late,
    decode_batch,
    iter_batches,
    scan_timestamps,
)
from storage.zonemap import NO_MAX, TSINDEX_SUFFIX, ZoneMap
from storage.zonemap import SUFFIX as ZONEMAP_SUFFIX

if TYPE_CHECKING:  # columnar and tsindex need numpy (the arrow extra): imported where used
    from storage.columnar import TimestampColumns
    from storage.tsindex import TsIndex

Buf = bytes | bytearray | memoryview
_FIRST_READ = 4096  # first read of a header walk (iter_batches)
_READ_CHUNK = 64 * 1024
# A timestamp search reads headers it has no summary copy of in reads of this many
# bytes (several index intervals of small batches; one 1,000-record batch header).
_WALK_CHUNK = 8 * 1024
# Background summary building reads the .log in windows of this many bytes (or one
# larger batch). With 1 MiB windows the broker kept ~1.7 MiB more anonymous RSS
# after building (buffers past malloc's mmap threshold stay in its heap); with
# 128 KiB none, at the same build CPU (measured, 10M records in 1,000-record batches).
_SUMMARY_WINDOW = 128 << 10
_ZONE_WINDOW = 1 << 20  # a zone map rebuild reads the .log in windows of this many bytes
INT32_MAX = 0x7FFFFFFF



def log_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class BatchInfo(NamedTuple):
    """Where a batch sits in a segment and what the indexes need from it."""

    position: int
    header: BatchHeader

    @property
    def size(self) -> int:
        return self.header.batch_length + LOG_OVERHEAD


class TimestampHit(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int


_new_tuple = tuple.__new__  # TimestampHit from a tuple in C, without its Python __new__


def _uvarint(data: Buf, p: int) -> tuple[int, int]:
    """Unsigned LEB128 at p: (value, position after it). Unlike the codec's bounded
    reader this trusts its input: segment bytes were validated on append or in
    recovery, and this runs per record on the lookup path."""
    b = data[p]
    if b < 0x80:
        return b, p + 1
    u = b & 0x7F
    shift = 7
    while True:
        p += 1
        b = data[p]
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u, p + 1
        shift += 7


_MIN_RUN = 48  # below this a record-by-record walk is cheaper than columns
_LOW = bytes(i & 1 for i in range(256))
_tables: dict[tuple[int, int], bytes] = {}


def _group_table(kind: int, h: int) -> bytes:
    """translate() table mapping a varint byte to 1 when its 7-bit group is
    > h (kind 0), == h (kind 1) or >= h (kind 2)."""
    key = (kind, h)
    t = _tables.get(key)
    if t is None:
        if kind == 0:
            t = bytes(1 if (i & 0x7F) > h else 0 for i in range(256))
        elif kind == 1:
            t = bytes(1 if (i & 0x7F) == h else 0 for i in range(256))
        else:
            t = bytes(1 if (i & 0x7F) >= h else 0 for i in range(256))
        _tables[key] = t
    return t


def _search_run(data: Buf, p: int, size: int, lw: int, tw: int, kmax: int,
                u_min: int) -> tuple[int, int]:
    """Search the records after record 0 at p that share its layout.

    A record shares the layout when its length varint bytes equal record 0's and its
    timestamp varint has the same width with a non-negative delta (even zig-zag);
    such records sit every ``size`` bytes, so each byte of their timestamp varints
    is one strided column. Windows grow 4x so a hit near the start stays cheap.
    Returns (k, n): k = index (from record 0) of the first record with zig-zag
    timestamp >= u_min, or -1; n = how many records (record 0 included) were
    covered, so the caller resumes at p + n * size.
    """
    firsts = [data[p + j: p + j + 1] for j in range(lw)]
    ts_off = lw + 1
    groups = [(u_min >> (7 * j)) & 0x7F for j in range(tw)]
    too_big = u_min >= 1 << (7 * tw)
    done = 1
    window = 64
    while done < kmax:
        want = min(kmax - done, window)
        q = p + done * size
        n = want
        for j in range(lw):
            n -= len(column(data, q + j, n, size).lstrip(firsts[j]))
            if n == 0:
                return -1, done
        cols = []
        for j in range(tw):
            col = column(data, q + ts_off + j, n, size)
            n -= len(col.translate(HIGH_BIT).lstrip(b"\x01" if j < tw - 1 else b"\x00"))
            if n == 0:
                return -1, done
            cols.append(col)
        neg = cols[0][:n].translate(_LOW).find(b"\x01")
        if neg >= 0:
            n = neg
        if n and not too_big:
            # acc lanes: records whose groups j..0 are >= u_min's groups j..0
            acc = int.from_bytes(cols[0][:n].translate(_group_table(2, groups[0])), "little")
            for j in range(1, tw):
                c = cols[j][:n]
                gt = int.from_bytes(c.translate(_group_table(0, groups[j])), "little")
                eq = int.from_bytes(c.translate(_group_table(1, groups[j])), "little")
                acc = gt | (eq & acc)
            if acc:
                return done + (((acc & -acc).bit_length() - 1) >> 3), done + n
        done += n
        if n < want:
            return -1, done
        window *= 4
    return -1, done


def first_record_at_or_after(
    buf: Buf, pos: int, h: BatchHeader | tuple[int, ...], target_ts: int, min_offset: int
) -> tuple[int, int] | None:
    """(timestamp, offset) of the first record in offset order with ts >= target_ts and
    offset >= min_offset, in the batch at ``pos`` of ``buf``; None when there is none.

    Exact for any timestamp order. Records are walked by their length varints; runs
    of records with identical layout (same length bytes, same timestamp-varint width,
    non-negative deltas) are searched column-wise with bytes.translate and integer
    masks, so a 10,000-record batch costs a few C passes instead of 10,000 steps.
    ``h`` is a BatchHeader or its plain tuple (fields read by index).
    """
    # 0 base offset, 1 batch length, 5 attributes, 6 last offset delta,
    # 7 base timestamp, 8 max timestamp, 12 records count
    attributes = h[5]
    base_off = h[0]
    if attributes & TIMESTAMP_TYPE_MASK:
        # LogAppendTime: every record reports the batch max timestamp.
        if h[8] < target_ts or base_off + h[6] < min_offset:
            return None
        if h[12] == h[6] + 1:
            return h[8], max(min_offset, base_off)
        # A compacted batch (fewer records than offsets): the first record left.
        return _first_offset_at_or_after(buf, pos, h, min_offset, h[8])
    codec = attributes & COMPRESSION_MASK
    start = pos + HEADER_SIZE
    end = pos + h[1] + LOG_OVERHEAD
    data: Buf = buf
    if codec:
        data = codecs.decompress(codec, buf[start:end])
        start, end = 0, len(data)
    base_ts = h[7]
    # Column search needs offsets to rise with position only from min_offset on;
    # when the log start lies inside this batch, walk record by record.
    columns = min_offset <= base_off
    u_min = 2 * (target_ts - base_ts)  # zig-zag of the smallest qualifying delta if >= 0
    count = h[12]
    p = start
    i = 0
    while i < count and p < end:
        u = data[p]  # varints of 1-2 bytes inline, as in search_with_summary
        if u < 0x80:
            q = p + 1
        else:
            c = data[p + 1]
            if c < 0x80:
                u = (u & 0x7F) | (c << 7)
                q = p + 2
            else:
                u, q = _uvarint(data, p)
        lw = q - p
        size = lw + ((u >> 1) ^ -(u & 1))
        ts_at = q + 1
        tu = data[ts_at]
        if tu < 0x80:
            r = ts_at + 1
        else:
            c = data[ts_at + 1]
            if c < 0x80:
                tu = (tu & 0x7F) | (c << 7)
                r = ts_at + 2
            else:
                tu, r = _uvarint(data, ts_at)
        ts = base_ts + ((tu >> 1) ^ -(tu & 1))
        if ts >= target_ts:
            u, _ = _uvarint(data, r)
            off = base_off + ((u >> 1) ^ -(u & 1))
            if off >= min_offset:
                return ts, off
        # kmax <= count - i: a batch with fewer records left than a run never gets here
        if (columns and count - i >= _MIN_RUN and size > 0 and not tu & 1 and u_min > 0
                and (kmax := min(count - i, (end - p) // size)) >= _MIN_RUN):
            k, n = _search_run(data, p, size, lw, r - ts_at, kmax, u_min)
            if n > 1:
                if k > 0:
                    rp = p + k * size
                    u, q = _uvarint(data, rp)
                    u, r = _uvarint(data, q + 1)
                    ts = base_ts + ((u >> 1) ^ -(u & 1))
                    u, _ = _uvarint(data, r)
                    return ts, base_off + ((u >> 1) ^ -(u & 1))
                p += n * size
                i += n
                continue
        p += size
        i += 1
    return None


_MASK7 = bytes(i & 0x7F for i in range(256))
BLOCK = 16  # records per block of a batch summary
SUMMARY_MIN_RECORDS = 512  # smaller batches are searched directly
# Block summaries of all segments in this process together stay within this many
# blocks, i.e. ~64M records in large batches (as the earlier 2M blocks of 32). A block
# is 8 bytes of array; with the per-batch header copy and objects, 10M records in
# 1,000-record batches measured +6.6 MiB anonymous RSS (~11 bytes per block), so
# ~42 MiB at the budget, more for 512-record batches. Past it a batch without a
# summary is searched directly; nothing is evicted, because evicting and rebuilding
# on the next touch measured slower than having no summaries at all.
SUMMARY_MAX_BLOCKS = 4 << 20
_summary_blocks_in_use = 0


def _summary_fits(records: int) -> bool:
    return _summary_blocks_in_use + -(-records // BLOCK) <= SUMMARY_MAX_BLOCKS
_NO_HIT = 1 << 80


_LANE = {1: 1, 2: 2, 3: 4, 4: 4, 5: 8, 6: 8, 7: 8, 8: 8}
_CAST = {1: "B", 2: "H", 4: "I", 8: "Q"}
_NATIVE_LE = sys.byteorder == "little" and array("I").itemsize == 4 and array("Q").itemsize == 8


def _run_values(data: Buf, ts_at: int, size: int, tw: int, n: int) -> list[int]:
    """The zig-zag timestamp varints of n uniform records as ints, computed with
    whole-column integer arithmetic (no per-record Python work). Lanes are as narrow
    as the varint width allows (a 2-byte varint fits a 16-bit lane)."""
    if tw == 1:
        return list(column(data, ts_at, n, size).translate(_MASK7))
    lane = _LANE.get(tw, 16)
    lanes = bytearray(n * lane)
    for j in range(tw):
        lanes[j::lane] = column(data, ts_at + j, n, size).translate(_MASK7)
    x = int.from_bytes(lanes, "little")
    ones = int.from_bytes((b"\x01" + bytes(lane - 1)) * n, "little")
    v = 0
    for j in range(tw):  # byte j of each lane holds group j: move it to bit 7j
        v |= (x >> j) & (ones * (0x7F << (7 * j)))
    raw = v.to_bytes(n * lane, "little")
    if lane in _CAST and _NATIVE_LE:
        return array(_CAST[lane], raw).tolist()
    return [int.from_bytes(raw[k * lane:(k + 1) * lane], "little") for k in range(n)]


class BatchSummary(NamedTuple):
    """Per block of BLOCK records of one uncompressed CreateTime batch: the running max
    timestamp up to the block's end and the position of the block's first record
    (from the batch start), plus a copy of the batch header, all in one array so a
    search touches few objects:

    - the first 64 bytes (``first`` lanes): the batch's 61 header bytes, first so
      that reading them also brings in the start of the maxima;
    - lanes [first, first + blocks): running maxima, stored as max - ``ts_base``;
      the first record with ts >= T lies in block
      bisect_left(data, T - ts_base, first, first + blocks) - first;
    - lanes [first + blocks, first + 2 * blocks): positions (< 2**31: a batch
      length is an int32), bit 31 set for a sorted uniform block (see
      search_with_summary).

    Lanes are 4-byte unsigned ('I') when every max lies within +-2**31 ms of the
    batch's base timestamp (ts_base = base - 2**31), else 8-byte ('q', ts_base 0):
    8 bytes per block plus the header."""

    data: array
    blocks: int
    ts_base: int
    first: int

    @property
    def prefix_max(self) -> array:
        """The stored running maxima (add ts_base for timestamps); a copy."""
        return self.data[self.first:self.first + self.blocks]

    @property
    def positions(self) -> array:
        """The position lanes (flag bit included); a copy."""
        return self.data[self.first + self.blocks:self.first + 2 * self.blocks]

    @property
    def header(self) -> bytes:
        return self.data.tobytes()[:HEADER_SIZE]


_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_NO_RECORD = -(1 << 63)  # the max of a block no record reached (a torn batch)


_UNIFORM = 1 << 31  # flag in a summary position: the block is a sorted uniform run


def _raw_varint(v: int, width: int) -> int:
    """``v`` written as a ``width``-byte varint (continuation bits on all but the last
    byte) read as a little-endian integer; for 0 <= v < 2**(7*width) this rises with
    v, and any such varint compares against it as its value against v. Below that
    range -1, above it 2**(8*width) (below / above every such varint)."""
    if v < 0:
        return -1
    if v >> (7 * width):
        return 1 << (8 * width)
    raw = 0
    for j in range(width):
        raw |= (((v >> (7 * j)) & 0x7F) | (0x80 if j < width - 1 else 0)) << (8 * j)
    return raw


def _summary_arrays(words: list[int], prefix: list[int], base_ts: int,
                    header: bytes) -> BatchSummary:
    """Pack the position words (0 for a block past a torn batch end: bisect never
    picks it, its running max equals an earlier block's) and the running maxima
    relative to base_ts (non-decreasing, so prefix[0] and prefix[-1] bound them)
    into one array."""
    n = len(prefix)
    head = bytes(header) + bytes(64 - len(header))
    if n and _I32_MIN <= prefix[0] and prefix[-1] <= _I32_MAX:
        data = array("I", head)  # stored maxima in [0, 2**32): ts_base = base - 2**31
        data.extend(array("I", map((1 << 31).__add__, prefix)))
        data.extend(array("I", words))
        return BatchSummary(data, n, base_ts + _I32_MIN, 64 // 4)
    data = array("q", head)  # absolute maxima; a block with no record stays lowest
    data.extend(array("q", [x + base_ts if x != _NO_RECORD else x for x in prefix]))
    data.extend(array("q", words))
    return BatchSummary(data, n, 0, 64 // 8)


def build_summary(data: Buf, pos: int, h: BatchHeader) -> BatchSummary:
    """One pass over the batch, column-wise over uniform runs (see _search_run);
    per-block work is done with C-level slices, ranges and maps. Maxima are kept
    relative to the base timestamp until they are packed."""
    start = pos + HEADER_SIZE
    end = pos + h.batch_length + LOG_OVERHEAD
    count = h.records_count
    nblocks = (count + BLOCK - 1) // BLOCK
    block_max = [_NO_RECORD] * nblocks  # relative to the base timestamp
    words = [0] * nblocks  # block start relative to pos, | _UNIFORM when flagged
    half = (1).__rrshift__  # v -> v >> 1: a run's zig-zag values are even
    p = start
    i = 0
    while i < count and p < end:
        u, q = _uvarint(data, p)
        length = (u >> 1) ^ -(u & 1)
        lw = q - p
        size = lw + length
        tu, r = _uvarint(data, q + 1)
        tw = r - q - 1
        kmax = min(count - i, (end - p) // size) if size > 0 else 1
        n = 1
        if kmax >= _MIN_RUN and not tu & 1:
            n = _search_run(data, p, size, lw, tw, kmax, _NO_HIT)[1]
        if n > 1:
            us = _run_values(data, q + 1, size, tw, n)
            b0 = i // BLOCK
            b1 = (i + n - 1) // BLOCK
            k0 = -i % BLOCK  # first record of this run that starts a block
            # blocks starting in the run: [fb, fb + len(starts)); wholly inside: [fb, lb)
            fb = -(-i // BLOCK)
            lb = nblocks if i + n >= count else (i + n) // BLOCK
            starts = range(p - pos + k0 * size, p - pos + n * size, BLOCK * size)
            if k0 < n:
                words[fb:fb + len(starts)] = starts
            first_end = min(n, (b0 + 1) * BLOCK - i) - 1
            if us == sorted(us):  # C-speed; then a block's max is its last value
                vals = us[first_end::BLOCK]
                if (n - 1 - first_end) % BLOCK:
                    vals.append(us[n - 1])
                if fb < lb:  # flagged: the same starts, with bit 31 (they are < 2**31)
                    flagged = range(starts.start + _UNIFORM,
                                    starts.start + _UNIFORM + (lb - fb) * starts.step,
                                    starts.step)
                    words[fb:lb] = flagged
            else:
                vals = [max(us[max(0, b * BLOCK - i):min(n, (b + 1) * BLOCK - i)])
                        for b in range(b0, b1 + 1)]
                for b in range(fb, lb):
                    chunk = us[b * BLOCK - i:(b + 1) * BLOCK - i]
                    if chunk == sorted(chunk):
                        words[b] |= _UNIFORM
            new = list(map(half, vals))
            # only block b0 can hold records from before this run
            if new[0] < block_max[b0]:
                new[0] = block_max[b0]
            block_max[b0:b1 + 1] = new
        else:
            b = i // BLOCK
            if i % BLOCK == 0:
                words[b] = p - pos
            d = (tu >> 1) ^ -(tu & 1)
            if d > block_max[b]:
                block_max[b] = d
        p += n * size
        i += n
    # running maxima (a batch in timestamp order has them already: a C-speed check)
    prefix = block_max if block_max == sorted(block_max) else list(accumulate(block_max, max))
    return _summary_arrays(words, prefix, h.base_timestamp, bytes(data[pos:pos + HEADER_SIZE]))


def summary_block(summary: BatchSummary, target_ts: int) -> int:
    """The lane index (first <= b < first + blocks) of the one block that must hold the
    first record with ts >= target_ts, or -1 when no record of the batch does."""
    lanes, nb, ts_base, first = summary
    b = bisect_left(lanes, target_ts - ts_base, first, first + nb)
    return b if b < first + nb else -1


def block_range(summary: BatchSummary, b: int, batch_size: int) -> tuple[int, int]:
    """[start, end) of lane ``b``'s block, in bytes from the batch start: what
    search_block reads of the batch (the rest of the batch may be absent)."""
    lanes, nb = summary[0], summary[1]
    start = lanes[nb + b] & ~_UNIFORM
    if b + 1 < summary[3] + nb:
        end = lanes[nb + b + 1] & ~_UNIFORM
        if end > start:  # 0 marks a block past a torn batch's last record
            return start, end
    return start, batch_size


def search_with_summary(data: Buf, pos: int, h: BatchHeader | tuple[int, ...],
                        summary: BatchSummary, target_ts: int) -> tuple[int, int] | None:
    """first_record_at_or_after for min_offset <= base offset, via the summary: only
    the one block that must hold the answer is searched (summary_block, then
    search_block)."""
    b = summary_block(summary, target_ts)
    return None if b < 0 else search_block(data, pos, h, summary, b, target_ts)


def search_block(data: Buf, pos: int, h: BatchHeader | tuple[int, ...],
                 summary: BatchSummary, b: int, target_ts: int) -> tuple[int, int] | None:
    """The first record with ts >= target_ts in lane ``b``'s block (summary_block) of
    the batch at ``pos`` of ``data``. Only the block's bytes (block_range) are read, so
    ``data`` may hold just them, with ``pos`` = minus the block's start.

    A block flagged uniform (every record of it in one equal-layout run, timestamps in
    order) is binary-searched: its record k sits at k * record size. Any other block
    is walked record by record. Varints of one or two bytes (record lengths below
    8 KiB, timestamp deltas within +-4 s of the base) are decoded inline, longer ones
    by _uvarint. ``h`` is a BatchHeader or its plain tuple (fields by index)."""
    lanes, nb, _, first = summary
    p = lanes[nb + b]
    base_ts = h[7]
    n = h[12] - (b - first) * BLOCK
    if n > BLOCK:
        n = BLOCK
    if p & _UNIFORM:
        p = pos + (p ^ _UNIFORM)
        u = data[p]
        if u < 0x80:
            q = p + 1
        else:
            c = data[p + 1]
            if c < 0x80:
                u = (u & 0x7F) | (c << 7)
                q = p + 2
            else:
                u, q = _uvarint(data, p)
        size = q - p + ((u >> 1) ^ -(u & 1))
        at0 = q + 1  # record 0's timestamp varint, after the attributes byte
        # In a run every delta is >= 0 (even zig-zag: delta >= t <=> zig-zag >= 2t)
        # and every timestamp varint has one width tw, so a varint's bytes read as a
        # little-endian integer rise with its value: one integer compare per probe
        # against 2t written in tw bytes.
        u_min = 2 * (target_ts - base_ts)
        lo, hi = 0, n  # first k whose timestamp >= target; block b holds one
        if data[at0] < 0x80:
            while lo < hi:
                mid = (lo + hi) >> 1
                if data[at0 + mid * size] >= u_min:
                    hi = mid
                else:
                    lo = mid + 1
        elif data[at0 + 1] < 0x80:  # _raw_varint(u_min, 2), inline
            if u_min < 0:
                raw_min = -1
            elif u_min < 1 << 14:
                raw_min = (u_min & 0x7F) | 0x80 | (u_min >> 7) << 8
            else:
                raw_min = 1 << 16
            if n == 16 == BLOCK:  # a whole block: the four probes unrolled
                a = at0 + 7 * size
                if data[a] | data[a + 1] << 8 < raw_min:
                    lo = 8
                a = at0 + (lo + 3) * size
                if data[a] | data[a + 1] << 8 < raw_min:
                    lo += 4
                a = at0 + (lo + 1) * size
                if data[a] | data[a + 1] << 8 < raw_min:
                    lo += 2
                a = at0 + lo * size
                if data[a] | data[a + 1] << 8 < raw_min:
                    lo += 1
                hi = lo
            while lo < hi:
                mid = (lo + hi) >> 1
                a = at0 + mid * size
                if data[a] | data[a + 1] << 8 >= raw_min:
                    hi = mid
                else:
                    lo = mid + 1
        else:
            tw = _uvarint(data, at0)[1] - at0
            raw_min = _raw_varint(u_min, tw)
            while lo < hi:
                mid = (lo + hi) >> 1
                a = at0 + mid * size
                if int.from_bytes(data[a:a + tw], "little") >= raw_min:
                    hi = mid
                else:
                    lo = mid + 1
        if lo == n:
            return None
        tu, r = _uvarint(data, at0 + lo * size)
        u = data[r]
        if u >= 0x80:
            c = data[r + 1]
            u = (u & 0x7F) | (c << 7) if c < 0x80 else _uvarint(data, r)[0]
        return base_ts + (tu >> 1), h[0] + ((u >> 1) ^ -(u & 1))
    t = target_ts - base_ts  # ts >= target_ts <=> delta >= t
    p += pos
    end = pos + h[1] + LOG_OVERHEAD
    for _ in range(n):
        u = data[p]
        if u < 0x80:
            q = p + 1
        else:
            c = data[p + 1]
            if c < 0x80:
                u = (u & 0x7F) | (c << 7)
                q = p + 2
            else:
                u, q = _uvarint(data, p)
        tu = data[q + 1]  # after the attributes byte
        if tu < 0x80:
            r = q + 2
        else:
            c = data[q + 2]
            if c < 0x80:
                tu = (tu & 0x7F) | (c << 7)
                r = q + 3
            else:
                tu, r = _uvarint(data, q + 1)
        d = (tu >> 1) ^ -(tu & 1)
        if d >= t:
            u, _ = _uvarint(data, r)
            return base_ts + d, h[0] + ((u >> 1) ^ -(u & 1))
        p = q + ((u >> 1) ^ -(u & 1))
        if p >= end:
            break
    return None


def _first_offset_at_or_after(buf: Buf, pos: int, h: BatchHeader | tuple[int, ...],
                              min_offset: int, ts: int) -> tuple[int, int] | None:
    """(ts, offset) of the first record with offset >= min_offset, read from the
    records' offset deltas (a compacted batch has gaps inside)."""
    data: Buf = buf
    start = pos + HEADER_SIZE
    end = pos + h[1] + LOG_OVERHEAD
    codec = h[5] & COMPRESSION_MASK
    if codec:
        data = codecs.decompress(codec, buf[start:end])
        start, end = 0, len(data)
    p = start
    for _ in range(h[12]):
        if p >= end:
            break
        u, q = _uvarint(data, p)
        _, r = _uvarint(data, q + 1)  # the timestamp delta, after the attributes byte
        od, _ = _uvarint(data, r)
        off = h[0] + ((od >> 1) ^ -(od & 1))
        if off >= min_offset:
            return ts, off
        p = q + ((u >> 1) ^ -(u & 1))
    return None


def offset_of_first_max(buf: Buf, pos: int, h: BatchHeader) -> int:
    """Offset of the first record whose timestamp equals the batch max (Kafka's
    offsetOfMaxTimestamp; under LogAppendTime the first record's offset: the base
    offset unless compaction removed that record)."""
    if h.attributes & TIMESTAMP_TYPE_MASK:
        if h.records_count != h.last_offset_delta + 1:
            hit = _first_offset_at_or_after(buf, pos, h, h.base_offset, h.max_timestamp)
            if hit is not None:
                return hit[1]
        return h.base_offset
    hit = first_record_at_or_after(buf, pos, h, h.max_timestamp, h.base_offset)
    return hit[1] if hit is not None else h.base_offset


MAX_OPEN_SEGMENTS = 2000
"""Sealed segments whose files stay open at once (each holds up to three descriptors:
the .log and two index mappings; the .log itself is never mapped). Past this, the
least recently used one closes its files; they reopen on next use. Active (pinned) segments are
not counted: they are always open."""

_OPEN: OrderedDict[int, LogSegment] = OrderedDict()


def _touch(seg: LogSegment) -> None:
    """Mark ``seg`` used. Only unpinned (sealed) segments are tracked and evicted, so
    a broker with many actively written partitions pays O(1) here."""
    key = id(seg)
    if seg.pinned:
        _OPEN.pop(key, None)
        return
    if key in _OPEN:
        _OPEN.move_to_end(key)
        return
    _OPEN[key] = seg
    while len(_OPEN) > MAX_OPEN_SEGMENTS:
        victim = next(iter(_OPEN.values()))
        if victim is seg:
            break
        victim.close_files()  # removes itself from _OPEN


class LogSegment:
    """A segment's files and in-memory state; the last segment of a log is active."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        created_ms: int | None = None,
        jitter_ms: int = 0,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        stem = directory / f"{base_offset:020d}"
        self.log_path = Path(f"{stem}.log")
        self.offset_index = OffsetIndex(f"{stem}.index", base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(f"{stem}.timeindex", base_offset, config.segment_index_bytes)
        self._fd: int | None = None
        self._summaries: dict[int, BatchSummary] = {}
        self._summary_blocks = 0
        # _walk_start per time-index slot (-1: not yet), valid for these generations
        self._walk_from = array("i")
        self._walk_gens = (-1, -1)
        self._touched: set[int] = set()
        try:
            self.size = self.log_path.stat().st_size
        except FileNotFoundError:
            self.size = -1  # created on first open
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        self.jitter_ms = jitter_ms
        self.bytes_since_last_index_entry = 0
        self._max_ts: int | None = None
        self._offset_of_max = base_offset
        self._next_offset: int | None = None
        self._rolling_base_ts: int | None = None
        self._rolling_loaded = False
        self._indexes_checked = False
        self.dirty = False
        self.pinned = False
        self.zone_map_path = Path(f"{stem}{ZONEMAP_SUFFIX}")
        self._zones: ZoneMap | None = None
        self.ts_index_path = Path(f"{stem}{TSINDEX_SUFFIX}")
        self._tsi: TsIndex | None = None

    # -- files -----------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, *, now_ms: int,
               jitter_ms: int = 0) -> LogSegment:
        seg = cls(directory, base_offset, config, created_ms=now_ms, jitter_ms=jitter_ms)
        seg.fd()
        seg._max_ts = -1
        seg._next_offset = base_offset
        seg._rolling_loaded = True
        seg._indexes_checked = True
        if max(seg.size, 0) == 0:  # a new segment's map starts empty, kept from the first append
            seg.zone_map_path.unlink(missing_ok=True)
            seg.ts_index_path.unlink(missing_ok=True)
            seg._zones = ZoneMap(base_offset, config.index_interval_bytes)
        return seg

    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
            self.size = os.fstat(self._fd).st_size
        _touch(self)
        return self._fd

    def close_files(self) -> None:
        """Give back descriptors and index mappings of an unpinned segment (LRU
        eviction). Indexes are trimmed to their entries first, so no zero padding is
        left behind (it would read back as entries); everything reopens lazily; block
        summaries stay valid."""
        self.offset_index.close()
        self.time_index.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        _OPEN.pop(id(self), None)

    def pread(self, pos: int, n: int) -> bytes:
        return os.pread(self.fd(), n, pos)

    def mtime_ms(self) -> int:
        return int(self.log_path.stat().st_mtime * 1000)

    # -- index sanity (lazy) -----------------------------------------------------
    def mark_indexes_checked(self) -> None:
        self._indexes_checked = True

    def check_indexes(self) -> None:
        """On first use, Kafka's sanity checks on both indexes (first/last entries, file
        length a multiple of the entry size); a failing index is rebuilt from the .log
        without shortening it."""
        if self._indexes_checked:
            return
        self._indexes_checked = True
        if not self._indexes_sane():
            from storage.recovery import recover_segment

            recover_segment(self, cut=False)

    def _indexes_sane(self) -> bool:
        oi, ti = self.offset_index, self.time_index
        if oi.file_length() % oi.ENTRY or ti.file_length() % ti.ENTRY:
            return False
        log_size = max(self.size, 0)
        n, first, last = oi.peek_ends()
        if n:
            first_rel, first_pos = struct.unpack(">ii", first)
            last_rel, last_pos = struct.unpack(">ii", last)
            if first_rel < 0 or last_rel < first_rel or last_pos >= max(log_size, 1):
                return False
            if first_pos > last_pos or (n > 1 and first_rel == last_rel):
                return False
        m, first, last = ti.peek_ends()
        if m:
            ts0, o0 = struct.unpack(">qi", first)
            tsl, ol = struct.unpack(">qi", last)
            if o0 < 0 or ol < o0 or tsl < ts0 or (m > 1 and ts0 == tsl):
                return False
        return True

    # -- batch walking ---------------------------------------------------------
    def iter_batches(self, start: int = 0, end: int | None = None) -> Iterator[BatchInfo]:
        """Headers of whole batches from ``start`` (a batch boundary); stops at a torn tail.

        Raises CorruptRecordError on a header that cannot be a batch.
        """
        self.fd()
        stop = self.size if end is None else min(end, self.size)
        pos = start
        buf = b""
        buf_pos = pos
        unpack = HEADER_STRUCT.unpack_from
        make = BatchHeader._make
        # Start small and double: a Fetch or a find_batch usually needs one or two
        # headers right at the indexed position (reading 64 KiB for them cost more than
        # the header), while a long walk soon reads whole chunks.
        chunk = _FIRST_READ
        while stop - pos >= HEADER_SIZE:
            rel = pos - buf_pos
            if rel < 0 or rel + HEADER_SIZE > len(buf):
                # fd() per refill: a lazily consumed walk survives an LRU eviction
                buf = os.pread(self.fd(), min(chunk, stop - pos), pos)
                chunk = min(chunk * 2, _READ_CHUNK)
                buf_pos = pos
                rel = 0
                if len(buf) < HEADER_SIZE:
                    return
            h = make(unpack(buf, rel))
            if h.magic != MAGIC or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptRecordError(
                    f"{self.log_path}: no valid batch header at position {pos}"
                )
            size = h.batch_length + LOG_OVERHEAD
            if pos + size > stop:
                return
            yield BatchInfo(pos, h)
            pos += size

    def find_batch(self, offset: int) -> BatchInfo | None:
        """The first batch whose last offset >= ``offset`` (None past the end)."""
        self.check_indexes()
        _, pos = self.offset_index.lookup(offset)
        for info in self.iter_batches(pos):
            if info.header.base_offset + info.header.last_offset_delta >= offset:
                return info
        return None

    # -- lazily known state ----------------------------------------------------
    def _load_max(self) -> None:
        self.check_indexes()
        ts, off = self.time_index.peek_last_entry()
        self._max_ts, self._offset_of_max = ts, off

    @property
    def max_timestamp(self) -> int:
        if self._max_ts is None:
            self._load_max()
        assert self._max_ts is not None
        return self._max_ts

    @property
    def offset_of_max(self) -> int:
        if self._max_ts is None:
            self._load_max()
        return self._offset_of_max

    def largest_timestamp(self) -> int:
        """Kafka's largestTimestamp: the max timestamp, or the .log mtime without one."""
        ts = self.max_timestamp
        return ts if ts >= 0 else self.mtime_ms()

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (base offset when empty)."""
        if self._next_offset is None:
            self.check_indexes()
            last_off, pos = self.offset_index.lookup(1 << 62)
            nxt = self.base_offset
            for info in self.iter_batches(pos):
                nxt = info.header.base_offset + info.header.last_offset_delta + 1
            self._next_offset = nxt
        return self._next_offset

    def rolling_base_timestamp(self) -> int | None:
        """The first batch's max timestamp (Kafka's rollingBasedTimestamp)."""
        if not self._rolling_loaded:
            self._rolling_loaded = True
            self._rolling_base_ts = None
            for info in self.iter_batches(0):
                self._rolling_base_ts = info.header.max_timestamp
                break
        return self._rolling_base_ts

    # -- append ----------------------------------------------------------------
    def should_roll(self, incoming_size: int, incoming_max_ts: int, incoming_last_offset: int,
                    now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll, checked before each append."""
        size = max(self.size, 0)
        cfg = self.config
        if size > cfg.segment_bytes - incoming_size:
            return True
        if size > 0:
            first = self.rolling_base_timestamp()
            if first is not None and first >= 0:
                waited = incoming_max_ts - first
            else:
                waited = now_ms - self.created_ms
            if waited > cfg.max_segment_ms - self.jitter_ms:
                return True
        if self.offset_index.is_loaded or size > 0:
            if self.offset_index.is_full or self.time_index.is_full:
                return True
        rel = incoming_last_offset - self.base_offset
        return not 0 <= rel <= INT32_MAX

    def prepare_active(self) -> None:
        """Open the files for appending: preallocate indexes (Kafka's resizeIndexes)."""
        self.pinned = True  # never evicted while it may hold unsealed index entries
        self.check_indexes()
        self.fd()
        self.offset_index.make_appendable()
        self.time_index.make_appendable()
        if self._max_ts is None:
            self._load_max()

    def append(self, data: bytes | bytearray | memoryview | list[bytes | bytearray | memoryview],
               batches: list[tuple[int, int, int, int]], *, scanned: bool = False) -> None:
        """Write ``data`` (whole batches; or a list of pieces written with one pwritev)
        at the end and index it.

        ``batches`` lists (position within data, size, last offset, max timestamp) per
        batch. The zone map (if in memory) reads the appended batches back, unless
        ``scanned``: then the caller passes what its validation walk found to
        ``add_zone`` right after (the produce path: no record is read twice). On an I/O error the .log is cut back to its previous size and
        LogStorageError is raised, so the segment is as it was; the index blocks the
        entries need are allocated before the .log is written (see index.reserve).
        """
        fd = self.fd()
        if self._max_ts is None:
            self._load_max()
        start = self.size
        try:
            # Index blocks first (at most one entry per batch, plus the roll's final
            # time entry): a full disk then fails here, before anything is written.
            self.offset_index.reserve(len(batches) + 1)
            self.time_index.reserve(len(batches) + 1)
        except OSError as exc:
            raise LogStorageError(f"append to {self.log_path} failed: index: {exc}") from exc
        pieces = [memoryview(d) for d in (data if isinstance(data, list) else [data])]
        total = sum(len(v) for v in pieces)
        try:
            written = 0
            while written < total:
                n = fsutil.FILES.pwritev(fd, pieces, start + written)
                if n <= 0:
                    raise OSError("short write")
                written += n
                while pieces and n >= len(pieces[0]):  # drop what was written
                    n -= len(pieces[0])
                    pieces.pop(0)
                if pieces and n:
                    pieces[0] = pieces[0][n:]
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise LogStorageError(f"append to {self.log_path} failed: {exc}") from exc
        self.size = start + total
        self.dirty = True
        if not self._rolling_loaded:
            self.rolling_base_timestamp()
        if start == 0 and batches:
            self._rolling_base_ts = batches[0][3]
            self._rolling_loaded = True
        interval = self.config.index_interval_bytes
        assert self._max_ts is not None
        for rel_pos, size, last_offset, max_ts in batches:
            if max_ts > self._max_ts:
                self._max_ts = max_ts
                self._offset_of_max = last_offset
            if self.bytes_since_last_index_entry > interval:
                # A multi-batch trusted append can fill an index midway (the roll check
                # runs per append); a skipped entry only makes lookups scan further.
                if not self.offset_index.is_full:
                    self.offset_index.append(last_offset, start + rel_pos)
                if self._max_ts >= 0 and not self.time_index.is_full:
                    self.time_index.maybe_append(self._max_ts, self._offset_of_max)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += size
            self._next_offset = last_offset + 1
        zm = self._zones
        if zm is not None and zm.covered == start and not scanned:
            self._zone_walk(zm, start)  # else a later walk reads these batches

    def add_zone(self, size: int, base: int, last: int, records: int, mn: int, mx: int,
                 late: int, worst: int) -> None:
        """The zone-map entry of the batch ``append(..., scanned=True)`` just wrote (its
        last ``size`` bytes): what the validation walk found (BatchScan), its disorder
        counted against ``zone_tail()`` as it was before the batch."""
        zm = self._zones
        if zm is not None and zm.covered == self.size - size:  # else a later walk adds it
            zm.pending.append((zm.covered, size, base, last, records, mn, mx, late, worst,
                               True))
            zm.covered = self.size
            if records > 0 and mx > zm.tail:
                zm.tail = mx
            if len(zm.pending) >= 4096:
                zm.sync()

    # -- lookups -----------------------------------------------------------------
    def find_by_timestamp(self, target_ts: int, min_offset: int,
                          max_offset: int) -> TimestampHit | None:
        """Smallest offset in [min_offset, max_offset) with record ts >= target_ts.

        Exact: the time index floor entry (ts <= target) names a batch before which
        every record is below its ts, hence below target; every batch from there is
        checked by header max and then record by record (the batches every target
        above the entry skips are skipped once per slot, see _walk_start). Headers
        are plain tuples (BatchHeader's field order) on this path.

        The .log is read with pread, never mapped (as Kafka reads it through a
        FileChannel): a summarised batch's header comes from its summary and only the
        one block searched is read; other headers come from _WALK_CHUNK-byte reads,
        an unsummarised batch is read whole. The process's RSS holds no .log page.
        """
        if not self._indexes_checked:
            self.check_indexes()
        fd = self._fd
        if fd is None:
            fd = self.fd()
        elif not self.pinned:
            # What fd() does: _touch, inline (a pinned segment is never in _OPEN:
            # prepare_active took it out).
            try:
                _OPEN.move_to_end(id(self))
            except KeyError:
                _touch(self)
        size = self.size
        if size <= 0:
            return None
        pos = -1
        if min_offset <= self.base_offset:
            # The log start is not inside this segment: for T above the floor entry the
            # walk starts where _walk_start says, and from there every batch ends at or
            # after the entry's offset, so start_off = min_offset checks the same.
            slot, entry_ts = self.time_index.floor_key(target_ts)
            if entry_ts < target_ts and slot >= 0:
                start_off = min_offset
                memo = self._walk_from  # _walk_start's memo, read inline when valid
                if (slot < len(memo) and self.offset_index.generation == self._walk_gens[0]
                        and self.time_index.generation == self._walk_gens[1]):
                    pos = memo[slot]
                if pos < 0:
                    pos = self._walk_start(fd, size, slot, entry_ts,
                                           self.time_index.entry(slot)[1])
        if pos < 0:
            entry_off = self.time_index.floor_offset(target_ts)
            start_off = entry_off if entry_off > min_offset else min_offset
            pos = self.offset_index.floor_position(start_off)
        unpack_from = HEADER_STRUCT.unpack_from
        summaries = self._summaries
        pread = os.pread
        buf = b""  # .log bytes [buf_pos, buf_pos + len(buf)), read as the walk needs
        buf_pos = 0
        while size - pos >= HEADER_SIZE:
            # A summarised batch's header is a copy kept with its summary (validated
            # when it was built; the bytes at pos never change while it exists): no
            # byte of the .log is read to read or skip it.
            summary = summaries.get(pos) if summaries else None
            if summary is not None:
                h = unpack_from(summary[0])
            else:
                rel = pos - buf_pos
                if rel + HEADER_SIZE > len(buf):
                    buf = pread(fd, _WALK_CHUNK, pos)
                    buf_pos = pos
                    rel = 0
                    if len(buf) < HEADER_SIZE:
                        return None  # the file is shorter than self.size says
                h = unpack_from(buf, rel)
                # 0 base offset, 1 batch length, 2 leader epoch, 3 magic, 5 attributes,
                # 6 last offset delta, 8 max timestamp, 12 records count
                if h[3] != MAGIC or h[1] < HEADER_SIZE - LOG_OVERHEAD:
                    raise CorruptRecordError(f"{self.log_path}: no valid batch header at {pos}")
            bsize = h[1] + LOG_OVERHEAD
            if pos + bsize > size or h[0] >= max_offset:
                return None
            if h[0] + h[6] >= start_off and h[8] >= target_ts:
                if min_offset > h[0]:
                    summary = None  # the log start lies inside: a summary cannot skip it
                elif (summary is None and h[12] >= SUMMARY_MIN_RECORDS
                        and not h[5] & (COMPRESSION_MASK | TIMESTAMP_TYPE_MASK)):
                    summary = self._summary_for(fd, pos, h)
                if summary is not None:
                    b = summary_block(summary, target_ts)
                    if b < 0:
                        hit = None
                    else:
                        start, end = block_range(summary, b, bsize)
                        hit = search_block(pread(fd, end - start, pos + start), -start,
                                           h, summary, b, target_ts)
                else:
                    rel = pos - buf_pos
                    if rel + bsize > len(buf):
                        buf = pread(fd, bsize if bsize > _WALK_CHUNK else _WALK_CHUNK, pos)
                        buf_pos = pos
                        rel = 0
                        if len(buf) < bsize:
                            return None  # the file is shorter than self.size says
                    hit = first_record_at_or_after(buf, rel, h, target_ts, min_offset)
                if hit is not None:
                    if hit[1] >= max_offset:
                        return None
                    return _new_tuple(TimestampHit, (hit[0], hit[1], h[2]))
            pos += bsize
        return None

    def _walk_start(self, fd: int, size: int, slot: int, entry_ts: int,
                    entry_off: int) -> int:
        """Where the batch walk of a search starts, for every target T > entry_ts whose
        time-index floor is entry ``slot`` (entry_ts, entry_off) with the log start at
        or below entry_off: the offset-index floor of entry_off, then past the batches
        every such T skips (last offset < entry_off, or header max <= entry_ts).

        Skipping them here is what the walk would do: each is skipped, or ends the
        search with no hit (base offset >= the high watermark, or a torn tail), and
        then so would every later batch. Memoised per slot while neither index was
        cut or rewritten (their ``generation``) and the .log was not cut (_unmap), for
        floors that appends cannot move (an offset entry exactly at entry_off)."""
        oi, ti = self.offset_index, self.time_index
        memo = self._walk_from
        if oi.generation != self._walk_gens[0] or ti.generation != self._walk_gens[1]:
            memo = self._walk_from = array("i")
            self._walk_gens = (oi.generation, ti.generation)
        if slot < len(memo):
            pos = memo[slot]
            if pos >= 0:
                return pos
        floor_off, pos = oi.lookup(entry_off)
        summaries = self._summaries
        unpack_from = HEADER_STRUCT.unpack_from
        buf = b""
        buf_pos = 0
        while size - pos >= HEADER_SIZE:
            summary = summaries.get(pos)
            if summary is not None:
                h = unpack_from(summary.data)
            else:
                if pos - buf_pos + HEADER_SIZE > len(buf):
                    buf = os.pread(fd, _WALK_CHUNK, pos)
                    buf_pos = pos
                    if len(buf) < HEADER_SIZE:
                        break
                h = unpack_from(buf, pos - buf_pos)
                if h[3] != MAGIC or h[1] < HEADER_SIZE - LOG_OVERHEAD:
                    raise CorruptRecordError(f"{self.log_path}: no valid batch header at {pos}")
            bsize = h[1] + LOG_OVERHEAD
            if pos + bsize > size or (h[0] + h[6] >= entry_off and h[8] > entry_ts):
                break
            pos += bsize
        if floor_off == entry_off and pos <= INT32_MAX and (
                oi.generation, ti.generation) == self._walk_gens:
            n = ti.entries
            if len(memo) < n:
                memo.extend(array("i", [-1]) * (n - len(memo)))
            memo[slot] = pos
        return pos

    def _summary_for(self, fd: int, pos: int,
                     h: BatchHeader | tuple[int, ...]) -> BatchSummary | None:
        """The batch's block summary, built on its second search (a one-off lookup
        is cheaper with the direct column search than with a summary build)."""
        summary = self._summaries.get(pos)
        if summary is None:
            if pos not in self._touched:
                if len(self._touched) >= 65536:
                    self._touched.clear()
                self._touched.add(pos)
                return None
            if not _summary_fits(h[12]):
                return None  # over the process-wide budget: search this batch directly
            data = os.pread(fd, h[1] + LOG_OVERHEAD, pos)
            summary = self._keep_summary(pos, build_summary(data, 0, BatchHeader._make(h)))
        return summary

    def _keep_summary(self, pos: int, summary: BatchSummary) -> BatchSummary:
        """Remember ``summary``, counted against the process-wide SUMMARY_MAX_BLOCKS."""
        global _summary_blocks_in_use
        self._summaries[pos] = summary
        self._summary_blocks += summary.blocks
        _summary_blocks_in_use += summary.blocks
        return summary

    def build_summaries(self, start: int, deadline: float) -> int:
        """Summarise the large batches from position ``start`` (a batch boundary) until
        time.monotonic() passes ``deadline``; returns the position to resume from (-1
        when done). The .log is read in windows of _SUMMARY_WINDOW bytes (or one
        whole larger batch) with pread; nothing is mapped."""
        self.fd()
        if max(self.size, 0) - start < HEADER_SIZE:
            return -1
        unpack = HEADER_STRUCT.unpack_from
        make = BatchHeader._make
        pos = start
        buf = b""
        buf_pos = pos
        walked = 0
        while self.size - pos >= HEADER_SIZE:
            stop = self.size
            rel = pos - buf_pos
            if rel + HEADER_SIZE > len(buf):
                # fd() per read: a slice survives an LRU eviction in between
                buf = os.pread(self.fd(), min(_SUMMARY_WINDOW, stop - pos), pos)
                buf_pos, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    return -1
            h = make(unpack(buf, rel))
            if h.magic != MAGIC or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptRecordError(f"{self.log_path}: no valid batch header at {pos}")
            size = h.batch_length + LOG_OVERHEAD
            if pos + size > stop:
                return -1  # a torn tail
            if (h.records_count >= SUMMARY_MIN_RECORDS
                    and not h.attributes & (COMPRESSION_MASK | TIMESTAMP_TYPE_MASK)
                    and pos not in self._summaries):
                if not _summary_fits(h.records_count):
                    return -1  # the budget is spent: the rest is searched directly
                if rel + size > len(buf):
                    buf = os.pread(self.fd(), max(size, min(_SUMMARY_WINDOW, stop - pos)), pos)
                    buf_pos, rel = pos, 0
                    if len(buf) < size:
                        return -1
                self._keep_summary(pos, build_summary(buf, rel, h))
                if time.monotonic() >= deadline:
                    return pos + size
            pos += size
            walked += 1
            if walked & 255 == 0 and time.monotonic() >= deadline:
                # many small batches: the header walk itself must respect the budget
                return pos
        return -1

    def _unmap(self) -> None:
        """Forget what describes .log positions (block summaries, walk starts): the
        .log is about to be cut or rewritten."""
        global _summary_blocks_in_use
        self._walk_from = array("i")  # positions past a cut would be stale
        self._summaries.clear()
        _summary_blocks_in_use -= self._summary_blocks
        self._summary_blocks = 0
        self._touched.clear()

    def _unmap_and_close(self) -> None:
        """Drop the block summaries and close the log file (close, release)."""
        self._unmap()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- zone map (storage/zonemap.py) ------------------------------------------------
    def zone_map(self) -> ZoneMap:
        """This segment's zone map: in memory once built; else from its sidecar (valid
        for the prefix it covers, the rest walked from the .log); else rebuilt from the
        .log. A sealed segment's rebuilt map is written back as its sidecar."""
        zm = self._zones
        if zm is not None and zm.covered == max(self.size, 0):
            zm.sync()
            return zm
        self.build_zone_map(None)
        assert self._zones is not None
        self._zones.sync()
        return self._zones

    def build_zone_map(self, deadline: float | None) -> bool:
        """Bring the map up to the end of the .log, stopping once time.monotonic() passes
        ``deadline`` (None: never); a partial map is kept and resumed (its ``covered``).
        Returns True when the map covers the whole .log."""
        size = max(self.size, 0)
        zm = self._zones
        if zm is None or zm.covered > size:
            zm = self._read_zone_map(size)
            if zm is None:
                zm = ZoneMap(self.base_offset, self.config.index_interval_bytes)
            self._zones = zm
        if zm.covered < size:
            self._zone_walk(zm, zm.covered, deadline)
            if zm.covered < max(self.size, 0) and deadline is not None:
                return False
        if not self.pinned:
            self.write_zone_map()  # a no-op unless rebuilt or re-based since read
        return True

    @property
    def zone_map_loaded(self) -> bool:
        return self._zones is not None

    def seed_zone_map(self, running: int) -> None:
        """Start a new (empty) segment's map from the running max before it, so its
        disorder counts are exact without looking back (Log.roll)."""
        zm = self._zones
        if zm is not None and not zm.first and not zm.pending:
            zm.running = zm.tail = running

    def zone_map_running(self) -> int:
        """The running max after this segment (its queued batches too), if its map is in
        memory (else NO_MAX): what the next batch's late records are counted against."""
        return self._zones.tail if self._zones is not None else NO_MAX

    def _read_zone_map(self, size: int) -> ZoneMap | None:
        try:
            data = self.zone_map_path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None
        zm = ZoneMap.decode(data, self.base_offset, self.config.index_interval_bytes)
        if zm is None or zm.covered > size:
            return None
        if zm.last_pos >= 0 and (zm.last_pos + HEADER_SIZE > size or not zm.matches(
                self.pread(zm.last_pos, HEADER_SIZE))):
            return None
        return zm

    def write_zone_map(self) -> None:
        """Write the in-memory map as the sidecar (no fsync: it is a cache, validated by
        its checksum and rebuilt when torn). Skipped when it is not in memory or did not
        change since it was read or written."""
        zm = self._zones
        if zm is None or not (zm.dirty or zm.pending) or zm.covered != max(self.size, 0):
            return
        head = self.pread(zm.last_pos, HEADER_SIZE) if zm.last_pos >= 0 else b""
        tmp = self.zone_map_path.with_name(self.zone_map_path.name + ".tmp")
        try:
            tmp.write_bytes(zm.encode(head))
            os.replace(tmp, self.zone_map_path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: the .log still rebuilds it
            return
        zm.dirty = False

    def _zone_walk(self, zm: ZoneMap, start: int, deadline: float | None = None) -> None:
        """Add the batches from position ``start`` (a batch boundary) to the end of the
        .log to ``zm``, reading windows of _ZONE_WINDOW bytes; a torn tail ends it, and
        so does time.monotonic() passing ``deadline`` (after a window)."""
        size = max(self.size, 0)
        fd = self.fd()
        unpack = HEADER_STRUCT.unpack_from
        make = BatchHeader._make
        pos = start
        buf = b""
        buf_pos = pos
        zm.sync()
        run = zm.running  # the batches are read anyway: disorder is counted exactly here
        while size - pos >= HEADER_SIZE:
            rel = pos - buf_pos
            if rel + HEADER_SIZE > len(buf):
                if deadline is not None and pos > start and time.monotonic() >= deadline:
                    return
                buf = os.pread(fd, min(_ZONE_WINDOW, size - pos), pos)
                buf_pos, rel = pos, 0
            h = make(unpack(buf, rel))
            if h.magic != MAGIC or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptRecordError(f"{self.log_path}: no valid batch header at {pos}")
            bsize = h.batch_length + LOG_OVERHEAD
            if pos + bsize > size:
                break
            if rel + bsize > len(buf):
                buf = os.pread(fd, max(bsize, min(_ZONE_WINDOW, size - pos)), pos)
                buf_pos, rel = pos, 0
                if len(buf) < bsize:
                    break
            last = h.base_offset + h.last_offset_delta
            if h.attributes & CONTROL_MASK or h.records_count <= 0:
                zm.add(pos, bsize, h.base_offset, last, 0, 0, 0, 0, 0)
            else:
                sc = scan_timestamps(buf, rel, h, run)
                mn, mx = sc.min_timestamp, sc.max_timestamp
                if mx < run:  # LogAppendTime's too
                    late, worst = h.records_count, run - mn
                else:
                    late, worst = sc.late, sc.max_lateness
                zm.add(pos, bsize, h.base_offset, last, h.records_count, mn, mx, late, worst,
                       exact=True)
                if mx > run:
                    run = mx
            pos += bsize

    def block_late(self, start: int, end: int, running: int) -> tuple[int, int]:
        """(late records, largest lateness) of the batches at [start, end) of the .log
        (a zone-map block) against ``running``, the largest timestamp before them."""
        late = worst = 0
        if end <= start:
            return late, worst
        buf = self.pread(start, end - start)
        for pos, h in iter_batches(buf):
            n, w, running = count_late(buf, pos, h, running)
            late += n
            if w > worst:
                worst = w
        return late, worst

    def block_timestamps(self, start: int, end: int) -> list[tuple[int, int]]:
        """(offset, timestamp) of every data record in the batches at [start, end) of
        the .log (a zone-map block), in offset order; for re-basing disorder counts."""
        out: list[tuple[int, int]] = []
        if end <= start:
            return out
        buf = self.pread(start, end - start)
        for info_pos, h in iter_batches(buf):
            if not h.attributes & CONTROL_MASK:
                out.extend((r.offset, r.timestamp) for r in decode_batch(buf, info_pos))
        return out

    # -- sorted-timestamp index (storage/tsindex.py) ---------------------------------
    def _ts_fits(self, tsi: TsIndex, zm: ZoneMap) -> bool:
        """Whether ``tsi`` still describes a prefix of ``zm``'s complete blocks."""
        nb = tsi.nblocks
        if nb > len(zm) or tsi.interval != zm.interval:
            return False
        if nb == 0:
            return True
        return zm.first[nb - 1] == tsi.first[-1] and zm.block_end(nb - 1)[1] == tsi.covered

    def build_ts_index(self, deadline: float | None, sealed: bool) -> bool:
        """Extend the sorted-timestamp index over the zone map's complete blocks (all of
        them when ``sealed`` or the last is closed, else all but the last, which the
        next append may still grow), reading
        the .log in windows of about _ZONE_WINDOW bytes and stopping once
        time.monotonic() passes ``deadline``; a sealed segment's complete index goes to
        its sidecar. Loads a valid sidecar instead of decoding. True when complete."""
        import numpy as np

        from storage.columnar import decode_timestamps
        from storage.tsindex import TsIndex

        zm = self.zone_map()
        tsi = self._tsi
        if tsi is None or not self._ts_fits(tsi, zm):
            tsi = self._read_ts_index(zm) if sealed else None
            if tsi is None:
                tsi = TsIndex(self.base_offset, zm.interval)
            self._tsi = tsi
        n = len(zm)
        complete = n if sealed or zm.last_block_closed else max(0, n - 1)
        firsts = np.frombuffer(zm.first, dtype=np.int64)
        poss = np.frombuffer(zm.pos, dtype=np.int64)
        while tsi.nblocks < complete:
            lo = tsi.nblocks
            hi = int(np.searchsorted(poss, poss[lo] + _ZONE_WINDOW, side="left"))
            hi = min(max(hi, lo + 1), complete)
            end_pos = zm.block_end(hi - 1)[1]
            start_pos = int(poss[lo])
            buf = self.pread(start_pos, end_pos - start_pos)
            tsi.add(firsts[lo:hi].copy(), end_pos, decode_timestamps(buf, str(self.log_path)))
            if deadline is not None and tsi.nblocks < complete and time.monotonic() >= deadline:
                return False
        if sealed and not tsi.written:
            self._write_ts_index(tsi, zm)
        return True

    def ts_index(self, zm: ZoneMap, sealed: bool) -> TsIndex | None:
        """The sorted-timestamp index as far as it is built (None: nothing yet); a
        sealed segment's sidecar is loaded if valid. Never decodes the .log."""
        tsi = self._tsi
        if tsi is not None and self._ts_fits(tsi, zm):
            return tsi
        self._tsi = self._read_ts_index(zm) if sealed else None
        return self._tsi

    def decode_blocks(self, zm: ZoneMap, lo: int, hi: int) -> TimestampColumns:
        """The decoded data records (``TimestampColumns``) of zone-map blocks [lo, hi)."""
        from storage.columnar import decode_timestamps

        start_pos = zm.pos[lo]
        end_pos = zm.block_end(hi - 1)[1]
        return decode_timestamps(self.pread(start_pos, end_pos - start_pos), str(self.log_path))

    def _read_ts_index(self, zm: ZoneMap) -> TsIndex | None:
        import numpy as np

        from storage.tsindex import TsIndex, fingerprint

        try:
            data = self.ts_index_path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None
        got = TsIndex.decode(data, self.base_offset, zm.interval)
        if got is None:
            return None
        tsi, last_pos, fp = got
        size = max(self.size, 0)
        if tsi.covered != size or tsi.nblocks != len(zm) or not self._ts_fits(tsi, zm):
            return None
        if last_pos >= 0 and (last_pos + HEADER_SIZE > size
                              or fingerprint(self.pread(last_pos, HEADER_SIZE)) != fp):
            return None
        if tsi.nblocks and not np.array_equal(np.asarray(tsi.first, dtype=np.int64),
                                              np.frombuffer(zm.first, dtype=np.int64)):
            return None
        return tsi

    def _write_ts_index(self, tsi: TsIndex, zm: ZoneMap) -> None:
        """The sidecar of a sealed segment's complete index (no fsync: a cache)."""
        if tsi.covered != max(self.size, 0) or tsi.nblocks != len(zm):
            return
        last_pos = zm.last_pos
        head = self.pread(last_pos, HEADER_SIZE) if last_pos >= 0 else b""
        tmp = self.ts_index_path.with_name(self.ts_index_path.name + ".tmp")
        try:
            tmp.write_bytes(tsi.encode(last_pos, head))
            os.replace(tmp, self.ts_index_path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: the .log still rebuilds it
            return
        tsi.written = True

    # -- maintenance ---------------------------------------------------------------
    def seal(self) -> None:
        """Kafka's onBecomeInactiveSegment: final time entry, trim indexes."""
        self.pinned = False
        if self._max_ts is None:
            self._load_max()
        assert self._max_ts is not None
        if self._max_ts >= 0:
            self.time_index.maybe_append(self._max_ts, self._offset_of_max, skip_full_check=True)
        self.offset_index.trim()
        self.time_index.trim()
        # The zone map's sidecar is written off the append path: by the broker's
        # background slice (Log.build_zone_maps), or at close.

    def flush(self) -> None:
        if self._fd is not None and self.dirty:
            fsutil.FILES.fsync(self._fd)
            self.dirty = False
        self.offset_index.flush()
        self.time_index.flush()

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset >= ``offset`` (batch granularity, as
        Kafka); returns the bytes removed."""
        self.check_indexes()
        info = self.find_batch(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.make_appendable()
        self.time_index.make_appendable()
        self.bytes_since_last_index_entry = 0
        if info is None:
            return 0
        cut = self.size - info.position
        self._unmap()
        self.zone_map_path.unlink(missing_ok=True)  # written again once sealed, or at close
        self.ts_index_path.unlink(missing_ok=True)
        self._tsi = None  # rebuilt by the background step from the cut map
        os.ftruncate(self.fd(), info.position)
        self.size = info.position
        self.dirty = True
        if self._zones is not None:
            self._zone_walk(self._zones, self._zones.cut(info.position))
        # Recompute the max: last time entry, then the batches after its batch.
        ts, off = self.time_index.last_entry()
        self._max_ts, self._offset_of_max = ts, off
        _, pos = self.offset_index.lookup(off)
        nxt = self.base_offset
        _, last_pos = self.offset_index.lookup(1 << 62)
        for b in self.iter_batches(min(pos, last_pos)):
            h = b.header
            if h.max_timestamp > self._max_ts:
                self._max_ts = h.max_timestamp
                self._offset_of_max = h.base_offset + h.last_offset_delta
            nxt = h.base_offset + h.last_offset_delta + 1
        self._next_offset = nxt
        if self.size == 0:
            self._max_ts, self._offset_of_max = -1, self.base_offset
            self._rolling_loaded = True
            self._rolling_base_ts = None
            self.created_ms = int(time.time() * 1000)
        return cut

    def close(self) -> None:
        """Final time entry, trim indexes, close files (Kafka's LogSegment.close); the
        zone map, if in memory and changed, goes to its sidecar."""
        if self._zones is not None and self.size >= 0:
            self.write_zone_map()
        _OPEN.pop(id(self), None)
        self.pinned = False
        if self.offset_index.is_loaded or self.time_index.is_loaded:
            if self._max_ts is not None and self._max_ts >= 0:
                self.time_index.maybe_append(self._max_ts, self._offset_of_max, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self._unmap_and_close()

    def release(self) -> None:
        """Close files without writing anything (before deleting them)."""
        _OPEN.pop(id(self), None)
        self.offset_index.release()
        self.time_index.release()
        self._unmap_and_close()

    def delete(self) -> None:
        """Rename every file to ``.deleted`` then remove it (Kafka's async delete, done now)."""
        self.release()
        self._zones = None
        self._tsi = None
        paths = [self.log_path, self.offset_index.path, self.time_index.path,
                 self.log_path.with_suffix(".txnindex"), self.zone_map_path, self.ts_index_path]
        renamed = []
        for p in paths:
            target = Path(str(p) + ".deleted")
            try:
                os.replace(p, target)
                renamed.append(target)
            except FileNotFoundError:
                pass
        for p in renamed:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def reset_state_for_rebuild(self) -> None:
        self._zones = None  # recovery may cut the .log: the map is read or rebuilt on use
        self._tsi = None
        self._max_ts = -1
        self._offset_of_max = self.base_offset
        self._next_offset = self.base_offset
        self._rolling_loaded = False
        self.bytes_since_last_index_entry = 0
