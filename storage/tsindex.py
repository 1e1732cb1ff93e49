"""Per-block sorted timestamps: exact record counts per event-time bucket.

A zone map (storage/zonemap.py) says which blocks *may* hold a window's records; on
out-of-order data almost every block straddles a bucket edge, so it cannot count.
This index can: for each zone-map block, the block's data-record timestamps sorted,
so the records of a whole block in [a, b) are two binary searches; a run of whole
blocks keeps one more sorted array of all its timestamps, so a run of thousands of
blocks is two binary searches as well. Kafka's files are never touched: the index
lives in memory and, for a sealed segment, in a sidecar ``%020d.tsindex`` that is
only ever a cache (rebuilt from the .log when missing, torn or stale).

Sans-I/O: ``LogSegment`` reads the bytes, this module turns decoded timestamps
(``storage.columnar.decode_timestamps``) into runs, counts, and sidecar bytes.

Invariants:
- the index covers the zone map's first ``nblocks`` blocks, every one complete (a
  block of the active segment is complete once a later block has started or it holds
  more than the interval's bytes, so the next batch starts a new one; every block of
  a sealed segment is); block i's first offset is ``first[i]``, the same as
  the zone map's; a sidecar is only written for a sealed segment, covering all of it;
- a block's timestamps are those of its data records (control batches hold none;
  LogAppendTime: the batch's append time), whatever their offsets: a block the log
  start, the end of a read (high watermark, LSO) or an aborted transaction cuts is
  not counted from here but decoded from the .log (``count_columns``);
- runs partition [0, nblocks) into consecutive block ranges, oldest first; each run
  holds ``starts`` (per block, where its sorted timestamps begin in ``block_ts``; one
  more entry for the end), ``block_ts`` and ``sorted`` (the run's timestamps, sorted);
- a sidecar is valid for a .log of exactly ``covered`` bytes whose batch header at
  ``last_pos`` hashes to ``fingerprint`` and whose zone map has the same blocks.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

import crc32c as _crc32c
import numpy as np
import numpy.typing as npt

from storage.columnar import TimestampColumns
from storage.planner import PlannedRange
from storage.txnindex import TxnIndexEntry
from storage.zonemap import TSINDEX_SUFFIX, ZoneMap

SUFFIX = TSINDEX_SUFFIX
_MAGIC = b"CLTS"
_VERSION = 1
# magic, version, base offset, interval, covered bytes, last batch position,
# fingerprint, blocks, records
_HEAD = struct.Struct("<4sHqqqqIqq")
_TAIL = struct.Struct("<I")
#: Merge the runs of an active segment's index into one once there are more than this.
MAX_RUNS = 8

I64 = npt.NDArray[np.int64]


class Run(NamedTuple):
    """Blocks [lo, hi) of a segment (module docstring)."""

    lo: int
    hi: int
    starts: I64  # hi - lo + 1 entries, relative to block_ts
    block_ts: I64
    sorted: I64


def build_run(lo: int, firsts: I64, cols: TimestampColumns) -> Run:
    """The run of the blocks starting at offsets ``firsts`` (block ``lo`` on), from the
    decoded records of exactly those blocks' bytes."""
    nb = len(firsts)
    blk = np.searchsorted(firsts, cols.offsets, side="right") - 1
    order = np.lexsort((cols.timestamps, blk))
    block_ts = np.ascontiguousarray(cols.timestamps[order], dtype=np.int64)
    starts = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(np.bincount(blk, minlength=nb), out=starts[1:])
    return Run(lo, lo + nb, starts, block_ts, np.sort(cols.timestamps))


def merge_runs(runs: Sequence[Run]) -> Run:
    """One run for consecutive runs."""
    if len(runs) == 1:
        return runs[0]
    parts = [runs[0].starts[:-1]]
    base = int(runs[0].starts[-1])
    for r in runs[1:]:
        parts.append(r.starts[:-1] + base)
        base += int(r.starts[-1])
    starts = np.concatenate([*parts, np.asarray([base], dtype=np.int64)])
    block_ts = np.concatenate([r.block_ts for r in runs])
    return Run(runs[0].lo, runs[-1].hi, starts, block_ts,
               np.sort(np.concatenate([r.sorted for r in runs])))


class TsIndex:
    """The sorted timestamps of a segment's first ``nblocks`` zone-map blocks."""

    __slots__ = ("base_offset", "interval", "first", "runs", "covered", "written")

    def __init__(self, base_offset: int, interval: int) -> None:
        self.base_offset = base_offset
        self.interval = interval
        self.first: list[int] = []  # first offset per block (as the zone map's)
        self.runs: list[Run] = []
        self.covered = 0  # .log bytes the indexed blocks span
        self.written = False

    @property
    def nblocks(self) -> int:
        return len(self.first)

    @property
    def records(self) -> int:
        return sum(len(r.sorted) for r in self.runs)

    def add(self, firsts: I64, end_pos: int, cols: TimestampColumns) -> None:
        """Index the next blocks (first offsets ``firsts``), whose bytes end at
        ``end_pos``, from their decoded records; runs are merged past MAX_RUNS."""
        if not len(firsts):
            return
        self.runs.append(build_run(self.nblocks, firsts, cols))
        self.first.extend(int(f) for f in firsts)
        self.covered = end_pos
        if len(self.runs) > MAX_RUNS:
            self.runs = [merge_runs(self.runs)]
        self.written = False

    def cum(self, lo: int, hi: int, bounds: I64) -> I64:
        """For each bound, how many records of blocks [lo, hi) have a timestamp below it."""
        out = np.zeros(len(bounds), dtype=np.int64)
        for r in self.runs:
            if r.hi <= lo or r.lo >= hi:
                continue
            if lo <= r.lo and r.hi <= hi:
                out += np.searchsorted(r.sorted, bounds, side="left")
                continue
            a, b = max(lo, r.lo) - r.lo, min(hi, r.hi) - r.lo
            if b - a == 1:  # one block: two binary searches on its own sorted slice
                ts = r.block_ts[r.starts[a]:r.starts[b]]
            else:
                ts = np.sort(r.block_ts[r.starts[a]:r.starts[b]])
            out += np.searchsorted(ts, bounds, side="left")
        return out

    def holds(self, blocks: I64, t1: int, t2: int) -> npt.NDArray[np.bool_]:
        """For each block index in ``blocks`` (ascending, below ``nblocks``), whether the
        block holds a data record with t1 <= timestamp < t2: a lower-bound binary search
        of t1 in every block's sorted slice at once (one numpy step per halving)."""
        out = np.zeros(len(blocks), dtype=np.bool_)
        for r in self.runs:
            a, b = np.searchsorted(blocks, [r.lo, r.hi])
            if a == b or not len(r.block_ts):
                continue
            rel = blocks[a:b] - r.lo
            lo, hi = r.starts[rel], r.starts[rel + 1]
            at, top = lo.copy(), hi.copy()
            while True:
                live = at < top
                if not live.any():
                    break
                mid = (at + top) >> 1
                below = live & (r.block_ts[np.where(live, mid, 0)] < t1)
                at = np.where(below, mid + 1, at)
                top = np.where(live & ~below, mid, top)
            last = len(r.block_ts) - 1
            out[a:b] = (at < hi) & (r.block_ts[np.minimum(at, last)] < t2)
        return out

    # -- the sidecar ------------------------------------------------------------
    def encode(self, last_pos: int, last_header: bytes) -> bytes:
        """The sidecar: header, first offsets, block starts, per-block sorted
        timestamps, the segment's sorted timestamps (little-endian int64), CRC-32C."""
        run = merge_runs(self.runs) if self.runs else Run(
            0, 0, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int64))
        self.runs = [run] if self.runs else []
        fp = _crc32c.crc32c(last_header) if last_pos >= 0 else 0
        body = bytearray(_HEAD.pack(_MAGIC, _VERSION, self.base_offset, self.interval,
                                    self.covered, last_pos, fp, self.nblocks, len(run.sorted)))
        for a in (np.asarray(self.first, dtype=np.int64), run.starts, run.block_ts, run.sorted):
            body += a.astype("<i8", copy=False).tobytes()
        body += _TAIL.pack(_crc32c.crc32c(body))
        return bytes(body)

    @classmethod
    def decode(cls, data: bytes, base_offset: int, interval: int
               ) -> tuple[TsIndex, int, int] | None:
        """(index, last batch position, fingerprint) from a sidecar, or None when it is
        torn, damaged or for another segment or interval (rebuilt from the .log)."""
        if len(data) < _HEAD.size + _TAIL.size:
            return None
        (crc,) = _TAIL.unpack_from(data, len(data) - _TAIL.size)
        if _crc32c.crc32c(memoryview(data)[:-_TAIL.size]) != crc:
            return None
        magic, version, base, ivl, covered, last_pos, fp, nb, n = _HEAD.unpack_from(data, 0)
        if (magic != _MAGIC or version != _VERSION or base != base_offset or ivl != interval
                or nb < 0 or n < 0
                or len(data) != _HEAD.size + 8 * (2 * nb + 1 + 2 * n) + _TAIL.size):
            return None
        at = _HEAD.size

        def take(k: int) -> I64:
            nonlocal at
            a = np.frombuffer(data, dtype="<i8", count=k, offset=at).astype(np.int64, copy=False)
            at += 8 * k
            return a

        first = take(nb)
        starts, block_ts, srt = take(nb + 1), take(n), take(n)
        tsi = cls(base_offset, interval)
        tsi.first = first.tolist()
        if nb:
            tsi.runs = [Run(0, nb, starts, block_ts, srt)]
        tsi.covered = covered
        tsi.written = True
        return tsi, last_pos, fp


def plan_indexed(segments: Sequence[tuple[ZoneMap, TsIndex | None]], t1: int, t2: int,
                 start: int, end: int) -> list[PlannedRange]:
    """``storage.planner.plan_blocks`` in numpy, and tighter where an index exists: a
    block the segment's sorted-timestamp index covers is planned only when it holds a
    record in [t1, t2), not whenever its [min, max] straddles the window (on shuffled
    data most straddling blocks hold none). Blocks not indexed yet are planned from the
    zone map alone, so the plan never misses. Same ranges as plan_blocks when
    ``segments`` carry no index: a block left out ends the open range, blocks either
    side of a segment boundary join."""
    out: list[PlannedRange] = []
    if t2 <= t1 or end <= start:
        return out
    cur: list[int] | None = None  # the open range [start, end, bytes]
    joined = False  # the block before (in log order) is in the open range
    for zm, tsi in segments:
        zm.sync()
        n = len(zm)
        if not n:
            continue
        if zm.first[0] >= end:
            break
        if zm.next_offset <= start:
            continue
        firsts = np.frombuffer(zm.first, dtype=np.int64)
        poss = np.frombuffer(zm.pos, dtype=np.int64)
        ends = np.empty(n, dtype=np.int64)
        ends[:-1] = firsts[1:]
        ends[-1] = zm.next_offset
        sel = ((np.frombuffer(zm.max, dtype=np.int64) >= t1)
               & (np.frombuffer(zm.min, dtype=np.int64) < t2) & (ends > start) & (firsts < end))
        nb = min(tsi.nblocks, n) if tsi is not None else 0
        if nb:
            assert tsi is not None
            cand = np.flatnonzero(sel[:nb])
            sel[cand] = tsi.holds(cand, t1, t2)
        idx = np.flatnonzero(sel)
        if not len(idx):
            joined = False
            continue
        cum = np.empty(n + 1, dtype=np.int64)
        cum[:-1] = poss
        cum[-1] = zm.covered  # bytes of blocks [i, j] = cum[j + 1] - cum[i]
        breaks = np.flatnonzero(np.diff(idx) != 1)
        g0 = np.concatenate(([idx[0]], idx[breaks + 1]))
        g1 = np.concatenate((idx[breaks], [idx[-1]]))
        for a, b in zip(g0.tolist(), g1.tolist(), strict=True):
            e, nbytes = min(int(ends[b]), end), int(cum[b + 1] - cum[a])
            if joined and a == 0 and cur is not None:
                cur[1], cur[2] = e, cur[2] + nbytes
                continue
            if cur is not None:
                out.append(PlannedRange(*cur))
            cur = [max(int(firsts[a]), start), e, nbytes]
        joined = bool(sel[-1])
    if cur is not None:
        out.append(PlannedRange(*cur))
    return out


def fingerprint(header: bytes) -> int:
    return _crc32c.crc32c(header)


def count_columns(cols: TimestampColumns, bounds: I64, start: int, end: int,
                  aborted: Sequence[TxnIndexEntry] = ()) -> I64:
    """For each bound, how many of the decoded records with offsets in [start, end),
    not of an aborted transaction, have a timestamp below it. A record is aborted when
    its batch is transactional, of the entry's producer, at offsets [first, marker)."""
    keep = (cols.offsets >= start) & (cols.offsets < end)
    for e in aborted:
        keep &= ~(cols.transactional & (cols.producer_ids == e.producer_id)
                  & (cols.offsets >= e.first_offset) & (cols.offsets < e.last_offset))
    ts = np.sort(cols.timestamps[keep])
    return np.searchsorted(ts, bounds, side="left").astype(np.int64)
