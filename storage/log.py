"""A partition's log: ordered segments, append, read, search by timestamp, retention.

Invariants:
- segments are ordered by base offset; each segment's offsets lie in
  [base, next segment's base), strictly increasing (with gaps once compacted:
  ``replace_segments`` swaps in what storage/cleaner.py wrote); only the last
  (active) segment is appended to;
- ``log_start_offset <= log_end_offset``; every offset in [log start, LEO) that the
  log holds is readable; ``high_watermark == log_end_offset`` (single node);
- ``_prefix_max[i]`` is the running maximum of segment max timestamps over
  segments 0..i, so the first segment whose max >= T is found by binary search;
- an append either writes one whole batch and indexes it, or changes nothing
  (validation errors happen before any write; an I/O error truncates back);
- ``recovery_point`` only advances on flush, and after a roll's deferred flush
  (``take_roll_flush`` / ``roll_flush_done``) has fsynced the sealed segment:
  every byte below it is on disk. A roll itself does no fsync, so an append that
  rolls never waits for the disk (Kafka schedules that flush asynchronously too).
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypedDict, Unpack

from storage import planner, swap, txnindex, zonemap
from storage.batch_search import offset_of_first_max
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    LogStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from storage.fsutil import fsync_dir
from storage.planner import DisorderStats, PlannedRange
from storage.records import (
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    BatchHeader,
    build_control_batch,
    iter_batches,
    set_base_offset,
    set_partition_leader_epoch,
)
from storage.segment import LogSegment
from storage.txnindex import TxnIndexEntry
from storage.validation import validate_batch

if TYPE_CHECKING:
    from storage.remote.tier import RemoteTier

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6

_LOG_FILE = re.compile(r"^(\d{20})\.log$")
#: numpy is the arrow extra; the sorted-timestamp indexes (storage/tsindex.py) need it.
HAVE_NUMPY = importlib.util.find_spec("numpy") is not None

_INDEX_FILE = re.compile(r"^(\d{20})\.(index|timeindex|txnindex|zonemap|tsindex)$")


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


class LogUsage(NamedTuple):
    """A partition's figures for the broker's metrics (``Log.usage``)."""

    log_start_offset: int
    log_end_offset: int
    segments: int
    size_bytes: int
    offset_index_entries: int
    time_index_entries: int
    index_bytes_mapped: int


class TimestampOffset(NamedTuple):
    """What ListOffsets puts in a partition response: timestamp, offset, leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int


def _now_ms() -> int:
    return int(time.time() * 1000)


class RollFlush:
    """The fsyncs a roll leaves behind, runnable on any thread.

    It holds its own descriptors (a duplicate of each sealed ``.log`` and of its two
    index files, opened when the roll happened), so a segment deleted or closed on
    the event loop meanwhile cannot make it sync some other file. ``run`` fsyncs
    them and the directory (None: no new file names to sync); ``Log.roll_flush_done``
    then advances the recovery point
    on the log's own thread and ``close`` releases the descriptors.
    """

    __slots__ = ("fds", "directory", "upto", "segments", "generation")

    def __init__(self, fds: list[int], directory: Path | None, upto: int,
                 segments: list[LogSegment], generation: int) -> None:
        self.fds = fds
        self.directory = directory
        self.upto = upto
        self.segments = segments
        self.generation = generation

    def run(self) -> None:
        for fd in self.fds:
            os.fsync(fd)
        if self.directory is not None:  # a roll made files: their names, as Kafka's flushDir
            fsync_dir(self.directory)

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


class OpenOptions(TypedDict, total=False):
    """The keyword arguments ``Log.open`` passes on to ``Log``."""

    log_start_offset: int | None
    recovery_point: int | None
    clean_shutdown: bool


class Log:
    """One partition directory (``<topic>-<partition>``) of Kafka-format segments."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        config: LogConfig,
        *,
        log_start_offset: int | None = None,
        recovery_point: int | None = None,
        clean_shutdown: bool = True,
        cleaned_offset: int | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.config = config
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._prefix_max: list[int] | None = None
        self._last_append_time: int | None = None
        self._latest_epoch: int | None = None
        self.recovered_bytes_cut = 0
        self.recovered_segments = 0
        self._summary_cursor = (0, 0)  # (segment base offset, batch position) to resume at
        # Rolls whose fsyncs are deferred (see take_roll_flush): the sealed segments,
        # the offset the recovery point may reach once they are synced, and a counter
        # bumped by every truncation so a flush taken before one is not trusted after.
        self._sealed_unflushed: list[LogSegment] = []
        self._roll_flush_upto = 0
        self._generation = 0
        # Below this offset the cleaner has rewritten segments (its checkpoint), so
        # recovery accepts offset gaps there even if cleanup.policy changed since.
        self._cleaned_offset = cleaned_offset
        # Bumped whenever records leave the log other than at its end (retention,
        # DeleteRecords, compaction, truncation): disorder counts restart then.
        self._layout_gen = 0
        self._disorder_cursor: planner.DisorderCursor | None = None
        self._max_ts_cache: tuple[tuple[int, ...], TimestampOffset | None] | None = None
        # The remote tier (storage/remote/tier.py) once attached: offsets below the
        # first local segment are then read from it, and log_start_offset is the
        # partition's (remote included); None keeps every path purely local.
        self.tier: RemoteTier | None = None
        self._checkpoint_start = log_start_offset
        self._load(log_start_offset, recovery_point, clean_shutdown)
        self._roll_flush_upto = max(self._roll_flush_upto, self.recovery_point)

    @classmethod
    def open(cls, directory: str | os.PathLike[str], config: LogConfig,
             **options: Unpack[OpenOptions]) -> Log:
        """``Log(directory, config, **options)``; only ``LogDir`` passes ``cleaned_offset``."""
        return cls(directory, config, **options)

    # -- loading ---------------------------------------------------------------
    def _load(self, log_start: int | None, recovery_point: int | None, clean: bool) -> None:
        bases: list[int] = []
        index_files: list[tuple[int, str]] = []
        swap.finish_pending(self.dir)  # a clean interrupted by a crash: old or new segments
        for name in os.listdir(self.dir):
            path = self.dir / name
            if name.endswith((".deleted", ".cleaned", ".swap", txnindex.SUFFIX + ".tmp",
                              zonemap.SUFFIX + ".tmp", zonemap.TSINDEX_SUFFIX + ".tmp")):
                # Left over from a delete/clean interrupted by a crash: finish it.
                _unlink(path)
                continue
            m = _LOG_FILE.match(name)
            if m:
                bases.append(int(m.group(1)))
                continue
            m = _INDEX_FILE.match(name)
            if m:
                index_files.append((int(m.group(1)), name))
        base_set = set(bases)
        for base, name in index_files:
            if base not in base_set:
                _unlink(self.dir / name)  # orphan index, as Kafka's LogLoader
        bases.sort()
        now = _now_ms()
        self.segments = [
            LogSegment(self.dir, b, self.config, created_ms=now,
                       jitter_ms=self.config.random_segment_jitter())
            for b in bases
        ]
        self._bases = bases
        # A segment missing an index is rebuilt whatever the shutdown was.
        needs_rebuild = {
            i for i, s in enumerate(self.segments)
            if not s.offset_index.path.exists() or not s.time_index.path.exists()
        }
        start_recovery = len(self.segments)
        if not clean:
            rp = recovery_point if recovery_point is not None else 0
            start_recovery = max(0, bisect_right(bases, rp) - 1)
        prev_end: int | None = None
        i = 0
        while i < len(self.segments):
            seg = self.segments[i]
            if i < start_recovery and i in needs_rebuild:
                # Only an index is missing from data that was flushed: rebuild it, and
                # never cut the .log or drop later segments for it.
                seg.recover(min_offset=prev_end, cut=False, allow_gaps=self._gaps_allowed(seg))
                self.recovered_segments += 1
                prev_end = seg.next_offset
            elif i >= start_recovery:
                cut = seg.recover(min_offset=prev_end, allow_gaps=self._gaps_allowed(seg))
                self.recovered_segments += 1
                if cut:
                    self.recovered_bytes_cut += cut
                    for later in self.segments[i + 1:]:
                        later.delete()
                    del self.segments[i + 1:]
                    del self._bases[i + 1:]
                    break
                prev_end = seg.next_offset
            else:
                prev_end = None
            i += 1
        if not self.segments:
            start = log_start if log_start is not None else 0
            seg = LogSegment.create(self.dir, start, self.config, now_ms=now,
                                    jitter_ms=self.config.random_segment_jitter())
            self.segments = [seg]
            self._bases = [start]
        try:
            leo = self.active.next_offset
        except CorruptRecordError:
            # A damaged tail despite a clean-shutdown marker: recover the active
            # segment rather than refuse to open the partition.
            self.recovered_bytes_cut += self.active.recover(
                allow_gaps=self._gaps_allowed(self.active))
            self.recovered_segments += 1
            leo = self.active.next_offset
        # An empty active segment after an earlier one: its base is the LEO.
        self._leo = max(leo, self.active.base_offset)
        first_base = self.segments[0].base_offset
        start = first_base if log_start is None else max(first_base, log_start)
        self.log_start_offset = min(start, self._leo)
        # Clean: everything was flushed at close. Unclean: recovery fsynced what it kept.
        self.recovery_point = self._leo

    def _gaps_allowed(self, seg: LogSegment) -> bool:
        """Recovery's gap rule (storage/recovery.py): offset gaps are compaction's,
        not damage, in a compacted topic or below the cleaner's checkpoint."""
        return self.config.compact or (
            self._cleaned_offset is not None and seg.base_offset < self._cleaned_offset)

    # -- basic properties --------------------------------------------------------
    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._leo

    # -- the remote tier (KIP-405) ----------------------------------------------------
    @property
    def local_log_start_offset(self) -> int:
        """Kafka's localLogStartOffset: the first offset held on local disk (-4)."""
        return max(self.log_start_offset, self.segments[0].base_offset)

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The last offset copied to the tier (-5 LATEST_TIERED); -1 when none."""
        return self.tier.highest_offset if self.tier is not None else -1

    def is_remote_offset(self, offset: int) -> bool:
        """Whether reading ``offset`` goes to the object store (a blocking call)."""
        return self.tier is not None and offset < self.segments[0].base_offset

    def attach_tier(self, tier: RemoteTier) -> None:
        """Route reads below the local start to ``tier``; the log start becomes the
        partition's (remote included): the first copied segment's when the tier reaches
        the local segments, raised to the log-start checkpoint given at open and to the
        manifest's start."""
        self.tier = tier
        first_local = self.segments[0].base_offset
        done = tier.finished()
        start = self.log_start_offset
        if done and done[0].base_offset < first_local <= tier.highest_offset + 1 \
                and start <= first_local:
            # the tier reaches the local segments: the log starts in it
            start = max(done[0].base_offset, self._checkpoint_start or 0)
        # the manifest's start: moved by a remote delete or DeleteRecords that the
        # checkpoint may not have seen before a crash
        start = max(start, tier.manifest.log_start_offset)
        self.log_start_offset = min(start, self._leo)
        self._layout_gen += 1

    def detach_tier(self) -> None:
        """Stop using the tier; the log start goes back to the first local offset."""
        self.tier = None
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self._layout_gen += 1

    def size_in_bytes(self) -> int:
        return sum(max(s.size, 0) for s in self.segments)

    def usage(self) -> LogUsage:
        """Offsets, sizes and index figures for metrics; maps no index that is not
        mapped already (a scrape must not undo lazy loading)."""
        off_entries = time_entries = mapped = 0
        for seg in self.segments:
            n, m = seg.offset_index.usage()
            off_entries += n
            mapped += m
            n, m = seg.time_index.usage()
            time_entries += n
            mapped += m
        return LogUsage(self.log_start_offset, self.log_end_offset, len(self.segments),
                        self.size_in_bytes(), off_entries, time_entries, mapped)

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic settings (used for segments created from now on too)."""
        self.config = config
        for s in self.segments:
            s.config = config

    # -- append --------------------------------------------------------------------
    def append(self, batch: bytes | bytearray | memoryview, *, now_ms: int,
               leader_epoch: int = 0,
               precheck: Callable[[BatchHeader], AppendResult | None] | None = None,
               ) -> AppendResult:
        """Validate a client batch as Kafka's LogValidator, assign offsets, write, index.

        ``precheck`` (the broker's producer-state check) sees the validated header
        after the record and timestamp checks and before anything is written, as in
        Kafka's UnifiedLog.append; a result it returns (an idempotent retry) is
        answered instead and nothing is appended.

        Raises RecordTooLargeError, RecordListTooLargeError, CorruptRecordError,
        InvalidRecordError, UnsupportedCompressionError, InvalidTimestampError
        (nothing appended) or LogStorageError (I/O; nothing appended).
        """
        cfg = self.config
        size = len(batch)
        append_time: int | None = None
        if cfg.log_append_time:
            if self._last_append_time is None:
                # KIP-32's leader rule: never stamp below what the log already holds.
                self._last_append_time = self._prefix_max_list()[-1]
            append_time = max(self._last_append_time, now_ms)
        # Late records are counted against the running max before the batch, in the
        # validation walk itself; nothing awaits between here and add_zone below.
        running = self.active.zone_map_running()
        # Only the 61-byte header changes unless maxTimestamp/timestamp type was
        # rewritten (CRC over the whole batch): then ``buf`` is that one copy.
        h, buf, mn, max_ts, late, worst = validate_batch(
            batch, cfg, now_ms=now_ms, running=running, append_time=append_time,
            log_dir=self.dir)
        if append_time is not None:
            self._last_append_time = append_time
        log_append_time = -1 if append_time is None else append_time
        head = bytearray(memoryview(batch)[:HEADER_SIZE])
        if precheck is not None:
            answered = precheck(h)
            if answered is not None:
                return answered
        if buf is not None:
            head = buf
        base = self._leo
        last = base + h.last_offset_delta
        set_base_offset(head, 0, base)
        set_partition_leader_epoch(head, 0, leader_epoch)
        data: list[bytes | bytearray | memoryview] = (
            [head] if buf is not None else [head, memoryview(batch)[HEADER_SIZE:]])
        try:
            self._maybe_roll(size, max_ts, last, now_ms)
        except OSError as exc:  # e.g. no space or inodes for the new segment's files
            raise LogStorageError(f"cannot roll {self.dir}: {exc}") from exc
        seg = self.active
        seg.append(data, [(0, size, last, max_ts)], scanned=True)
        # The zone map takes the validation walk's min/max/disorder: no second walk.
        seg.add_zone(size, base, last, h.records_count, mn, max_ts, late, worst)
        self._after_append(last, max_ts, leader_epoch)
        return AppendResult(base, last, max_ts, log_append_time, self.log_start_offset)

    def append_as_is(self, data: bytes | bytearray | memoryview, *,
                     now_ms: int | None = None) -> AppendResult:
        """Append trusted batches exactly as given (offsets and timestamps kept).

        For recovery tooling, replication-style copies and benchmarks: no record-level
        validation; the headers' max timestamps are trusted. The batches must be
        whole, start at or after the log end offset and increase.
        """
        batches = list(iter_batches(data))
        total = sum(h.size for _, h in batches)
        if not batches or total != len(data):
            raise CorruptRecordError("append_as_is needs one or more whole batches")
        if batches[0][1].base_offset < self._leo:
            raise CorruptRecordError(
                f"batch base offset {batches[0][1].base_offset} is below the log end {self._leo}")
        if len(data) > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"append of {len(data)} bytes exceeds segment.bytes={self.config.segment_bytes}")
        prev = self._leo
        entries = []
        max_ts = NO_TIMESTAMP
        for pos, h in batches:
            if h.base_offset < prev:
                raise CorruptRecordError("batch offsets must increase")
            prev = h.last_offset + 1
            entries.append((pos, h.size, h.last_offset, h.max_timestamp))
            max_ts = max(max_ts, h.max_timestamp)
        now = _now_ms() if now_ms is None else now_ms
        first = batches[0][1]
        last = batches[-1][1].last_offset
        self._maybe_roll(len(data), first.max_timestamp, last, now, new_base=first.base_offset)
        self.active.append(data, entries)
        self._after_append(last, max_ts, batches[-1][1].partition_leader_epoch)
        return AppendResult(first.base_offset, last, max_ts, -1, self.log_start_offset)

    def append_control(self, commit: bool, *, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int, now_ms: int, leader_epoch: int = 0) -> AppendResult:
        """Append a COMMIT or ABORT marker (the leader's own batch, never a client's) at
        the log end: CreateTime = ``now_ms``, or the log-append time on LogAppendTime
        topics. It is indexed like any batch (its bytes count toward the index interval
        and its timestamp toward the time index and the segment max), as Kafka does."""
        ts = now_ms
        ts_type = CREATE_TIME
        if self.config.log_append_time:
            if self._last_append_time is None:
                self._last_append_time = self._prefix_max_list()[-1]
            ts = max(self._last_append_time, now_ms)
            self._last_append_time = ts
            ts_type = LOG_APPEND_TIME
        base = self._leo
        data = build_control_batch(
            commit, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timestamp=ts, base_offset=base,
            timestamp_type=ts_type, partition_leader_epoch=leader_epoch)
        try:
            self._maybe_roll(len(data), ts, base, now_ms)
        except OSError as exc:
            raise LogStorageError(f"cannot roll {self.dir}: {exc}") from exc
        seg = self.active
        seg.append([data], [(0, len(data), base, ts)], scanned=True)
        seg.add_zone(len(data), base, base, 0, 0, 0, 0, 0)
        self._after_append(base, ts, leader_epoch)
        return AppendResult(base, base, ts, ts if ts_type == LOG_APPEND_TIME else -1,
                            self.log_start_offset)

    def _after_append(self, last: int, max_ts: int, epoch: int) -> None:
        self._leo = last + 1
        if epoch >= 0:
            self._latest_epoch = epoch
        pm = self._prefix_max
        if pm is not None:
            prev = pm[-2] if len(pm) > 1 else NO_TIMESTAMP
            pm[-1] = max(prev, self.active.max_timestamp)

    def _maybe_roll(self, size: int, max_ts: int, last: int, now_ms: int,
                    new_base: int | None = None) -> None:
        """Roll before an append when Kafka would (size, time, full index, offset
        overflow), or when trusted batches start past the log end (a gap)."""
        if new_base is not None and new_base != self._leo:
            self.roll(now_ms, new_base=new_base)
            return
        seg = self.active
        if seg.should_roll(size, max_ts, last, now_ms):
            self.roll(now_ms)
        else:
            seg.prepare_active()

    def roll(self, now_ms: int | None = None, *, new_base: int | None = None) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset."""
        now = _now_ms() if now_ms is None else now_ms
        base = self._leo if new_base is None else new_base
        old = self.active
        if old.base_offset == base and max(old.size, 0) == 0:
            old.prepare_active()
            return old
        if max(old.size, 0) == 0 and base > old.base_offset:
            # An empty active segment is replaced, not kept as an empty sealed one.
            old.delete()
            self.segments.pop()
            self._bases.pop()
        else:
            old.seal()
            self._sealed_unflushed.append(old)
        seg = LogSegment.create(self.dir, base, self.config, now_ms=now,
                                jitter_ms=self.config.random_segment_jitter())
        seg.seed_zone_map(self.segments[-1].zone_map_running() if self.segments else zonemap.NO_MAX)
        seg.prepare_active()
        self.segments.append(seg)
        self._bases.append(base)
        self._leo = max(self._leo, base)
        # An empty first segment replaced past a gap: the log now starts at the new one
        # (with a tier, the offsets below it may still be remote: the start stays).
        if self.tier is None or self.tier.highest_offset + 1 < self.segments[0].base_offset:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        # No fsync here: the sealed segment and the directory are synced by the
        # RollFlush that take_roll_flush() hands out (the broker runs it on a worker
        # thread), or by the next flush(); the recovery point waits for that.
        self._roll_flush_upto = max(self._roll_flush_upto, min(base, self._leo))
        self._prefix_max = None
        return seg

    # -- deferred flush after a roll -----------------------------------------------
    @property
    def roll_flush_pending(self) -> bool:
        """A roll happened whose fsyncs nobody has taken yet."""
        return self._roll_flush_upto > self.recovery_point

    def take_roll_flush(self) -> RollFlush | None:
        """The fsyncs owed by rolls so far, as work for any thread (None if none).
        Call on the log's thread; after ``work.run()`` hand it to roll_flush_done."""
        if not self.roll_flush_pending:
            return None
        sealed, self._sealed_unflushed = self._live(self._sealed_unflushed), []
        fds: list[int] = []
        try:
            for seg in sealed:
                fds.append(os.dup(seg.fd()))
                for index in (seg.offset_index, seg.time_index):
                    try:
                        fds.append(os.open(index.path, os.O_RDONLY))
                    except FileNotFoundError:
                        pass
        except BaseException:
            for fd in fds:
                os.close(fd)
            self._sealed_unflushed = sealed + self._sealed_unflushed
            raise
        return RollFlush(fds, self.dir, self._roll_flush_upto, sealed, self._generation)

    def take_flush(self) -> RollFlush:
        """Every fsync owed up to the log end offset now — the segments rolls sealed and
        the active segment's ``.log`` — as work for any thread (group commit: one such
        work covers every append made before it was taken). Call on the log's thread;
        after ``work.run()`` hand it to roll_flush_done (or roll_flush_failed)."""
        work = self.take_roll_flush()
        fd = os.dup(self.active.fd())
        if work is None:
            # Nothing of the active segment synced yet: its file name may be new too.
            new_file = self.recovery_point <= self.active.base_offset
            work = RollFlush([fd], self.dir if new_file else None, self._leo, [],
                             self._generation)
        else:
            work.fds.append(fd)
            work.upto = self._leo
        return work

    def roll_flush_done(self, work: RollFlush) -> None:
        """``work`` ran: advance the recovery point to the roll's base offset, unless a
        truncation happened meanwhile (then the offsets below it are new, unsynced
        data). Closes the work's descriptors."""
        work.close()
        if work.generation != self._generation:
            return
        for seg in work.segments:
            seg.dirty = False
        self.recovery_point = max(self.recovery_point, min(work.upto, self._leo))

    def roll_flush_failed(self, work: RollFlush) -> None:
        """``work.run()`` raised: its segments stay owed to the next flush()."""
        work.close()
        if work.generation == self._generation:
            self._sealed_unflushed = self._live(work.segments) + self._sealed_unflushed

    def _live(self, segs: list[LogSegment]) -> list[LogSegment]:
        """Those of ``segs`` still in the log (retention or truncation may have deleted some)."""
        if not segs:
            return segs
        alive = {id(seg) for seg in self.segments}
        return [seg for seg in segs if id(seg) in alive]

    # -- read ------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Bytes from the batch containing ``offset``: up to max_bytes (a trailing
        partial batch possible) but always at least one whole batch."""
        if offset < self.log_start_offset or offset > self._leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self._leo}]")
        if self.tier is not None and offset < self.segments[0].base_offset:
            return self.tier.read(offset, max_bytes, max_offset=max_offset)
        limit = self._leo if max_offset is None else min(max_offset, self._leo)
        if offset >= limit:
            return b""
        i = max(0, bisect_right(self._bases, offset) - 1)
        for seg in self.segments[i:]:
            info = seg.find_batch(offset)
            if info is None:
                continue
            if info.header.base_offset >= limit:
                return b""
            end = seg.size
            if limit < seg.next_offset:
                stop = seg.find_batch(limit)
                if stop is not None:
                    end = stop.position if stop.header.base_offset >= limit else \
                        stop.position + stop.size
            n = max(min(max_bytes, end - info.position), info.size)
            return seg.pread(info.position, n)
        return b""

    # -- search by timestamp -------------------------------------------------------
    def _prefix_max_list(self) -> list[int]:
        if self._prefix_max is None:
            pm: list[int] = []
            run = NO_TIMESTAMP
            for s in self.segments:
                run = max(run, s.max_timestamp)
                pm.append(run)
            self._prefix_max = pm
        return self._prefix_max

    def _search(self, target: int, first_segment: int = 0) -> tuple[TimestampOffset | None, int]:
        """(hit, segment index of the hit) for the smallest offset >= log start and
        < high watermark whose record timestamp >= target."""
        pm = self._prefix_max_list()
        i = max(first_segment, bisect_left(pm, target))
        start = self.log_start_offset
        hw = self.high_watermark
        segs = self.segments
        while i < len(segs):
            seg = segs[i]
            if seg.base_offset >= hw:
                break
            if seg.max_timestamp >= target and (i + 1 == len(segs) or segs[i + 1].base_offset > start):
                hit = seg.find_by_timestamp(target, start, hw)
                if hit is not None:
                    return TimestampOffset(hit.timestamp, hit.offset, hit.leader_epoch), i
            i += 1
        return None, len(segs)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """Kafka's ListOffsets answer for one partition (None = "no offset": the
        broker sends timestamp -1, offset -1, leader epoch -1).

        ts >= 0: the smallest offset >= log start and < high watermark whose record
        timestamp >= ts, with that record's timestamp and its batch's leader epoch.
        -1 LATEST: (-1, high watermark, latest epoch); -2 EARLIEST and -4
        EARLIEST_LOCAL: (-1, log start, epoch of the batch there); -3 MAX_TIMESTAMP:
        the first record carrying the largest timestamp (base offset of its batch under
        LogAppendTime); -5 LATEST_TIERED: (-1, highest copied offset, its epoch);
        -6 EARLIEST_PENDING_UPLOAD: ``_earliest_pending_upload``; both without a tier:
        (-1, -1, -1).
        """
        tier = self.tier
        if timestamp >= 0:
            if tier is not None:
                hit = self._remote_search(timestamp)
                if hit is not None:
                    return hit
            return self._search(timestamp)[0]
        if timestamp == LATEST_TIMESTAMP:
            return TimestampOffset(-1, self.high_watermark, self.latest_epoch())
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampOffset(-1, self.log_start_offset, self._epoch_at(self.log_start_offset))
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            local = self.local_log_start_offset
            return TimestampOffset(-1, local, self._epoch_at(local))
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        if timestamp == LATEST_TIERED_TIMESTAMP and tier is not None:
            high = tier.highest_offset
            return TimestampOffset(-1, high, tier.epoch_at(high) if high >= 0 else -1)
        if timestamp == EARLIEST_PENDING_UPLOAD_TIMESTAMP and tier is not None:
            return self._earliest_pending_upload(tier.highest_offset)
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return TimestampOffset(-1, -1, -1)
        raise ValueError(f"unsupported special timestamp {timestamp}")

    def _earliest_pending_upload(self, high: int) -> TimestampOffset:
        """-6 EARLIEST_PENDING_UPLOAD (KIP-1023) as Kafka's UnifiedLog answers it: the
        first offset not copied yet, max(highest remote + 1, log start); with nothing
        copied the log start when the log is all local, else unknown (-1: the tier holds
        data this log does not know of)."""
        if high < 0:
            if self.local_log_start_offset != self.log_start_offset:
                return TimestampOffset(-1, -1, -1)
            return TimestampOffset(-1, self.log_start_offset, self._epoch_at(self.log_start_offset))
        offset = max(high + 1, self.log_start_offset)
        return TimestampOffset(-1, offset, self._epoch_at(offset))

    def _remote_search(self, timestamp: int) -> TimestampOffset | None:
        """The tier's answer for records below the local start (Kafka's
        RemoteLogManager.findOffsetByTimestamp), None to search the local segments."""
        assert self.tier is not None
        hit = self.tier.offset_for_timestamp(timestamp)
        return TimestampOffset(*hit) if hit is not None else None

    def offset_range_for_times(self, t1: int, t2: int) -> tuple[int, int]:
        """[first offset with ts >= t1, first offset with ts >= t2), each defaulting to
        the high watermark when no record qualifies; end is never below start."""
        if t1 < 0 or t2 < 0:
            raise ValueError("offset_range_for_times needs timestamps >= 0")
        if self.tier is not None:
            a = self.offset_for_timestamp(t1)
            start = a.offset if a is not None else self.high_watermark
            if t2 <= t1:
                return start, start
            b = self.offset_for_timestamp(t2)
            return start, max(start, b.offset if b is not None else self.high_watermark)
        hit1, seg1 = self._search(t1)
        start = hit1.offset if hit1 is not None else self.high_watermark
        if t2 <= t1:
            return start, start
        # Any record with ts >= t2 also has ts >= t1, so it lies in seg1 or later.
        hit2, _ = self._search(t2, seg1)
        end = hit2.offset if hit2 is not None else self.high_watermark
        return start, max(start, end)

    # -- event time (storage/zonemap.py, storage/planner.py) ---------------------------
    def plan_time_window(self, t1: int, t2: int, *, max_offset: int | None = None
                         ) -> list[PlannedRange]:
        """The offset ranges in [log start, min(high watermark, max_offset)) whose zone-map
        blocks may hold a record with t1 <= timestamp < t2 (never missing one), merged
        where adjacent, with their bytes. With numpy, blocks the sorted-timestamp indexes
        cover are planned only when they hold such a record (tsindex.plan_indexed). Unlike offset_range_for_times this is the
        event-time question: out-of-order records anywhere in the log are found.
        ``max_offset`` is the last stable offset for a read_committed reader."""
        end = self.high_watermark if max_offset is None else min(max_offset, self.high_watermark)
        start = self.log_start_offset
        segs = self.segments
        first = max(0, bisect_right(self._bases, start) - 1)
        live = [(j, seg) for j, seg in enumerate(segs) if j >= first and seg.base_offset < end]
        remote = self.tier.zone_maps() if self.tier is not None else []
        if not HAVE_NUMPY:
            return planner.plan_blocks([*remote, *(seg.zone_map() for _, seg in live)],
                                       t1, t2, start, end)
        from storage import tsindex

        last = len(segs) - 1
        indexed: list[tuple[zonemap.ZoneMap, tsindex.TsIndex | None]] = [
            (zm, None) for zm in remote]
        for j, seg in live:
            zm = seg.zone_map()
            indexed.append((zm, seg.ts_index(zm, sealed=j < last)))
        return tsindex.plan_indexed(indexed, t1, t2, start, end)

    def disorder_stats(self) -> DisorderStats:
        """How many records in [log start, log end) arrived with a timestamp below the
        largest timestamp before them, and the largest such lateness (storage/planner.py).
        Incremental: appends since the last call are counted from where it stopped."""
        stats = self._count_disorder(None)
        assert stats is not None
        return stats

    def _count_disorder(self, deadline: float | None) -> DisorderStats | None:
        segs = self.segments
        first = max(0, bisect_right(self._bases, self.log_start_offset) - 1)
        key = (self._layout_gen, self._generation, self.log_start_offset, segs[first].base_offset)
        live = segs[first:]
        stats, self._disorder_cursor = planner.count_disorder(
            [seg.zone_map for seg in live], self.log_start_offset,
            lambda j, a, b: live[j].block_timestamps(a, b),
            lambda j, a, b, running: live[j].block_late(a, b, running),
            self._disorder_cursor, key,
            None if deadline is None else (lambda: time.monotonic() >= deadline))
        return stats

    def build_zone_maps(self, budget_ms: float) -> bool:
        """Load or rebuild the segments' zone maps, then count what appends left uncounted
        (disorder_stats), for at most ``budget_ms`` (the broker's background task), so
        the first plan or scrape after a start, a crash or a burst of late data reads no
        .log on the request path. Resumable; True once everything is done."""
        deadline = time.monotonic() + budget_ms / 1000.0
        for seg in self.segments:
            if not seg.build_zone_map(deadline):
                return False
        # then the disorder counts of blocks to re-base (retention, DeleteRecords,
        # compaction, a rebuild that did not know earlier segments)
        return self._count_disorder(deadline) is not None

    def build_ts_indexes(self, budget_ms: float) -> bool:
        """Extend the segments' sorted-timestamp indexes (storage/tsindex.py) for at most
        ``budget_ms`` (the broker's background task, after build_zone_maps): sealed
        segments completely (then their sidecars are written), the active one up to its
        last complete block. Resumable; True once everything is done. Without numpy
        (the arrow extra) there are no indexes and the broker serves no CountTimeWindows."""
        if not HAVE_NUMPY:
            return True
        deadline = time.monotonic() + budget_ms / 1000.0
        last = len(self.segments) - 1
        for i, seg in enumerate(self.segments):
            # each call decodes at least one window of a segment not indexed yet, then
            # stops at the deadline: slices with no time left still progress
            if not seg.build_ts_index(deadline, sealed=i < last):
                return False
        return True

    def count_time_windows(self, bounds: Sequence[int], *, max_offset: int | None = None,
                           aborted: Sequence[TxnIndexEntry] = ()) -> list[int]:
        """Exactly how many data records in [log start, min(high watermark, max_offset))
        have bounds[k] <= timestamp < bounds[k+1], for each k (``bounds`` ascending,
        at least two). ``max_offset`` is the LSO and ``aborted`` the partition's aborted
        transactions for a read_committed count (their records are left out).

        Whole blocks come from the sorted-timestamp indexes; the blocks not indexed yet
        (the active segment's newest, or all before the background step built them),
        the block holding the log start or the end, and those an aborted transaction
        overlaps are decoded from the .log: always exact, only slower when unindexed."""
        import numpy as np

        from storage import tsindex

        b = np.asarray(bounds, dtype=np.int64)
        if len(b) < 2 or bool(np.any(np.diff(b) < 0)):
            raise ValueError("bounds must be ascending, at least two")
        end = self.high_watermark if max_offset is None else min(max_offset, self.high_watermark)
        start = self.log_start_offset
        cum = np.zeros(len(b), dtype=np.int64)
        if end <= start:
            return np.diff(cum).tolist()
        ab = [e for e in aborted if e.last_offset > start and e.first_offset < end]
        segs = self.segments
        if self.tier is not None and start < segs[0].base_offset:
            cum += self.tier.count_time_windows(b, start, min(end, segs[0].base_offset), ab)
        last = len(segs) - 1
        for j in range(max(0, bisect_right(self._bases, start) - 1), len(segs)):
            seg = segs[j]
            if seg.base_offset >= end:
                break
            zm = seg.zone_map()
            n = len(zm)
            if not n or zm.next_offset <= start:
                continue
            firsts = np.frombuffer(zm.first, dtype=np.int64)
            ends = np.empty(n, dtype=np.int64)
            ends[:-1] = firsts[1:]
            ends[-1] = zm.next_offset
            rel = np.flatnonzero((ends > start) & (firsts < end))
            if not len(rel):
                continue
            i0, i1 = int(rel[0]), int(rel[-1]) + 1
            whole = (firsts[i0:i1] >= start) & (ends[i0:i1] <= end)
            for e in ab:
                whole &= ~((firsts[i0:i1] < e.last_offset) & (ends[i0:i1] > e.first_offset))
            tsi = seg.ts_index(zm, sealed=j < last)
            nb = tsi.nblocks if tsi is not None else 0
            whole[max(0, nb - i0):] = False
            cuts = np.flatnonzero(np.diff(whole.astype(np.int8))) + 1
            edges = [0, *cuts.tolist(), i1 - i0]
            for s_, e_ in zip(edges, edges[1:], strict=False):
                lo, hi = i0 + s_, i0 + e_
                if whole[s_]:
                    assert tsi is not None
                    cum += tsi.cum(lo, hi, b)
                else:
                    cum += tsindex.count_columns(seg.decode_blocks(zm, lo, hi), b, start, end, ab)
        return np.diff(cum).tolist()

    def zone_maps(self) -> list[tuple[int, zonemap.ZoneMap]]:
        """(segment base offset, zone map) of every segment, oldest first (loading or
        rebuilding the maps not in memory yet)."""
        return [(seg.base_offset, seg.zone_map()) for seg in self.segments]

    def build_summaries(self, budget_ms: float) -> bool:
        """Build block summaries of large batches for at most ``budget_ms`` (a broker
        calls this from its background task), so that even the first lookup in a
        10,000-record batch reads and walks one 16-record block. Resumes where the previous
        call stopped; returns True once every segment is summarised. Appends after
        that are summarised by later calls (or on their second lookup)."""
        deadline = time.monotonic() + budget_ms / 1000.0
        base, pos = self._summary_cursor
        i = bisect_left(self._bases, base)
        if i >= len(self.segments) or self._bases[i] != base:
            pos = 0  # that segment is gone: continue with the next one from its start
        while i < len(self.segments):
            seg = self.segments[i]
            nxt = seg.build_summaries(pos, deadline)
            if nxt >= 0:
                self._summary_cursor = (seg.base_offset, nxt)
                return False
            if i == len(self.segments) - 1:
                # the active segment: later calls resume at its current end
                self._summary_cursor = (seg.base_offset, max(seg.size, 0))
                return True
            i, pos = i + 1, 0
        return True

    def latest_epoch(self) -> int:
        if self._latest_epoch is None:
            self._latest_epoch = -1
            for seg in reversed(self.segments):
                if max(seg.size, 0) == 0:
                    continue
                _, pos = seg.offset_index.lookup(1 << 62)
                for info in seg.iter_batches(pos):
                    if info.header.partition_leader_epoch >= 0:
                        self._latest_epoch = info.header.partition_leader_epoch
                break
        return self._latest_epoch

    def _epoch_at(self, offset: int) -> int:
        if offset >= self._leo:
            return self.latest_epoch()
        if self.tier is not None and offset < self.segments[0].base_offset:
            return self.tier.epoch_at(offset)
        i = max(0, bisect_right(self._bases, offset) - 1)
        for seg in self.segments[i:]:
            info = seg.find_batch(offset)
            if info is not None:
                return info.header.partition_leader_epoch
        return self.latest_epoch()

    def _max_timestamp_offset(self) -> TimestampOffset | None:
        """ListOffsets MAX_TIMESTAMP (-3). The answer is kept until the log changes: finding
        the first record at the max decodes its batch (a 1 MB batch takes milliseconds,
        and the console asks for every chart)."""
        key: tuple[int, ...] = (self._layout_gen, self._leo, self.high_watermark,
                                self.log_start_offset)
        if self.tier is not None:
            key = (*key, self.tier.manifest.generation)
        if self._max_ts_cache is not None and self._max_ts_cache[0] == key:
            return self._max_ts_cache[1]
        hit = self._find_max_timestamp_offset()
        if self.tier is not None:
            remote = self.tier.max_timestamp_hit()
            if remote is not None and (hit is None or remote.timestamp >= hit.timestamp):
                hit = TimestampOffset(*remote)
            key = (*key, self.tier.manifest.generation)
        self._max_ts_cache = (key, hit)
        return hit

    def _find_max_timestamp_offset(self) -> TimestampOffset | None:
        best: LogSegment | None = None
        for seg in self.segments:
            if best is None or seg.max_timestamp > best.max_timestamp:
                best = seg
        if best is None or best.max_timestamp < 0 or self._leo == self.local_log_start_offset:
            return None
        target = best.max_timestamp
        _, pos = best.offset_index.lookup(best.offset_of_max)
        for info in best.iter_batches(pos):
            if info.header.max_timestamp == target:
                raw = best.pread(info.position, info.size)
                off = offset_of_first_max(raw, 0, info.header)
                if off >= self.high_watermark:
                    return None
                return TimestampOffset(target, off, info.header.partition_leader_epoch)
        return None

    # -- truncation and retention ----------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset >= ``offset`` (batch granularity).

        Below the first segment's base the log is emptied and restarts at ``offset``.
        """
        if offset >= self._leo:
            return
        if offset < self.segments[0].base_offset or offset < 0:
            self.truncate_fully_and_start_at(max(offset, 0))
            return
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            self.segments.pop().delete()
            self._bases.pop()
        seg = self.active
        seg.truncate_to(offset)
        path = txnindex.path_for(self.dir, seg.base_offset)
        if path.exists():
            txnindex.rewrite(path, [e for e in txnindex.read(path) if e.last_offset < offset])
        self._leo = max(seg.next_offset, seg.base_offset)
        self.log_start_offset = min(self.log_start_offset, self._leo)
        self.recovery_point = min(self.recovery_point, self._leo)
        self._roll_flush_upto = min(self._roll_flush_upto, self._leo)
        self._forget_derived()

    def _forget_derived(self) -> None:
        """Drop what was derived from the removed batches (after a truncation)."""
        self._generation += 1  # a deferred flush taken before this no longer speaks for the log
        self._layout_gen += 1
        self._sealed_unflushed = self._live(self._sealed_unflushed)
        self._prefix_max = None
        self._latest_epoch = None
        self._last_append_time = None
        self._summary_cursor = (0, 0)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        for seg in self.segments:
            seg.delete()
        seg = LogSegment.create(self.dir, offset, self.config, now_ms=_now_ms(),
                                jitter_ms=self.config.random_segment_jitter())
        self.segments = [seg]
        self._bases = [offset]
        self._leo = offset
        self.log_start_offset = offset
        self._checkpoint_start = None  # the start checkpointed before no longer applies
        self.recovery_point = offset
        self._roll_flush_upto = offset
        self._forget_derived()

    def advance_log_start_offset(self, offset: int) -> None:
        """Move the log start forward (DeleteRecords); segments below it go on the next
        retention pass."""
        if offset > self._leo:
            raise OffsetOutOfRangeError(f"offset {offset} is beyond the log end {self._leo}")
        self.log_start_offset = max(self.log_start_offset, offset)

    def delete_old_segments(self, now_ms: int) -> int:
        """Kafka's retention pass: time, then size, then log-start rules; returns the
        number of segments deleted. Oldest first, stopping at the first segment that
        must stay; never past the high watermark; files are renamed ``.deleted`` and
        removed at once (file.delete.delay.ms is not waited for)."""
        cfg = self.config
        if cfg.log_append_time and self._last_append_time is None:
            self._last_append_time = self._prefix_max_list()[-1]  # before the data goes
        if self.tier is not None:
            return self._delete_local_copies(now_ms)
        deleted = 0
        if cfg.retention_ms >= 0 and cfg.delete_enabled:
            deleted += self._delete_while(
                lambda seg, _rest: now_ms - seg.largest_timestamp() > cfg.retention_ms)
        if cfg.retention_bytes >= 0 and cfg.delete_enabled:
            excess = [self.size_in_bytes() - cfg.retention_bytes]

            def over(seg: LogSegment, _rest: int) -> bool:
                if excess[0] - max(seg.size, 0) >= 0:
                    excess[0] -= max(seg.size, 0)
                    return True
                return False
            deleted += self._delete_while(over)
        deleted += self.delete_segments_below_log_start()
        return deleted

    def _delete_local_copies(self, now_ms: int) -> int:
        """Retention with a remote tier: segments wholly below the log start go, then
        local.retention.ms/.bytes delete local segments, but only those already copied
        (their last offset <= highest offset in remote storage), never one that is not,
        whatever its age or the local size. The log start does not move: the records
        stay readable from the tier (its own retention moves the start)."""
        cfg = self.config
        uploaded = self.tier.highest_offset if self.tier is not None else -1
        deleted = self.delete_segments_below_log_start()
        local_ms = cfg.effective_local_retention_ms
        if local_ms >= 0:
            deleted += self._delete_while(
                lambda seg, upper: upper - 1 <= uploaded
                and now_ms - seg.largest_timestamp() > local_ms)
        local_bytes = cfg.effective_local_retention_bytes
        if local_bytes >= 0:
            excess = [self.size_in_bytes() - local_bytes]

            def over(seg: LogSegment, upper: int) -> bool:
                if upper - 1 <= uploaded and excess[0] - max(seg.size, 0) >= 0:
                    excess[0] -= max(seg.size, 0)
                    return True
                return False
            deleted += self._delete_while(over)
        return deleted

    def delete_segments_below_log_start(self) -> int:
        """Delete the segments wholly below the log start offset (after DeleteRecords moved
        it, KIP-107); the segment holding the log start stays. Returns how many went."""
        return self._delete_while(lambda _seg, next_base: next_base <= self.log_start_offset)

    def _delete_while(self, predicate: object) -> int:
        assert callable(predicate)
        hw = self.high_watermark
        victims = 0
        for i, seg in enumerate(self.segments):
            is_last = i == len(self.segments) - 1
            upper = self._leo if is_last else self.segments[i + 1].base_offset
            if is_last and max(seg.size, 0) == 0:
                break
            if upper > hw or not predicate(seg, upper):
                break
            victims += 1
        if victims == 0:
            return 0
        if victims == len(self.segments):
            self.roll()  # Kafka rolls so the log keeps an active segment
        for seg in self.segments[:victims]:
            seg.delete()
        del self.segments[:victims]
        del self._bases[:victims]
        if self.tier is None or self.tier.highest_offset + 1 < self.segments[0].base_offset:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self._prefix_max = None
        self._layout_gen += 1
        return victims

    def replace_segments(self, old: list[LogSegment], new: LogSegment,
                         aborted: list[TxnIndexEntry]) -> None:
        """Put ``new`` (a cleaned segment whose files are in place, storage/cleaner.py)
        where the consecutive sealed segments ``old`` were, in one step on the log's
        thread; what was derived from the old files is forgotten. ``aborted`` is the
        new segment's ``.txnindex`` as the clean left it (the entries whose data is
        left); the old segments' files go. A crash between the swap and these files
        is repaired at start, which rebuilds them from the log."""
        i = next(j for j, s in enumerate(self.segments) if s is old[0])
        if self.segments[i:i + len(old)] != old or i + len(old) >= len(self.segments):
            raise ValueError("replace_segments needs consecutive sealed segments of this log")
        for s in old:
            if s.base_offset != new.base_offset:
                txnindex.rewrite(txnindex.path_for(self.dir, s.base_offset), [])
        if aborted or txnindex.path_for(self.dir, new.base_offset).exists():
            txnindex.rewrite(txnindex.path_for(self.dir, new.base_offset), aborted)
        for s in old:  # their zone maps describe files that are gone
            s.zone_map_path.unlink(missing_ok=True)
            s.ts_index_path.unlink(missing_ok=True)
        self.segments[i:i + len(old)] = [new]
        self._bases[i:i + len(old)] = [new.base_offset]
        self._layout_gen += 1
        self._sealed_unflushed = self._live(self._sealed_unflushed)
        self._prefix_max = None
        self._latest_epoch = None
        self._summary_cursor = (0, 0)

    # -- transaction index (storage/txnindex.py) ---------------------------------------
    def _segment_holding(self, offset: int) -> LogSegment:
        return self.segments[max(0, bisect_right(self._bases, offset) - 1)]

    def append_aborted_txn(self, entry: TxnIndexEntry) -> None:
        """Record an aborted transaction in the ``.txnindex`` of the segment holding its
        ABORT marker (``entry.last_offset``, already appended)."""
        seg = self._segment_holding(entry.last_offset)
        txnindex.append(txnindex.path_for(self.dir, seg.base_offset), entry)

    def aborted_txns_on_disk(self) -> list[TxnIndexEntry]:
        """Every ``.txnindex`` entry of the log's segments, in segment order."""
        return [e for seg in self.segments
                for e in txnindex.read(txnindex.path_for(self.dir, seg.base_offset))]

    def sync_aborted_txns(self, entries: Iterable[TxnIndexEntry]) -> int:
        """Make the ``.txnindex`` files hold exactly ``entries`` (marker order), each in
        the segment holding its marker; entries whose marker is outside the log are
        left out. Only files that differ are rewritten; returns how many were."""
        want: dict[int, list[TxnIndexEntry]] = {}
        first, leo = self.segments[0].base_offset, self._leo
        for e in entries:
            if first <= e.last_offset < leo:
                want.setdefault(self._segment_holding(e.last_offset).base_offset, []).append(e)
        present = {int(name[:20]) for name in os.listdir(self.dir)
                   if name.endswith(txnindex.SUFFIX) and name[:20].isdigit()}
        changed = 0
        for base in sorted(present | set(want)):
            path = txnindex.path_for(self.dir, base)
            expected = want.get(base, [])
            if base in present and path.read_bytes() == txnindex.encode(expected):
                continue
            txnindex.rewrite(path, expected)
            changed += 1
        return changed

    # -- durability ------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment written since the last flush (including any a roll
        left to a deferred flush) and the directory; advance the recovery point."""
        for seg in self.segments:
            if seg.dirty:
                seg.flush()
        self.active.flush()
        if self._sealed_unflushed or self._roll_flush_upto > self.recovery_point:
            fsync_dir(self.dir)
        self._sealed_unflushed = []
        self.recovery_point = self._leo
        self._roll_flush_upto = max(self._roll_flush_upto, self._leo)

    def close(self) -> None:
        """Flush, write final time entries, trim indexes and close every file."""
        self.flush()
        for seg in self.segments:
            seg.close()

    def delete_files(self) -> None:
        """Remove every segment file (the partition is being deleted)."""
        for seg in self.segments:
            seg.delete()
        self.segments = []
        self._bases = []


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        pass
