"""Log compaction: Kafka's log cleaner, beside the log rather than inside it.

A clean of one log has three phases, split by thread:

1. ``plan(log, checkpoint, now_ms, ...)`` on the log's thread (the event loop):
   the cleanable range and a snapshot of the sealed segments below it, each with a
   duplicated ``.log`` descriptor (``LogToClean``, ``CleanPlan``);
2. ``CleanPlan.run(...)`` on any thread: builds the key map over the dirty range and
   writes one cleaned segment per group of old segments as ``.cleaned`` files
   (``storage.swap`` step 1). It never touches the ``Log`` object;
3. ``CleanResult.commit(log)`` on the log's thread: checks that every old segment is
   still in the log, unchanged, then ``storage.swap`` steps 2 and 3 and
   ``Log.replace_segments``: the segment list changes in one synchronous step, so
   appends, reads and searches on the event loop see the old or the new segments.

Kafka's rules (``LogCleaner``, ``LogCleanerManager``), as kept here:
- only logs whose ``cleanup.policy`` includes ``compact``; the cleaner checkpoint
  (``cleaner-offset-checkpoint``, Kafka's text format) holds each log's first dirty
  offset, reset to the log start when it lies outside [log start, log end];
- the first uncleanable offset is the lowest of: the partition's last stable offset
  (LSO: the first offset of its oldest open transaction, else the high watermark;
  passed in by the broker), the active segment's base, and the base of the first
  dirty sealed segment whose largest timestamp is later than
  ``now - min.compaction.lag.ms``; the active segment is never cleaned, and no
  record at or above the LSO is removed (the LSO is a batch base: the segment
  holding it is rewritten only up to it);
- a log is cleaned when dirty bytes / (clean + dirty bytes) > ``min.cleanable.dirty.ratio``,
  or when some dirty sealed segment's first batch timestamp is older than
  ``now - max.compaction.lag.ms`` (KIP-354) and it has dirty bytes;
- the key map holds key -> latest offset over [first dirty, first uncleanable) in
  offset order, from data batches that are not aborted (control batches and aborted
  transactional batches put no key in it); when it is full (``OffsetMap.budget``)
  it covers a prefix, and the clean goes up to the end of the last whole batch it
  mapped: ``next dirty offset``;
- aborted data: a transactional batch of producer P whose base offset lies in
  [first offset, ABORT marker offset) of one of P's aborted transactions (the
  ``.txnindex`` entries of the log, read by ``plan``: ``AbortedTxns``) is removed
  whole when it lies below the next dirty offset;
- every record below the next dirty offset whose offset is below the map's offset
  for its key goes; a record with a null key goes (Kafka counts it invalid);
- a tombstone (null value) that stays gets a delete horizon (KIP-534): the first
  clean that keeps it rewrites its batch with attribute bit 6 and baseTimestamp =
  now + ``delete.retention.ms`` (record deltas re-based); a clean at or after the
  horizon removes it;
- a batch keeps its base offset and its last offset delta (so its offsets have
  gaps), its codec, producer fields and leader epoch; maxTimestamp is that of the
  records left (LogAppendTime batches keep theirs). A batch whose records all go is
  dropped, unless it is the last batch of its producer id in the rewritten segments:
  then it stays as an empty batch (``empty_batch``), so the producer's sequence
  survives a crash restart (an aborted batch kept this way has no records, so a
  read_committed consumer has nothing to skip in it);
- control batches (COMMIT/ABORT markers), Kafka's rule (``_TxnMarkers``): a marker
  stays while a data batch of its transaction is left (a transactional batch of
  its producer after that producer's previous marker, kept by this clean with
  records or emptied as the producer's last batch). A marker no batch needs gets a
  delete horizon as a tombstone does (bit 6, baseTimestamp = now +
  ``delete.retention.ms``, its record's timestamp kept) and a clean at or after the
  horizon removes it; an empty control batch goes at once. Markers at or above
  the next dirty offset, and a producer's fencing marker (its last batch here,
  with a higher epoch than its last data batch: the epoch a coordinator's abort
  bumped lives only there), stay as they are. Kafka decides before filtering a
  batch's records, so its markers outlive their data by one more clean; here the
  horizon is set by the clean that removes the last data;
- the ``.txnindex`` of a cleaned segment holds the old segments' entries whose
  ABORT marker still has data of its transaction (``CleanedGroup.aborted``, written
  by ``Log.replace_segments``); the broker replaces the cleaned range of its
  in-memory aborted list with them. The broker's rebuild from the log at start
  never brings a dropped entry back (an ABORT marker whose data is gone opens no
  transaction); it may drop sooner an entry whose data went in a clean that did not
  reach its marker (past the key map, or in a group a crash kept from committing);
- segments are cleaned in groups of consecutive segments whose total size fits
  ``segment.bytes`` (and whose offsets fit a relative int32), each group into one
  new segment named after its first base offset, with ``.index``/``.timeindex``
  rebuilt from the surviving batches by the append rule (KAFKA-806) plus the final
  time entry.

Bounded memory: the map's ``budget`` is bytes counted per entry as
``ENTRY_OVERHEAD + len(key)`` (a Python dict entry with its bytes key and int
offset; Kafka counts 24 bytes per MD5-hashed entry); segments are read in windows
of ``READ_WINDOW`` bytes (or one larger batch). Bounded I/O: ``Throttler``, shared
by all cleaners, sleeps so that bytes read plus written stay within the rate.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

import crc32c as _crc32c

from storage import codecs, swap
from storage.checkpoint import read_checkpoint, write_checkpoint
from storage.primitives import read_varint, read_varlong, write_varint
from storage.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    _lanes_list,
    _layout,
    _next_has_same_size,
    _run_keys,
    _run_length,
    _run_offsets_ok,
    scan_timestamps,
)
from storage.segment import INT32_MAX, LogSegment, read_batches
from storage.txnindex import TxnIndexEntry

if TYPE_CHECKING:
    from storage.log import Log

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
ENTRY_OVERHEAD = 100  # bytes per key map entry besides the key (measured: ~95 on CPython 3.11)
READ_WINDOW = 1 << 20
_MIN_RUN = 40
_OI_ENTRY = 8
_TI_ENTRY = 12


class CleanAborted(Exception):
    """The clean was stopped (shutdown) or the log changed under it."""


# ---------------------------------------------------------------- settings and I/O bound


@dataclass(frozen=True)
class CleanerSettings:
    """The broker's ``log.cleaner.*`` settings that a clean needs."""

    dedupe_buffer_bytes: int = 128 << 20
    load_factor: float = 0.9
    io_max_bytes_per_second: float = float("inf")

    @property
    def map_budget(self) -> int:
        return int(self.dedupe_buffer_bytes * self.load_factor)


class Throttler:
    """Kafka's Throttler: after each chunk, sleep so that the bytes counted since the
    last check stay within ``rate`` per second (shared by every cleaner thread)."""

    CHECK_S = 0.3

    def __init__(self, rate: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = rate
        self._sleep = sleep
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._bytes = 0.0

    def maybe_throttle(self, n: int) -> None:
        if self.rate == float("inf"):
            return
        with self._lock:
            self._bytes += n
            now = time.monotonic()
            elapsed = now - self._start
            if elapsed < self.CHECK_S and self._bytes < self.rate * self.CHECK_S:
                return
            wait = self._bytes / self.rate - elapsed
            self._start, self._bytes = now, 0.0
        if wait > 0:
            self._sleep(wait)


# ---------------------------------------------------------------- the key map


class OffsetMap:
    """Key -> latest offset, bounded by ``budget`` bytes (see the module docstring).

    ``latest_offset`` is the last offset the map speaks for (Kafka's
    ``OffsetMap.latestOffset``): records above it are kept whatever their key.
    """

    __slots__ = ("map", "budget", "used", "latest_offset")

    def __init__(self, budget: int) -> None:
        self.map: dict[bytes, int] = {}
        self.budget = budget
        self.used = 0
        self.latest_offset = -1

    @staticmethod
    def entry_cost(key: bytes) -> int:
        return ENTRY_OVERHEAD + len(key)

    def put_run(self, keys: list[bytes], offsets: list[int]) -> bool:
        """Add keys[i] -> offsets[i] (in order: a later offset of a key wins) if there is
        room for every new key among them; otherwise add none and return False. The
        map speaks for whole batches only: an entry from the part of a batch that
        fitted would point above ``latest_offset`` and remove records the clean does
        not cover."""
        m = self.map
        fresh = set(keys).difference(m)
        cost = ENTRY_OVERHEAD * len(fresh) + sum(map(len, fresh))
        if self.used + cost > self.budget:
            return False
        m.update(zip(keys, offsets, strict=True))
        self.used += cost
        return True


# ---------------------------------------------------------------- what to clean


@dataclass
class LogToClean:
    """Kafka's LogToClean: the cleanable range of one log and why it is (not) due."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    need_now: bool  # a dirty record is older than max.compaction.lag.ms

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    def due(self, min_ratio: float) -> bool:
        if self.clean_bytes + self.cleanable_bytes == 0:
            return False
        return (self.need_now and self.cleanable_bytes > 0) or self.ratio > min_ratio


def first_dirty_offset(log: Log, checkpoint: int | None) -> int:
    """The checkpointed first dirty offset, reset to the log start when invalid."""
    start = log.log_start_offset
    if checkpoint is None or checkpoint < start or checkpoint > log.log_end_offset:
        return start
    return checkpoint


def log_to_clean(log: Log, checkpoint: int | None, now_ms: int,
                 last_stable_offset: int | None = None) -> LogToClean:
    """Kafka's cleanableOffsets + maxCompactionDelay + LogToClean for ``log`` (on its thread).

    ``last_stable_offset`` is the partition's LSO (the first offset of its oldest open
    transaction, else the high watermark), which only the broker knows; None means no
    transaction is open (tools and tests on a bare log)."""
    cfg = log.config
    dirty = first_dirty_offset(log, checkpoint)
    segs = log.segments
    sealed = segs[:-1]
    uncleanable = log.active.base_offset
    if last_stable_offset is not None:
        uncleanable = min(uncleanable, last_stable_offset)
    if cfg.min_compaction_lag_ms > 0:
        for i, s in enumerate(sealed):
            upper = segs[i + 1].base_offset
            if upper <= dirty:
                continue
            if s.largest_timestamp() > now_ms - cfg.min_compaction_lag_ms:
                uncleanable = min(uncleanable, s.base_offset)
                break
    uncleanable = max(dirty, uncleanable)
    # Kafka: the first segment at or after the uncleanable offset bounds the bytes.
    bound = uncleanable
    for s in segs:
        if s.base_offset >= uncleanable:
            bound = s.base_offset
            break
    clean_bytes = cleanable = 0
    need_now = False
    lag = max(cfg.max_compaction_lag_ms, 0)
    for i, s in enumerate(segs):
        upper = segs[i + 1].base_offset if i + 1 < len(segs) else log.log_end_offset + 1
        size = max(s.size, 0)
        if upper <= dirty and upper <= log.log_start_offset:
            continue
        if upper <= dirty:
            clean_bytes += size
        elif s.base_offset < bound:
            cleanable += size
        if i < len(sealed) and upper > dirty:
            first = s.rolling_base_timestamp()
            if first is not None and 0 < first < now_ms - lag:
                need_now = True
    return LogToClean(dirty, uncleanable, clean_bytes, cleanable, need_now)


# ---------------------------------------------------------------- reading batches


def _batches(fd: int, start: int, end: int, throttler: Throttler | None,
             abort: threading.Event | None) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position in it, header) of each whole batch in [start, end) of a .log."""

    def go_on(_pos: int) -> bool:
        if abort is not None and abort.is_set():
            raise CleanAborted("cleaning stopped")
        return True

    def invalid(pos: int) -> Exception:
        return CleanAborted(f"no valid batch header at position {pos}")

    for buf, rel, _pos, h in read_batches(
            fd, start, end, READ_WINDOW, invalid, before_read=go_on,
            after_read=None if throttler is None else throttler.maybe_throttle):
        yield buf, rel, h
        # Give the GIL away between batches: a thread waiting for it (the broker's
        # event loop) runs first, so cleaning takes the time the loop leaves idle.
        time.sleep(0)


def _zz(data: bytes, p: int, end: int) -> tuple[int, int]:
    """A zig-zag varint at p: (value, position after it). One- and two-byte values
    are decoded here without a call (the compaction walk runs this per field of every
    record); longer ones go to ``storage.primitives.read_varlong``."""
    b = data[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    c = data[p + 1]
    if c < 0x80:
        u = (b & 0x7F) | (c << 7)
        return (u >> 1) ^ -(u & 1), p + 2
    return read_varlong(data, p, end)


class _Records:
    """The records of one batch as columns: position and size of each record in
    ``data``, offset delta, key (None = null key), null value (tombstone).

    Runs of records sharing one layout (records.py's ``_layout``/``_run_length``:
    same length, key length and value length bytes) are taken column-wise: their
    keys are sliced at a fixed stride, their offset deltas checked to be consecutive
    in C or decoded as lanes. Other records are parsed one by one, reading only the
    varints up to the value length. ``nulls``/``tombs``: whether any key or any
    value is null (the common batch has neither)."""

    __slots__ = ("data", "pos", "size", "delta", "keys", "tomb", "nulls", "tombs")

    def __init__(self, buf: bytes, at: int, h: BatchHeader) -> None:
        codec = h.attributes & COMPRESSION_MASK
        start = at + HEADER_SIZE
        end = at + h.batch_length + LOG_OVERHEAD
        if codec:
            data = codecs.decompress(codec, memoryview(buf)[start:end])
            start, end = 0, len(data)
        else:
            data = buf
        self.data = data
        pos: list[int] = []
        sizes: list[int] = []
        delta: list[int] = []
        keys: list[bytes | None] = []
        tomb: list[bool] = []
        nulls = tombs = False
        pos_append, sizes_append, delta_append = pos.append, sizes.append, delta.append
        keys_append, tomb_append = keys.append, tomb.append
        count = h.records_count
        p = start
        i = 0
        try_run = i  # after a failed run search, the next ones wait (doubling stretches)
        stretch = 32
        while i < count and p < end:
            if i >= try_run and count - i >= _MIN_RUN and _next_has_same_size(data, p, end):
                lay = _layout(data, p, end)
                size = lay.size
                k = _run_length(data, p, lay, min(count - i, (end - p) // size))
                if k > 1:
                    koff, klen = lay.key
                    pos.extend(range(p, p + k * size, size))
                    sizes.extend(repeat(size, k))
                    d0 = _zz(data, p + lay.od_off, end)[0]
                    if _run_offsets_ok(data, p, lay, k, d0):
                        delta.extend(range(d0, d0 + k))
                    else:
                        lanes, lane, half = _run_keys(data, p, size, lay.od_off, lay.od_width, k)
                        delta.extend(_lanes_list(lanes, k, lane, -half))
                    if klen < 0:
                        keys.extend(repeat(None, k))
                        nulls = True
                    else:
                        keys.extend([data[q:q + klen]
                                     for q in range(p + koff, p + koff + k * size, size)])
                    t = lay.value[1] < 0
                    tomb.extend(repeat(t, k))
                    tombs = tombs or t
                    p += k * size
                    i += k
                    stretch = 32
                    continue
                try_run = i + stretch
                stretch = min(stretch * 2, 4096)
            # One record: one-byte varints inline (a zig-zag value is negative iff its
            # first byte is odd), longer ones through _zz.
            b = data[p]
            if b < 0x80:
                q = p + 1 + ((b >> 1) ^ -(b & 1))
                r = p + 2  # the timestamp delta, after the attributes byte
            else:
                length, r = _zz(data, p, end)
                q = r + length
                r += 1
            r = r + 1 if data[r] < 0x80 else _zz(data, r, end)[1]
            b = data[r]
            if b < 0x80:
                delta_append((b >> 1) ^ -(b & 1))
                r += 1
            else:
                d, r = _zz(data, r, end)
                delta_append(d)
            b = data[r]
            if b & 1:
                keys_append(None)
                nulls = True
                r += 1
            else:
                if b < 0x80:
                    r += 1
                    klen = b >> 1
                else:
                    klen, r = _zz(data, r, end)
                keys_append(data[r:r + klen])
                r += klen
            t = bool(data[r] & 1)
            tomb_append(t)
            tombs = tombs or t
            pos_append(p)
            sizes_append(q - p)
            p = q
            i += 1
        self.pos, self.size, self.delta, self.keys, self.tomb = pos, sizes, delta, keys, tomb
        self.nulls, self.tombs = nulls, tombs


def null_key_indexes(batch: bytes | bytearray | memoryview) -> list[int]:
    """Indexes of the records with a null key in one validated batch (a compacted
    topic refuses them at produce, as Kafka's LogValidator.validateKey)."""
    data = bytes(batch)
    h = BatchHeader._make(HEADER_STRUCT.unpack_from(data, 0))
    recs = _Records(data, 0, h)
    return [i for i, k in enumerate(recs.keys) if k is None] if recs.nulls else []


# ---------------------------------------------------------------- rewriting a batch


def empty_batch(h: BatchHeader) -> bytes:
    """Kafka's ``writeEmptyHeader``: the header of a batch whose records all went,
    kept for its producer's sequence (base and last offset, producer id, epoch and
    base sequence, leader epoch, timestamp type; no codec). Both timestamps are -1 so
    that no index or search counts a timestamp no record has."""
    attrs = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK)
    head = bytearray(HEADER_STRUCT.pack(
        h.base_offset, HEADER_SIZE - LOG_OVERHEAD, h.partition_leader_epoch, MAGIC, 0, attrs,
        h.last_offset_delta, -1, -1, h.producer_id, h.producer_epoch, h.base_sequence, 0))
    head[17:21] = _crc32c.crc32c(head[21:]).to_bytes(4, "big")
    return bytes(head)


def _rebase(data: bytes, p: int, size: int, old_base: int, new_base: int) -> bytes:
    """The record at p with its timestamp delta re-based from old_base to new_base."""
    end = p + size
    length, q = read_varint(data, p, end)
    ts_at = q + 1
    delta, r = read_varlong(data, ts_at, end)
    body = bytearray(data[q:ts_at])  # attributes
    write_varint(old_base + delta - new_base, body)
    body += data[r:end]
    out = bytearray()
    write_varint(len(body), out)
    return bytes(out + body)


def _build(h: BatchHeader, records: bytes, count: int, base_ts: int, attrs: int) -> bytes:
    """A batch with ``h``'s offsets, producer fields and epoch around ``records``
    (uncompressed record bytes), compressed with its codec, maxTimestamp recomputed."""
    if attrs & TIMESTAMP_TYPE_MASK:
        max_ts = h.max_timestamp
    else:
        plain = HEADER_STRUCT.pack(h.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(records),
                                   h.partition_leader_epoch, MAGIC, 0, 0, h.last_offset_delta,
                                   base_ts, -1, -1, -1, -1, count) + records
        max_ts = scan_timestamps(plain, 0).max_timestamp
    codec = attrs & COMPRESSION_MASK
    body = codecs.compress(codec, records) if codec else records
    head = bytearray(HEADER_STRUCT.pack(
        h.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), h.partition_leader_epoch, MAGIC,
        0, attrs, h.last_offset_delta, base_ts, max_ts, h.producer_id, h.producer_epoch,
        h.base_sequence, count))
    crc = _crc32c.crc32c(head[21:])
    crc = _crc32c.crc32c(body, crc)
    head[17:21] = crc.to_bytes(4, "big")
    return bytes(head) + body


def filter_batch(buf: bytes, at: int, h: BatchHeader, offset_map: OffsetMap,
                 now_ms: int, delete_retention_ms: int) -> bytes | None:
    """The data batch at ``buf[at:]`` as the cleaner leaves it: unchanged (the same
    bytes object slice), rewritten, or None when nothing of it stays (control batches:
    ``_TxnMarkers.marker``)."""
    if h.records_count == 0:
        return None  # an empty batch kept by an earlier clean: kept again only if still last
    latest = offset_map.latest_offset
    recs = _Records(buf, at, h)
    base = h.base_offset
    get = offset_map.map.get
    has_horizon = bool(h.attributes & DELETE_HORIZON_MASK)
    horizon_passed = has_horizon and now_ms >= h.base_timestamp
    keep: list[int]
    if not recs.nulls and not recs.tombs:
        # The common batch: a record stays unless its key's map offset is later (the
        # lookups are one C-level map; a record past the map's end finds nothing later).
        found: list[int] = list(map(get, recs.keys, repeat(-1)))  # type: ignore[arg-type]
        keep = [i for i, d in enumerate(recs.delta) if base + d >= found[i]]
        return _rewritten(buf, at, h, recs, keep, False, now_ms, delete_retention_ms)
    keep = []
    tombstones = False
    for i, (d, k, t) in enumerate(zip(recs.delta, recs.keys, recs.tomb, strict=True)):
        off = base + d
        if off > latest:
            keep.append(i)
            tombstones = tombstones or t
            continue
        if k is None:
            continue  # null key: Kafka counts it invalid and drops it
        if off < get(k, -1):
            continue  # a later record of this key exists
        if t:
            if horizon_passed:
                continue
            tombstones = True
        keep.append(i)
    return _rewritten(buf, at, h, recs, keep, tombstones and not has_horizon, now_ms,
                      delete_retention_ms)


def _rewritten(buf: bytes, at: int, h: BatchHeader, recs: _Records, keep: list[int],
               set_horizon: bool, now_ms: int, delete_retention_ms: int) -> bytes | None:
    """The batch keeping only the records ``keep`` (indexes), with a delete horizon
    set if asked; the same bytes when nothing changes, None when nothing stays."""
    size = h.batch_length + LOG_OVERHEAD
    if len(keep) == len(recs.delta) and not set_horizon:
        return buf[at:at + size]
    if not keep:
        return None
    data, pos, sizes = recs.data, recs.pos, recs.size
    attrs = h.attributes
    base_ts = h.base_timestamp
    if set_horizon:
        horizon = now_ms + delete_retention_ms
        records = b"".join([_rebase(data, pos[i], sizes[i], base_ts, horizon) for i in keep])
        attrs |= DELETE_HORIZON_MASK
        base_ts = horizon
    else:
        records = b"".join([data[pos[i]:pos[i] + sizes[i]] for i in keep])
    return _build(h, records, len(keep), base_ts, attrs)


# ---------------------------------------------------------------- aborted transactions


class AbortedTxns:
    """Which transactional data batches are aborted (Kafka's CleanedTransactionMetadata,
    asked per batch instead of walked): a transactional batch of producer P whose base
    offset lies in [first offset, marker offset) of one of P's aborted transactions.
    A producer's transactions do not overlap, so the entry with the greatest first
    offset at or below the batch's base is the only candidate."""

    __slots__ = ("_by_pid",)

    def __init__(self, entries: Iterable[TxnIndexEntry]) -> None:
        by_pid: dict[int, tuple[list[int], list[int]]] = {}
        for pid, first, marker, _lso in sorted(entries, key=lambda e: e[1]):
            firsts, markers = by_pid.setdefault(pid, ([], []))
            firsts.append(first)
            markers.append(marker)
        self._by_pid = by_pid

    def __bool__(self) -> bool:
        return bool(self._by_pid)

    def aborted(self, h: BatchHeader) -> bool:
        """Whether the data batch ``h`` belongs to an aborted transaction."""
        if not h.attributes & TRANSACTIONAL_MASK or h.attributes & CONTROL_MASK:
            return False
        entry = self._by_pid.get(h.producer_id)
        if entry is None:
            return False
        firsts, markers = entry
        i = bisect_right(firsts, h.base_offset) - 1
        return i >= 0 and h.base_offset < markers[i]


class _TxnMarkers:
    """What a clean does with COMMIT/ABORT markers (Kafka's CleanedTransactionMetadata
    and its marker rule in ``Cleaner.cleanInto``), fed every batch of the rewritten
    segments in offset order, across groups.

    A marker is needed while a data batch of its transaction is left: a
    transactional batch of its producer after that producer's previous marker,
    kept by this clean (with records, or emptied as the producer's last batch; one
    wholly below the log start does not count: a restart does not read it). A
    marker no batch needs is discardable: the first clean that finds it so rewrites
    it with a delete horizon (now + delete.retention.ms, as a tombstone), a clean at
    or after the horizon removes it; an empty control batch goes at once. Markers
    above the map's last offset are copied unchanged (not decided by this clean),
    and so is a producer's fencing marker (``_last_batches``). The new segment's
    ``.txnindex`` keeps the entry of each ABORT marker whose data is left and drops
    the others, as a restart rebuilds them from the log (a transaction opens at its
    producer's first transactional batch left after a marker), so the start-up
    comparison brings no dropped entry back. (A rebuilt entry may start later than
    the kept one, at the first batch left; both skip the same records.)"""

    __slots__ = ("params", "latest", "fencing", "entries", "first_left")

    def __init__(self, params: CleanParams, latest: int, fencing: dict[int, int]) -> None:
        self.params = params
        self.latest = latest
        self.fencing = fencing
        self.entries = {(e.producer_id, e.last_offset): e for e in params.aborted}
        self.first_left: dict[int, int] = {}  # producer id -> first data batch left

    def data_kept(self, h: BatchHeader) -> None:
        """A data batch stays in the cleaned segment."""
        if h.attributes & TRANSACTIONAL_MASK and \
                h.base_offset + h.last_offset_delta >= self.params.log_start:
            self.first_left.setdefault(h.producer_id, h.base_offset)

    def marker(self, buf: bytes, at: int, h: BatchHeader,
               kept_entries: list[TxnIndexEntry]) -> bytes | None:
        """The control batch ``h`` as the clean leaves it (None: removed); appends its
        ``.txnindex`` entry to ``kept_entries`` when it stays with data."""
        pid, base = h.producer_id, h.base_offset
        first = self.first_left.pop(pid, None)
        size = h.batch_length + LOG_OVERHEAD
        entry = self.entries.get((pid, base))
        if first is not None and entry is not None:
            kept_entries.append(entry)
        if first is not None or base > self.latest or self.fencing.get(pid) == base:
            return buf[at:at + size]
        if h.records_count == 0:
            return None
        if h.attributes & DELETE_HORIZON_MASK:
            return None if self.params.now_ms >= h.base_timestamp else buf[at:at + size]
        recs = _Records(buf, at, h)
        return _rewritten(buf, at, h, recs, list(range(len(recs.delta))), True,
                          self.params.now_ms, self.params.delete_retention_ms)


# ---------------------------------------------------------------- the plan and its run


@dataclass
class _Seg:
    """A sealed segment as the plan saw it (``seg`` is None in a worker process)."""

    seg: LogSegment | None
    base: int
    size: int
    upper: int  # the next segment's base offset
    fd: int


@dataclass
class CleanedGroup:
    """One cleaned segment written as ``.cleaned`` files, replacing ``olds``."""

    base: int
    olds: list[_Seg]
    bytes_written: int
    # The ``.txnindex`` of the new segment: the entries of the old segments whose
    # ABORT marker still has data of its transaction after the clean.
    aborted: list[TxnIndexEntry] = field(default_factory=list)

    @property
    def upper(self) -> int:
        """The offset range [base, upper) the new segment replaces."""
        return self.olds[-1].upper


@dataclass
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_entries: int = 0
    seconds: float = 0.0


@dataclass
class CleanResult:
    """What ``CleanPlan.run`` wrote; ``commit`` swaps it in on the log's thread."""

    directory: Path
    groups: list[CleanedGroup]
    next_dirty: int
    stats: CleanStats

    def discard(self) -> None:
        for g in self.groups:
            swap.discard_cleaned(self.directory, g.base)
        self.groups = []

    def commit(self, log: Log) -> bool:
        """Swap the cleaned segments in (storage.swap steps 2-3, then
        Log.replace_segments) if every old segment is still in the log unchanged and
        sealed; otherwise discard them. Returns whether they were swapped in."""
        live = {id(s): i for i, s in enumerate(log.segments[:-1])}
        for g in self.groups:
            for o in g.olds:
                if o.seg is None or id(o.seg) not in live or max(o.seg.size, 0) != o.size:
                    self.discard()
                    return False
        if not self.groups:
            return True
        olds: list[list[LogSegment]] = [[o.seg for o in g.olds if o.seg is not None]
                                        for g in self.groups]
        for segs in olds:
            for seg in segs:
                seg.release()  # no descriptor or mapping survives the rename
        swap.commit(self.directory, [g.base for g in self.groups])
        for g, segs in zip(self.groups, olds, strict=True):
            swap.complete(self.directory, g.base)
            new = LogSegment(log.dir, g.base, log.config)
            new.mark_indexes_checked()  # written by the cleaner from the batches themselves
            log.replace_segments(segs, new, g.aborted)
        return True


@dataclass(frozen=True)
class CleanParams:
    """What a clean needs besides the segments: its range, its clock, the topic's settings."""

    first_dirty: int
    first_uncleanable: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval_bytes: int
    max_index_bytes: int
    # The ``.txnindex`` entries (producer id, first offset, ABORT marker offset, LSO)
    # whose marker lies at or above the first cleaned segment (``AbortedTxns``,
    # ``_TxnMarkers``).
    aborted: tuple[TxnIndexEntry, ...] = ()
    log_start: int = 0


@dataclass(eq=False)
class CleanPlan:
    """A snapshot of what to clean, taken on the log's thread; ``run`` on any thread."""

    directory: Path
    segments: list[_Seg]
    params: CleanParams
    abort: threading.Event = field(default_factory=threading.Event)

    @property
    def first_dirty(self) -> int:
        return self.params.first_dirty

    @property
    def first_uncleanable(self) -> int:
        return self.params.first_uncleanable

    def close(self) -> None:
        for s in self.segments:
            if s.fd >= 0:
                try:
                    os.close(s.fd)
                except OSError:
                    pass
                s.fd = -1

    def job(self) -> CleanJob:
        """This plan as plain data for a worker process (``run_job``)."""
        return CleanJob(str(self.directory), [(s.base, s.size, s.upper) for s in self.segments],
                        self.params)

    def adopt(self, outcome: JobOutcome) -> CleanResult:
        """The result of ``run_job(self.job())``, tied back to this plan's segments."""
        by_base = {s.base: s for s in self.segments}
        groups = [CleanedGroup(base, [by_base[b] for b in olds], written, aborted)
                  for base, olds, written, aborted in outcome.groups]
        return CleanResult(self.directory, groups, outcome.next_dirty, outcome.stats)

    def run(self, settings: CleanerSettings, throttler: Throttler | None = None) -> CleanResult:
        """Build the key map, then write every group's cleaned segment (step 1)."""
        started = time.monotonic()
        stats = CleanStats()
        groups: list[CleanedGroup] = []
        try:
            omap = self._build_map(settings.map_budget, throttler, stats)
            end = omap.latest_offset + 1
            todo = [s for s in self.segments if s.base < end]
            last_of, fencing = self._last_batches(todo, throttler)
            txns = AbortedTxns(self.params.aborted)
            markers = _TxnMarkers(self.params, omap.latest_offset, fencing)
            for group in self._groups(todo):
                groups.append(self._clean_group(group, omap, last_of, txns, markers, throttler,
                                                stats))
            stats.map_entries = len(omap.map)
        except BaseException:
            for g in groups:
                swap.discard_cleaned(self.directory, g.base)
            raise
        finally:
            self.close()
        stats.seconds = time.monotonic() - started
        return CleanResult(self.directory, groups, max(end, self.first_dirty), stats)

    def _build_map(self, budget: int, throttler: Throttler | None,
                   stats: CleanStats) -> OffsetMap:
        omap = OffsetMap(budget)
        start, stop = self.first_dirty, self.first_uncleanable
        omap.latest_offset = start - 1
        txns = AbortedTxns(self.params.aborted)
        for s in self.segments:
            if s.upper <= start or s.base >= stop:
                continue
            for buf, at, h in _batches(s.fd, 0, s.size, throttler, self.abort):
                if h.base_offset >= stop:
                    break  # the LSO (a batch base) inside this segment
                stats.bytes_read += h.batch_length + LOG_OVERHEAD
                last = h.base_offset + h.last_offset_delta
                if last < start:
                    continue
                # Markers and aborted data never speak for a key (Kafka's
                # buildOffsetMapForSegment): a later aborted update must not make the
                # cleaner drop the committed value before it.
                if not h.attributes & CONTROL_MASK and not (txns and txns.aborted(h)):
                    recs = _Records(buf, at, h)
                    base = h.base_offset
                    if not recs.nulls and base >= start:
                        keys: list[bytes] = recs.keys  # type: ignore[assignment]
                        offs = [base + d for d in recs.delta]
                    else:
                        pairs = [(k, base + d) for d, k in zip(recs.delta, recs.keys, strict=True)
                                 if k is not None and base + d >= start]
                        keys = [k for k, _ in pairs]
                        offs = [o for _, o in pairs]
                    if not omap.put_run(keys, offs):
                        return omap  # full: the map speaks for whole batches only
                omap.latest_offset = max(omap.latest_offset, last)
            # Kafka: past a gap at the segment's end, the map speaks up to the next base.
            omap.latest_offset = max(omap.latest_offset, min(s.upper, stop) - 1)
        return omap

    def _last_batches(self, segs: list[_Seg], throttler: Throttler | None
                      ) -> tuple[dict[int, int], dict[int, int]]:
        """Producer id -> base offset of its last data batch in ``segs`` (a header walk),
        and producer id -> base offset of its fencing marker there.

        The last data batch is kept, emptied, if all its records go (Kafka's
        RETAIN_EMPTY for the last batch of a producer): the broker rebuilds an
        idempotent producer's sequence state from batch headers after a crash, and
        without its last batch the producer's next batch would look out of order. A
        fencing marker is a producer's last marker when it comes after its last data
        batch with a higher epoch (or the producer has no data batch here): the epoch
        a coordinator bumped lives only there, so it is never removed (Kafka keeps a
        marker that holds an active producer's epoch)."""
        last: dict[int, int] = {}
        data_epoch: dict[int, int] = {}
        fencing: dict[int, int] = {}
        for s in segs:
            for _buf, _at, h in _batches(s.fd, 0, s.size, throttler, self.abort):
                pid = h.producer_id
                if pid < 0:
                    continue
                if not h.attributes & CONTROL_MASK:
                    last[pid] = h.base_offset
                    data_epoch[pid] = h.producer_epoch
                    fencing.pop(pid, None)
                elif h.producer_epoch > data_epoch.get(pid, -1):
                    fencing[pid] = h.base_offset
                else:
                    fencing.pop(pid, None)
        return last, fencing

    def _groups(self, segs: list[_Seg]) -> list[list[_Seg]]:
        """Kafka's groupSegmentsBySize: consecutive segments whose sizes sum to at most
        segment.bytes and whose offsets fit one segment's relative int32 range."""
        out: list[list[_Seg]] = []
        i = 0
        while i < len(segs):
            group = [segs[i]]
            total = segs[i].size
            i += 1
            while i < len(segs) and total + segs[i].size <= self.params.segment_bytes and (
                    segs[i].size == 0 or segs[i].upper - 1 - group[0].base <= INT32_MAX):
                group.append(segs[i])
                total += segs[i].size
                i += 1
            out.append(group)
        return out

    def _clean_group(self, group: list[_Seg], omap: OffsetMap, last_of: dict[int, int],
                     txns: AbortedTxns, markers: _TxnMarkers, throttler: Throttler | None,
                     stats: CleanStats) -> CleanedGroup:
        base = group[0].base
        paths = swap.cleaned_paths(self.directory, base)
        fd = os.open(paths[".log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        oi = bytearray()
        ti = bytearray()
        prm = self.params
        max_oi = prm.max_index_bytes // _OI_ENTRY
        max_ti = prm.max_index_bytes // _TI_ENTRY
        n_oi = n_ti = 0
        last_tts = -1
        run_max, shallow = -1, base
        since = 0
        written = 0
        pending: list[bytes] = []
        pending_bytes = 0
        kept_entries: list[TxnIndexEntry] = []
        try:
            for s in group:
                for buf, at, h in _batches(s.fd, 0, s.size, throttler, self.abort):
                    stats.bytes_read += h.batch_length + LOG_OVERHEAD
                    stats.records_read += h.records_count
                    last = h.base_offset + h.last_offset_delta
                    if h.attributes & CONTROL_MASK:
                        out = markers.marker(buf, at, h, kept_entries)
                        if out is None:
                            continue
                    else:
                        if txns and last <= omap.latest_offset and txns.aborted(h):
                            out = None  # aborted data goes whole (Kafka's shouldDiscardBatch)
                        else:
                            out = filter_batch(buf, at, h, omap, prm.now_ms,
                                               prm.delete_retention_ms)
                        if out is None:
                            if h.producer_id < 0 or last_of.get(h.producer_id) != h.base_offset:
                                continue
                            out = empty_batch(h)
                        markers.data_kept(h)
                    cnt = out[57:61]
                    stats.records_kept += int.from_bytes(cnt, "big", signed=True)
                    bmax = HEADER_STRUCT.unpack_from(out, 0)[8]
                    if bmax > run_max:
                        run_max, shallow = bmax, last
                    if since > prm.index_interval_bytes:
                        if n_oi < max_oi:
                            oi += (last - base).to_bytes(4, "big") + written.to_bytes(4, "big")
                            n_oi += 1
                        if run_max >= 0 and run_max > last_tts and n_ti < max_ti - 1:
                            ti += run_max.to_bytes(8, "big", signed=True) + \
                                (shallow - base).to_bytes(4, "big")
                            n_ti += 1
                            last_tts = run_max
                        since = 0
                    since += len(out)
                    written += len(out)
                    pending.append(out)
                    pending_bytes += len(out)
                    if pending_bytes >= READ_WINDOW:
                        _write_all(fd, pending)
                        if throttler is not None:
                            throttler.maybe_throttle(pending_bytes)
                        pending, pending_bytes = [], 0
            if pending:
                _write_all(fd, pending)
                if throttler is not None:
                    throttler.maybe_throttle(pending_bytes)
            if run_max >= 0 and run_max > last_tts and n_ti < max_ti:
                ti += run_max.to_bytes(8, "big", signed=True) + (shallow - base).to_bytes(4, "big")
            swap.write_cleaned(self.directory, base, [s.base for s in group], fd, bytes(oi), bytes(ti))
        except BaseException:
            os.close(fd)
            swap.discard_cleaned(self.directory, base)
            raise
        os.close(fd)
        stats.bytes_written += written
        return CleanedGroup(base, group, written, kept_entries)


@dataclass
class CleanJob:
    """A CleanPlan as plain (picklable) data: what a worker process needs."""

    directory: str
    segments: list[tuple[int, int, int]]  # (base offset, size, next segment's base)
    params: CleanParams


@dataclass
class JobOutcome:
    """What ``run_job`` wrote: per group (new base, old bases, bytes written, the new
    segment's ``.txnindex`` entries)."""

    groups: list[tuple[int, list[int], int, list[TxnIndexEntry]]]
    next_dirty: int
    stats: CleanStats


_worker_abort: threading.Event | None = None


def init_worker(abort: threading.Event, parent: int) -> None:
    """A worker process's initializer: the event the broker sets to stop cleaning, and
    a watchdog that ends the process once its parent (pid ``parent``, passed in: the
    parent may die before this runs) is gone. A broker killed with SIGKILL cannot stop
    its workers; what a killed clean leaves is removed when the log loads."""
    global _worker_abort
    _worker_abort = abort

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def run_job(job: CleanJob, settings: CleanerSettings) -> JobOutcome:
    """Run a plan in a worker process (off the broker's interpreter and its GIL).

    Segments are opened by path; one deleted meanwhile ends the clean (CleanAborted),
    and ``CleanResult.commit`` on the log's thread checks the rest."""
    directory = Path(job.directory)
    segs: list[_Seg] = []
    try:
        for base, size, upper in job.segments:
            fd = os.open(directory / f"{base:020d}.log", os.O_RDONLY)
            segs.append(_Seg(None, base, size, upper, fd))
    except FileNotFoundError as exc:
        for s in segs:
            os.close(s.fd)
        raise CleanAborted(f"a segment went away: {exc}") from None
    p = CleanPlan(directory, segs, job.params)
    if _worker_abort is not None:
        p.abort = _worker_abort
    result = p.run(settings, Throttler(settings.io_max_bytes_per_second))
    return JobOutcome([(g.base, [o.base for o in g.olds], g.bytes_written, g.aborted)
                       for g in result.groups],
                      result.next_dirty, result.stats)


def _write_all(fd: int, pieces: list[bytes]) -> None:
    data = memoryview(b"".join(pieces))
    while data:
        data = data[os.write(fd, data):]


def plan(log: Log, ltc: LogToClean, now_ms: int) -> CleanPlan | None:
    """Snapshot ``log``'s sealed segments below the first uncleanable offset (on the
    log's thread). None when there is nothing to clean."""
    segs = log.segments
    picked: list[_Seg] = []
    try:
        for i, s in enumerate(segs[:-1]):
            if s.base_offset >= ltc.first_uncleanable:
                break
            upper = segs[i + 1].base_offset
            if upper <= log.log_start_offset:
                continue  # wholly below the log start: retention deletes it
            picked.append(_Seg(s, s.base_offset, max(s.size, 0), upper, os.dup(s.fd())))
    except BaseException:
        for p in picked:
            os.close(p.fd)
        raise
    if not picked:
        return None
    cfg = log.config
    low = picked[0].base
    aborted = tuple(e for e in log.aborted_txns_on_disk() if e.last_offset >= low)
    return CleanPlan(log.dir, picked, CleanParams(
        ltc.first_dirty, ltc.first_uncleanable, now_ms, cfg.delete_retention_ms,
        cfg.segment_bytes, cfg.index_interval_bytes, cfg.segment_index_bytes, aborted,
        log.log_start_offset))


def clean_log(log: Log, checkpoint: int | None, now_ms: int,
              settings: CleanerSettings | None = None, *, force: bool = False,
              last_stable_offset: int | None = None) -> int | None:
    """One whole clean of ``log`` on the calling thread (tools and tests; the broker
    splits the phases across threads). Returns the new checkpoint (next dirty
    offset), or None when the log was not due (``force`` ignores the dirty ratio).
    ``last_stable_offset``: as for ``log_to_clean``."""
    ltc = log_to_clean(log, checkpoint, now_ms, last_stable_offset)
    if not force and not ltc.due(log.config.min_cleanable_dirty_ratio):
        return None
    p = plan(log, ltc, now_ms)
    if p is None:
        return None
    result = p.run(settings or CleanerSettings())
    if not result.commit(log):
        return None
    return result.next_dirty


def read_cleaner_checkpoint(data_dir: Path) -> dict[tuple[str, int], int]:
    return read_checkpoint(data_dir / CHECKPOINT_FILE)


def write_cleaner_checkpoint(data_dir: Path, entries: dict[tuple[str, int], int]) -> None:
    write_checkpoint(data_dir / CHECKPOINT_FILE, entries)
