"""The search inside one record batch, and the per-batch block summaries that speed it up.

``first_record_at_or_after`` answers "the first record in offset order with
timestamp >= T and offset >= O" inside one batch, exactly, for any timestamp order;
``LogSegment.find_by_timestamp`` calls it (or the summary path) for the one batch its
index walk lands on.

Invariants:
- every answer equals a record-by-record scan of the batch (hypothesis-tested
  against that oracle in tests/storage/test_batch_search.py and test_block_reads.py);
- a run of records with the same layout (same length-varint bytes, same
  timestamp-varint width, non-negative deltas) sits every ``size`` bytes, so each
  byte of its timestamp varints is one strided column: such runs are searched
  column-wise (strided slices, ``bytes.translate``, integer masks), everything else
  record by record;
- a ``BatchSummary`` describes the bytes of one uncompressed CreateTime batch exactly
  as they are on disk: per block of ``BLOCK`` records the running max timestamp and
  the block's first record position, so the first record with ts >= T lies in block
  ``bisect_left(maxima, T)``; a segment drops its summaries whenever its .log is cut;
- summaries of all segments of the process together hold at most
  ``SUMMARY_MAX_BLOCKS`` blocks (``summary_fits`` / ``charge_summary_blocks``); past
  it a batch is searched directly, nothing is evicted.

One- and two-byte varints are decoded inline in the per-record loops: a call per
field is the loops' main cost (bench/bench_records.py, row "varint decode: a call per
field vs inline", ~3x per field). Longer ones go to
``storage.primitives.read_uvarint_trusted`` (segment bytes were validated on append
or in recovery).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from itertools import accumulate
from typing import NamedTuple

from storage import codecs
from storage.primitives import read_uvarint_trusted
from storage.records import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    HIGH_BIT,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    column,
)

Buf = bytes | bytearray | memoryview


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
                u, q = read_uvarint_trusted(data, p)
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
                tu, r = read_uvarint_trusted(data, ts_at)
        ts = base_ts + ((tu >> 1) ^ -(tu & 1))
        if ts >= target_ts:
            u, _ = read_uvarint_trusted(data, r)
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
                    u, q = read_uvarint_trusted(data, rp)
                    u, r = read_uvarint_trusted(data, q + 1)
                    ts = base_ts + ((u >> 1) ^ -(u & 1))
                    u, _ = read_uvarint_trusted(data, r)
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


def summary_fits(records: int) -> bool:
    """Whether a summary of a batch of ``records`` records fits the process budget."""
    return _summary_blocks_in_use + -(-records // BLOCK) <= SUMMARY_MAX_BLOCKS


def charge_summary_blocks(blocks: int) -> None:
    """Count ``blocks`` (kept by a segment) against SUMMARY_MAX_BLOCKS; a negative
    number gives them back (the segment dropped its summaries)."""
    global _summary_blocks_in_use
    _summary_blocks_in_use += blocks

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
        u, q = read_uvarint_trusted(data, p)
        length = (u >> 1) ^ -(u & 1)
        lw = q - p
        size = lw + length
        tu, r = read_uvarint_trusted(data, q + 1)
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
                u, q = read_uvarint_trusted(data, p)
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
            tw = read_uvarint_trusted(data, at0)[1] - at0
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
        tu, r = read_uvarint_trusted(data, at0 + lo * size)
        u = data[r]
        if u >= 0x80:
            c = data[r + 1]
            u = (u & 0x7F) | (c << 7) if c < 0x80 else read_uvarint_trusted(data, r)[0]
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
                u, q = read_uvarint_trusted(data, p)
        tu = data[q + 1]  # after the attributes byte
        if tu < 0x80:
            r = q + 2
        else:
            c = data[q + 2]
            if c < 0x80:
                tu = (tu & 0x7F) | (c << 7)
                r = q + 3
            else:
                tu, r = read_uvarint_trusted(data, q + 1)
        d = (tu >> 1) ^ -(tu & 1)
        if d >= t:
            u, _ = read_uvarint_trusted(data, r)
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
        u, q = read_uvarint_trusted(data, p)
        _, r = read_uvarint_trusted(data, q + 1)  # the timestamp delta, after the attributes byte
        od, _ = read_uvarint_trusted(data, r)
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
