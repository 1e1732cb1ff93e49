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

The search inside one batch (``first_record_at_or_after``) and the block summaries
live in storage/batch_search.py; recovery's scan of the .log in storage/recovery.py
(``LogSegment.recover`` applies it).
"""

from __future__ import annotations

import os
import struct
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from storage import fsutil
from storage.batch_search import (
    SUMMARY_MIN_RECORDS,
    BatchSummary,
    block_range,
    build_summary,
    charge_summary_blocks,
    first_record_at_or_after,
    search_block,
    summary_block,
    summary_fits,
)
from storage.config import LogConfig
from storage.errors import CorruptRecordError, LogStorageError
from storage.index import OffsetIndex, TimeIndex
from storage.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    count_late,
    decode_batch,
    iter_batches,
    scan_timestamps,
)
from storage.recovery import INT32_MAX, scan_log
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
            self.recover(cut=False)

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
            if not summary_fits(h[12]):
                return None  # over the process-wide budget: search this batch directly
            data = os.pread(fd, h[1] + LOG_OVERHEAD, pos)
            summary = self._keep_summary(pos, build_summary(data, 0, BatchHeader._make(h)))
        return summary

    def _keep_summary(self, pos: int, summary: BatchSummary) -> BatchSummary:
        """Remember ``summary``, counted against the process-wide SUMMARY_MAX_BLOCKS."""
        self._summaries[pos] = summary
        self._summary_blocks += summary.blocks
        charge_summary_blocks(summary.blocks)
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
                if not summary_fits(h.records_count):
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
        self._walk_from = array("i")  # positions past a cut would be stale
        self._summaries.clear()
        charge_summary_blocks(-self._summary_blocks)
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
        def in_time(pos: int) -> bool:
            return deadline is None or pos == start or time.monotonic() < deadline

        def invalid(pos: int) -> Exception:
            return CorruptRecordError(f"{self.log_path}: no valid batch header at {pos}")

        zm.sync()
        run = zm.running  # the batches are read anyway: disorder is counted exactly here
        for buf, rel, pos, h in read_batches(self.fd(), start, max(self.size, 0), _ZONE_WINDOW,
                                             invalid, before_read=in_time):
            run = zone_add_batch(zm, buf, rel, pos, h, run)

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

    def recover(self, *, min_offset: int | None = None, cut: bool = True,
                allow_gaps: bool = False) -> int:
        """Validate the .log and rebuild both indexes (Kafka's ``LogSegment.recover``;
        the rules are storage/recovery.py's); returns the number of bytes cut.

        ``min_offset`` is the first offset the segment may hold (the previous
        segment's end). With ``cut=False`` (an index found damaged during normal
        operation) the .log is never shortened: indexes cover the valid prefix only,
        and gaps are always allowed, since nothing is removed.
        """
        fd = self.fd()
        self._unmap()
        size = os.fstat(fd).st_size
        self.size = size
        self._zones = None  # recovery may cut the .log: the map is read or rebuilt on use
        self._tsi = None
        scan = scan_log(
            fd, size, base=self.base_offset, min_offset=min_offset,
            allow_gaps=allow_gaps or not cut,
            index_interval=self.config.index_interval_bytes,
            max_offset_entries=self.offset_index.max_entries,
            max_time_entries=self.time_index.max_entries,
        )
        removed = size - scan.valid_end if cut else 0
        if removed:
            os.ftruncate(fd, scan.valid_end)
            self.size = scan.valid_end
        self.offset_index.replace_entries(scan.offset_entries)
        self.time_index.replace_entries(scan.time_entries)
        self._max_ts = scan.max_timestamp
        self._offset_of_max = scan.offset_of_max
        self._next_offset = scan.next_offset
        self._rolling_base_ts = scan.first_timestamp
        self._rolling_loaded = True
        self.bytes_since_last_index_entry = 0
        os.fsync(fd)
        self.mark_indexes_checked()
        return removed


def read_batches(fd: int, start: int, end: int, window: int,
                 invalid: Callable[[int], Exception], *,
                 before_read: Callable[[int], bool] | None = None,
                 after_read: Callable[[int], object] | None = None,
                 ) -> Iterator[tuple[bytes, int, int, BatchHeader]]:
    """(buffer, position in it, file position, header) of each whole batch in [start, end)
    of the .log open as ``fd`` (``start`` a batch boundary), read in windows of ``window``
    bytes (a larger batch whole). A torn tail ends the walk, and so does ``before_read(pos)``
    returning False before a window is read; ``after_read`` is told each read's size; a bad
    batch header raises ``invalid(pos)``."""
    pos = start
    buf = b""
    buf_pos = pos
    unpack = HEADER_STRUCT.unpack_from
    make = BatchHeader._make
    while end - pos >= HEADER_SIZE:
        rel = pos - buf_pos
        if rel + HEADER_SIZE > len(buf):
            if before_read is not None and not before_read(pos):
                return
            buf = os.pread(fd, min(window, end - pos), pos)
            buf_pos, rel = pos, 0
            if after_read is not None:
                after_read(len(buf))
            if len(buf) < HEADER_SIZE:
                return
        h = make(unpack(buf, rel))
        if h.magic != MAGIC or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise invalid(pos)
        size = h.batch_length + LOG_OVERHEAD
        if pos + size > end:
            return
        if rel + size > len(buf):
            buf = os.pread(fd, max(size, min(window, end - pos)), pos)
            buf_pos, rel = pos, 0
            if after_read is not None:
                after_read(len(buf))
            if len(buf) < size:
                return
        yield buf, rel, pos, h
        pos += size


def zone_add_batch(zm: ZoneMap, buf: bytes, rel: int, pos: int, h: BatchHeader,
                   running: int) -> int:
    """Add the whole batch at ``rel`` of ``buf`` (position ``pos`` of its .log, header
    ``h``) to ``zm`` with exact disorder counts against ``running`` (the largest
    timestamp before it); returns the running max after it. The zone-map rebuild walk of
    a local segment and of a remote one (storage/remote/tier.py) share it."""
    bsize = h.batch_length + LOG_OVERHEAD
    last = h.base_offset + h.last_offset_delta
    if h.attributes & CONTROL_MASK or h.records_count <= 0:
        zm.add(pos, bsize, h.base_offset, last, 0, 0, 0, 0, 0)
        return running
    sc = scan_timestamps(buf, rel, h, running)
    mn, mx = sc.min_timestamp, sc.max_timestamp
    if mx < running:  # LogAppendTime's too
        late, worst = h.records_count, running - mn
    else:
        late, worst = sc.late, sc.max_lateness
    zm.add(pos, bsize, h.base_offset, last, h.records_count, mn, mx, late, worst, exact=True)
    return max(running, mx)
