"""Timestamp zone maps: per block of a segment, the smallest and largest record timestamp.

A segment's ``.timeindex`` holds the running maximum, so it can say where the first
record at or after T lies but never which parts of the log hold *no* record of a
window [T1, T2) (KIP-33: the index is not monotonic in event time). A zone map can:
a block whose [min, max] misses the window cannot hold a match. Kafka's files are
never touched; a zone map lives in memory and, once its segment is sealed (or the
broker closes), in a sidecar ``%020d.zonemap`` that is only ever a cache.

Invariants:
- blocks are consecutive runs of whole batches in ``.log`` order; block i covers bytes
  [pos[i], pos[i+1]) and offsets [first[i], first[i+1]) (the last block ends at
  ``covered`` / ``next_offset``); a batch starts a new block when the current one
  already holds more than ``interval`` bytes (``index.interval.bytes``: the offset
  index's rule, so a block is about what one index entry spans);
- min/max are over the block's data records' effective timestamps (LogAppendTime:
  the batch's append time); control batches hold no data record; a block without a
  data record has min = NO_MIN > max = NO_MAX and matches no window;
- disorder: ``p_at[i]`` is the running max the block's records were compared with
  (the max over every data record before the block, as far as it was known when the
  block was built; NO_MAX when nothing was); ``late[i]`` counts the block's records
  whose timestamp is below the running max before them (p_at[i] included) and
  ``worst[i]`` is the largest such gap, counted exactly by the append's validation
  walk (given ``tail``, the running max before the batch) or a rebuild's walk;
  late[i] = -1 means not counted yet (a batch added without exact counts).
  ``Log.disorder_stats`` counts such a block, and re-bases a block whose true prefix
  max is not p_at[i] (after retention, DeleteRecords, compaction, or a rebuild that
  did not know earlier segments), keeping the new counts;
- ``covered`` is how many ``.log`` bytes the map describes; a sidecar is valid for a
  ``.log`` of at least ``covered`` bytes whose batch header at ``last_pos`` hashes to
  ``fingerprint`` (segments only grow or lose a tail, so the prefix is then the
  bytes the map was built from); the rest is walked from the ``.log``.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence

import crc32c as _crc32c

NO_MIN = (1 << 63) - 1  # the min of a block without data records
NO_MAX = -(1 << 63)  # the max of a block without data records; "no running max yet"
SUFFIX = ".zonemap"
#: The sorted-timestamp index sidecar (storage/tsindex.py, which needs numpy) beside it.
TSINDEX_SUFFIX = ".tsindex"

_MAGIC = b"CLZM"
_VERSION = 1
# magic, version, base offset, interval, covered, next offset, running max after the
# last block, last batch position, fingerprint, blocks
_HEAD = struct.Struct("<4sHqqqqqqIq")
_TAIL = struct.Struct("<I")
_FIELDS = 8  # first, pos, min, max, records, p_at, late, worst
_LE = sys.byteorder == "little"


class ZoneMap:
    """The blocks of one segment (module docstring), built batch by batch.

    The produce path only queues a tuple per batch (``pending``, what its validation
    walk found, see BatchScan; no record is read); ``sync`` folds the queue into the
    arrays in one tight loop, before anything reads them (``LogSegment.zone_map``) or
    when 4096 batches are queued. ``covered`` counts queued batches too.
    """

    __slots__ = ("base_offset", "interval", "first", "pos", "min", "max", "records", "p_at",
                 "late", "worst", "covered", "next_offset", "running", "last_pos",
                 "fingerprint", "_block_bytes", "dirty", "pending", "tail")

    def __init__(self, base_offset: int, interval: int, running: int = NO_MAX) -> None:
        self.base_offset = base_offset
        self.interval = interval
        self.first = array("q")
        self.pos = array("q")
        self.min = array("q")
        self.max = array("q")
        self.records = array("q")
        self.p_at = array("q")
        self.late = array("q")
        self.worst = array("q")
        self.covered = 0
        self.next_offset = base_offset
        self.running = running  # the running max after every block (p_at of the next)
        self.last_pos = -1
        self.fingerprint = 0
        self._block_bytes = 0
        self.dirty = True
        self.pending: list[tuple[int, int, int, int, int, int, int, int, int, bool]] = []
        self.tail = running  # the running max after every batch added, queued ones too

    def __len__(self) -> int:
        return len(self.first)

    # -- building -------------------------------------------------------------
    def add(self, pos: int, size: int, base: int, last: int, records: int, mn: int, mx: int,
            late: int, worst: int, exact: bool = False) -> None:
        """Describe the batch at ``pos`` (``size`` bytes, offsets base..last) holding
        ``records`` data records with timestamps in [mn, mx]; ``late``/``worst`` are
        its disorder inside the batch (BatchScan; late -1 = not counted), or with
        ``exact`` already against the running max before it. Queued, then folded
        (``sync``) before the map is read."""
        self.pending.append((pos, size, base, last, records, mn, mx, late, worst, exact))
        self.covered = pos + size
        if records > 0 and mx > self.tail:
            self.tail = mx
        if len(self.pending) >= 4096:
            self.sync()

    def sync(self) -> None:
        """Fold the queued batches into blocks. No record is read: the append path and
        the rebuild walk queue exact counts; a batch queued with in-batch counts only
        that straddles the running max (records below it and above it), or was not
        counted, leaves its block's count unknown (late -1) until
        ``Log.disorder_stats`` counts that block from its records."""
        pend = self.pending
        if not pend:
            return
        self.pending = []
        first, posa, mina, maxa, reca, pat, lata, wora = self._arrays()
        interval = self.interval
        bb = self._block_bytes
        p = self.running
        i = len(first) - 1
        if i >= 0:
            bmin, bmax, brec, blate, bworst = mina[i], maxa[i], reca[i], lata[i], wora[i]
        else:
            bb = interval + 1  # the first batch opens a block
            bmin, bmax, brec, blate, bworst = NO_MIN, NO_MAX, 0, 0, 0
        for pos, size, base, _last, n, mn, mx, late, worst, exact in pend:
            if bb > interval:
                if i >= 0:
                    mina[i], maxa[i], reca[i], lata[i], wora[i] = bmin, bmax, brec, blate, bworst
                first.append(base)
                posa.append(pos)
                mina.append(NO_MIN)
                maxa.append(NO_MAX)
                reca.append(0)
                pat.append(p)
                lata.append(0)
                wora.append(0)
                i += 1
                bmin, bmax, brec, blate, bworst, bb = NO_MIN, NO_MAX, 0, 0, 0, 0
            bb += size
            if n <= 0:
                continue
            if mn < bmin:
                bmin = mn
            if mx > bmax:
                bmax = mx
            brec += n
            if exact:
                pass
            elif mx < p:  # every record is below what came before
                late, worst = n, p - mn
            elif mn < p or late < 0:
                blate = -1  # straddles, or not counted: counted later from the records
            if late > 0 and blate >= 0:
                blate += late
                if worst > bworst:
                    bworst = worst
            if mx > p:
                p = mx
        mina[i], maxa[i], reca[i], lata[i], wora[i] = bmin, bmax, brec, blate, bworst
        last = pend[-1]
        self.next_offset = last[3] + 1
        self.last_pos = last[0]
        self._block_bytes = bb
        self.running = p
        self.dirty = True

    def cut(self, position: int) -> int:
        """Forget the blocks that reach ``position`` (the .log is cut there, at a batch
        boundary; a block ending exactly there goes too, so its last batch is walked
        again and the fingerprint stays known); returns the position to walk the .log
        from again (``covered`` when ``position`` is not below it)."""
        self.sync()
        if position >= self.covered:
            return self.covered
        keep = len(self.first)
        while keep and self.block_end(keep - 1)[1] >= position:
            keep -= 1
        if keep == len(self.first):
            return self.covered
        resume = self.pos[keep]
        self.running = self.tail = self.p_at[keep]
        self.next_offset = self.first[keep]
        for a in self._arrays():
            del a[keep:]
        self.covered = resume
        self._block_bytes = self.interval + 1  # the next batch starts a block
        self.last_pos = -1
        self.fingerprint = 0
        self.dirty = True
        return resume

    def _arrays(self) -> tuple[array, ...]:
        return (self.first, self.pos, self.min, self.max, self.records, self.p_at,
                self.late, self.worst)

    # -- reading --------------------------------------------------------------
    def block_end(self, i: int) -> tuple[int, int]:
        """(end offset exclusive, end position) of block i."""
        if i + 1 < len(self.first):
            return self.first[i + 1], self.pos[i + 1]
        return self.next_offset, self.covered

    @property
    def last_block_closed(self) -> bool:
        """Whether the next batch starts a new block (the last one already holds more
        than ``interval`` bytes, or was cut): the last block will not grow."""
        self.sync()
        return self._block_bytes > self.interval

    @property
    def min_timestamp(self) -> int:
        return min(self.min) if self.min else NO_MIN

    @property
    def max_timestamp(self) -> int:
        return max(self.max) if self.max else NO_MAX

    # -- the sidecar ------------------------------------------------------------
    def encode(self, last_header: bytes) -> bytes:
        """The sidecar's bytes: header, the eight arrays (little-endian int64), CRC-32C.
        ``last_header`` is the 61-byte header of the batch at ``last_pos`` as on disk
        (hashed into the fingerprint here, off the append path)."""
        self.sync()
        self.fingerprint = _crc32c.crc32c(last_header) if self.last_pos >= 0 else 0
        n = len(self.first)
        body = bytearray(_HEAD.pack(_MAGIC, _VERSION, self.base_offset, self.interval,
                                    self.covered, self.next_offset, self.running,
                                    self.last_pos, self.fingerprint, n))
        for a in self._arrays():
            if _LE:
                body += a.tobytes()
            else:
                b = array("q", a)
                b.byteswap()
                body += b.tobytes()
        body += _TAIL.pack(_crc32c.crc32c(body))
        return bytes(body)

    @classmethod
    def decode(cls, data: bytes, base_offset: int, interval: int) -> ZoneMap | None:
        """The map a sidecar holds, or None when it is torn, damaged or for another
        segment or index interval (the caller then rebuilds from the .log)."""
        if len(data) < _HEAD.size + _TAIL.size:
            return None
        (crc,) = _TAIL.unpack_from(data, len(data) - _TAIL.size)
        if _crc32c.crc32c(memoryview(data)[:-_TAIL.size]) != crc:
            return None
        (magic, version, base, ivl, covered, next_offset, running, last_pos, fingerprint,
         n) = _HEAD.unpack_from(data, 0)
        if (magic != _MAGIC or version != _VERSION or base != base_offset or ivl != interval
                or n < 0 or len(data) != _HEAD.size + _FIELDS * 8 * n + _TAIL.size):
            return None
        zm = cls(base_offset, interval, running)
        at = _HEAD.size
        for a in zm._arrays():
            a.frombytes(data[at:at + 8 * n])
            if not _LE:
                a.byteswap()
            at += 8 * n
        zm.covered, zm.next_offset = covered, next_offset
        zm.last_pos, zm.fingerprint = last_pos, fingerprint
        zm._block_bytes = covered - zm.pos[-1] if n else 0
        zm.dirty = False
        return zm

    def matches(self, header_at_last_pos: bytes) -> bool:
        """Whether the .log still holds, at ``last_pos``, the batch the map ended with."""
        return self.last_pos < 0 or _crc32c.crc32c(header_at_last_pos) == self.fingerprint


def count_late(timestamps: Sequence[int], running: int) -> tuple[int, int]:
    """(records below the running max before them, largest gap), starting from ``running``."""
    late = 0
    worst = 0
    r = running
    for t in timestamps:
        if t > r:
            r = t
        elif t < r:
            late += 1
            if r - t > worst:
                worst = r - t
    return late, worst
