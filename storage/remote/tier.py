"""One partition's remote tier (KIP-405): copy sealed segments to a bucket, expire them,
and read, look up and plan over them as if they were still local.

The partition's manifest (storage/remote/manifest.py) is the only metadata: it lives in
the bucket, is rewritten whole (an atomic PUT) at every state change, and is what a
restart, a read replica or Spark plans from.

Copy of one segment, in steps (``copy_steps`` yields after each, so a test can stop
after any of them and reopen from disk and bucket, which is what a kill -9 leaves):
  1. manifest with the segment in COPY_SEGMENT_STARTED;
  2. its files: .log, .index, .timeindex, .txnindex (empty if none), .snapshot,
     .leader_epoch_checkpoint, .zonemap (storage/remote/snapshot.py for the two state
     files);
  3. manifest with the segment COPY_SEGMENT_FINISHED: from now on readers use it and
     local retention may delete the local copy.
Delete of one segment (``delete_steps``), in two halves: ``move_log_start_past`` (on
the thread that owns the log: the log start moves past it in memory) then
``delete_segment_steps`` (store I/O: the manifest that marks it DELETE_SEGMENT_STARTED
and carries the new start, its files, a manifest without it).

Invariants:
- opening a tier finishes what a crash interrupted: segments left in COPY_SEGMENT_STARTED
  or DELETE_SEGMENT_STARTED lose their files and their entry, and segment files no
  manifest entry names (orphans) are deleted; so the bucket holds the old or the new
  state of any step, never a readable half;
- only COPY_SEGMENT_FINISHED segments are read; ``highest_offset`` is the largest
  end offset among them (Kafka's highestOffsetInRemoteStorage, -1 when none);
- copied segments are exactly local segment boundaries: remote segment i's
  ``next_offset`` is the base of the segment that followed it locally, so the local log
  start (first local segment's base) is a remote ``next_offset`` or beyond;
- every method blocks on the object store: callers run it off the event loop.

How the broker drives it (one ``RemoteTier`` per partition of a topic with
remote.storage.enable=true; ``LogDir.remote_index_cache(budget)`` is the shared cache):
- ``RemoteTier(log, store, topic, partition, topic_id=..., partitions=..., cache=...)``
  opens the manifest, finishes an interrupted copy/delete and attaches to ``log``;
- every remote.log.manager.task.interval.ms: ``copy_candidates(lso)`` on the loop and
  ``copy_segment`` on a worker thread; for each of ``expired(now_ms)`` (total retention
  and the segments below a DeleteRecords start) ``move_log_start_past`` on the loop,
  ``delete_segment_steps`` on a worker thread;
  ``persist_log_start()`` after a DeleteRecords; ``log.delete_old_segments`` (the
  existing retention pass) then deletes local copies per local.retention.*;
- ``log.is_remote_offset(offset)`` says whether ``log.read`` will call the store: run it
  on a worker thread then; ``offset_for_timestamp``/``plan_time_window``/
  ``count_time_windows`` of a log with a tier may call it too;
- remote.storage.enable going false: ``log.detach_tier()`` on the loop, then with
  remote.log.delete.on.disable ``delete_all()`` on a worker thread (``disable()`` does
  both); a deleted topic: ``delete_all(topic_deleted=True)``;
- ``open_read_replica`` + ``refresh`` for a standalone read replica; a broker's uses
  ``read_replica_of`` and ``fetch_manifest`` (thread) + ``follow`` (loop).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
import uuid
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from storage import txnindex
from storage.batch_search import (
    SUMMARY_MIN_RECORDS,
    BatchSummary,
    build_summary,
    charge_summary_blocks,
    first_record_at_or_after,
    offset_of_first_max,
    search_block,
    summary_block,
    summary_fits,
)
from storage.errors import OffsetOutOfRangeError
from storage.records import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    iter_batches,
)
from storage.remote import manifest as mf
from storage.remote.chunk_cache import require_store
from storage.remote.index_cache import RemoteIndexCache
from storage.remote.manifest import PartitionManifest, RemoteSegment, SegmentState
from storage.remote.snapshot import (
    ProducerEntry,
    add_epoch,
    advance_producers,
    decode_snapshot,
    encode_epochs,
    encode_snapshot,
)
from storage.remote.store import ObjectStore, RemoteObjectNotFound, RemoteStorageError
from storage.segment import LogSegment, TimestampHit, zone_add_batch
from storage.txnindex import TxnIndexEntry
from storage.zonemap import NO_MAX, ZoneMap

if TYPE_CHECKING:
    from storage.config import LogConfig
    from storage.log import Log
    from storage.remote.chunk_cache import RemoteChunkCache

_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")
_READ_CHUNK = 64 * 1024
_FIRST_READ = 8 * 1024
MEMORY_ENTRIES = 256
_LOG = logging.getLogger("chronolog.tier")


class _Index:
    """A fetched index as two ascending lists: keys (offset or timestamp) and values
    (position or offset); ``floor`` is the index lookup (largest key <= target)."""

    __slots__ = ("keys", "values")

    def __init__(self, entries: list[tuple[int, int]]) -> None:
        self.keys = [k for k, _ in entries]
        self.values = [v for _, v in entries]

    def floor(self, target: int, default: int) -> int:
        i = bisect_right(self.keys, target) - 1
        return self.values[i] if i >= 0 else default


class _Readable(NamedTuple):
    key: tuple[int, int, int]  # manifest generation, log start, first local base
    segments: list[RemoteSegment]
    ends: list[int]  # end offsets, ascending
    prefix_max: list[int]  # running max of max_timestamp


def _now_ms() -> int:
    return int(time.time() * 1000)


class RemoteTier:
    """The remote half of one partition log (module docstring). ``attach`` makes the
    ``Log`` route reads, lookups and plans below its local start here."""

    def __init__(self, log: Log, store: ObjectStore, topic: str, partition: int, *,
                 topic_id: str = "", partitions: int | None = None,
                 cache: RemoteIndexCache | None = None, attach: bool = True,
                 read_only: bool = False, chunks: RemoteChunkCache | None = None) -> None:
        self.log = log
        self.store = store
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.partitions = partitions
        self.cache = cache
        self.chunks = chunks
        self._lock = threading.RLock()
        # Parsed indexes and zone maps of remote segments, most recently used last, at
        # most MEMORY_ENTRIES of each (the files stay in the on-disk cache).
        self._zone_maps: OrderedDict[str, ZoneMap] = OrderedDict()
        self._indexes: OrderedDict[tuple[str, str], _Index] = OrderedDict()
        self._memo_lock = threading.Lock()
        self._readable: _Readable | None = None
        self._producers: dict[int, ProducerEntry] | None = None
        # Block summaries of large remote batches once searched, as a local segment
        # keeps them (storage/batch_search.py), counted against the same budget.
        self._summaries: dict[tuple[str, int], BatchSummary] = {}
        self.bytes_copied = 0
        self.bytes_fetched = 0
        self.read_only = read_only
        self._topic_written = b""
        self.manifest = self._load_manifest()
        if not read_only:
            self.recover()
        if attach:
            log.attach_tier(self)

    # -- the manifest --------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return mf.partition_prefix(self.topic, self.partition)

    def _load_manifest(self) -> PartitionManifest:
        try:
            data = self.store.get(mf.manifest_key(self.topic, self.partition))
        except RemoteObjectNotFound:
            return PartitionManifest(mf.FORMAT_VERSION, self.topic, self.partition,
                                     self.topic_id, 0, 0, [])
        m = mf.decode_partition(data)
        if not self.topic_id:
            self.topic_id = m.topic_id
        return m

    def _write_manifest(self, segments: list[RemoteSegment], log_start: int) -> None:
        m = PartitionManifest(mf.FORMAT_VERSION, self.topic, self.partition, self.topic_id,
                              self.manifest.generation + 1, log_start, segments)
        self._put(mf.manifest_key(self.topic, self.partition), mf.encode(m))
        self.manifest = m  # one reference swap: readers on other threads see old or new

    def _put(self, key: str, data: bytes) -> None:
        """Every write of the tier goes through here or ``_delete``: a read-only tier
        (a read replica) refuses it before the store is called."""
        self._writable(key)
        self.store.put(key, data)

    def _delete(self, key: str) -> None:
        self._writable(key)
        self.store.delete(key)

    def _writable(self, key: str) -> None:
        if self.read_only:
            raise RemoteStorageError(f"{self.topic}-{self.partition}: a read replica does not "
                                     f"write to the bucket (refused a write of {key})")

    # -- read replicas -------------------------------------------------------------------
    @classmethod
    def open_read_replica(cls, store: ObjectStore, topic: str, partition: int,
                          directory: str | os.PathLike[str], config: LogConfig, *,
                          cache: RemoteIndexCache | None = None,
                          chunks: RemoteChunkCache | None = None) -> RemoteTier:
        """A partition served from the bucket alone (``chronolog serve --read-replica``):
        an empty local log in ``directory`` starting right after the last copied offset,
        with this tier below it, so the ``Log`` API (read, ListOffsets, plans, counts)
        answers over the remote data; ``refresh`` follows new uploads. Never writes."""
        from storage.log import Log

        tier = cls.read_replica_of(Log(directory, config), store, topic, partition, cache=cache,
                                   chunks=chunks)
        tier.follow()
        return tier

    @classmethod
    def read_replica_of(cls, log: Log, store: ObjectStore, topic: str, partition: int, *,
                        cache: RemoteIndexCache | None = None,
                        chunks: RemoteChunkCache | None = None) -> RemoteTier:
        """A read-only tier over ``log`` (an existing log that holds no data of its own,
        e.g. a broker's partition): the manifest is read (store I/O, run it off the event
        loop) but the log is not touched until ``follow()``, which does no I/O (the
        event loop's half). No recovery runs: a copy the writer has not finished is its
        business; only COPY_SEGMENT_FINISHED segments are read."""
        return cls(log, store, topic, partition, cache=cache, attach=False, read_only=True,
                   chunks=chunks)

    def refresh(self) -> bool:
        """Reload the manifest (a reader following the writer); True when it changed. A
        read replica's log then ends right after the last copied offset. Blocking:
        ``fetch_manifest()`` (thread) + ``follow(m)`` (loop) is the same in two halves."""
        m = self.fetch_manifest()
        if m is None:
            return False
        if self.read_only:
            self.follow(m)
        else:
            self.manifest = m
        return True

    def fetch_manifest(self) -> PartitionManifest | None:
        """The bucket's manifest if it is newer (a higher generation) than the one held,
        else None (same, or an older one read stale). Store I/O only: nothing changes."""
        m = self._load_manifest()
        return m if m.generation > self.manifest.generation or self._other_topic(m) else None

    def _other_topic(self, m: PartitionManifest) -> bool:
        """``m`` is of a topic deleted and created again under the same name (another
        topic id): its generations start over, so a lower one is still the newer."""
        return bool(m.topic_id and self.manifest.topic_id and m.topic_id != self.manifest.topic_id)

    def follow(self, m: PartitionManifest | None = None) -> bool:
        """A read replica takes manifest ``m`` (when newer than the held one) and its log
        moves to where the tier ends: empty, starting right after the last copied offset,
        its log start the first remote one raised to the manifest's (the writer's
        retention and DeleteRecords). No store I/O: only the local log's (and the local
        caches' files of a topic created again under its name). Returns whether the
        log's end moved."""
        if not self.read_only:
            raise RemoteStorageError(f"{self.topic}-{self.partition}: follow() is for read "
                                     "replicas")
        replaced = m is not None and self._other_topic(m)
        if replaced:  # the old topic's parsed indexes, summaries and cached files go
            for rs in self.manifest.segments:
                self._forget(rs)
            self._producers = None
        if m is not None and (replaced or m.generation > self.manifest.generation):
            self.manifest = m
            self.topic_id = m.topic_id
        log = self.log
        end = max(self.highest_offset + 1, self.manifest.log_start_offset)
        moved = end != log.log_end_offset
        if replaced or moved or log.segments[0].base_offset != end:
            log.truncate_fully_and_start_at(end)
        log.tier = None
        log.attach_tier(self)
        return moved

    def write_topic_manifest(self) -> None:
        """topics/<topic>/topic.json: id, partition count, the topic's Kafka configs."""
        tm = mf.TopicManifest(mf.FORMAT_VERSION, self.topic, self.topic_id,
                              self.partitions if self.partitions is not None
                              else self.partition + 1, self.log.config.to_kafka())
        data = mf.encode(tm)
        if data != self._topic_written:
            self._put(mf.topic_key(self.topic), data)
            self._topic_written = data

    def recover(self) -> int:
        """Finish what a crash interrupted (module docstring); returns objects deleted."""
        with self._lock:
            keep: list[RemoteSegment] = []
            doomed: list[RemoteSegment] = []
            for s in self.manifest.segments:
                (keep if s.state == SegmentState.COPY_SEGMENT_FINISHED else doomed).append(s)
            deleted = 0
            for s in doomed:
                deleted += self._delete_files(s)
            if doomed:
                self._write_manifest(keep, self.manifest.log_start_offset)
            known = {s.segment_id for s in keep}
            for obj in self.store.list(self.prefix):
                name = obj.key.rsplit("/", 1)[-1]
                stem, dot, _ = name.partition(".")
                if not dot or "-" not in stem:
                    continue
                seg_id = stem.split("-", 1)[1]
                if seg_id not in known:
                    self._delete(obj.key)
                    deleted += 1
            return deleted

    # -- what the tier holds ---------------------------------------------------------
    def finished(self) -> list[RemoteSegment]:
        """COPY_SEGMENT_FINISHED segments, ascending (whatever the log start)."""
        return [s for s in self.manifest.segments if s.state == SegmentState.COPY_SEGMENT_FINISHED]

    @property
    def highest_offset(self) -> int:
        """Kafka's highestOffsetInRemoteStorage: -1 when nothing is copied."""
        return self.manifest.highest_offset()

    def size_bytes(self) -> int:
        start = self.log.log_start_offset
        return sum(s.size_bytes for s in self.finished() if s.end_offset >= start)

    def readable(self) -> list[RemoteSegment]:
        """Finished segments holding offsets in [log start, first local segment's base):
        what reads, lookups and plans use the tier for."""
        return self._readable_view().segments

    def _readable_view(self) -> _Readable:
        start = self.log.log_start_offset
        local = self.log.segments[0].base_offset
        key = (self.manifest.generation, start, local)
        view = self._readable
        if view is None or view.key != key:
            segs = [s for s in self.finished() if s.end_offset >= start and s.base_offset < local]
            run, pm = -1, []
            for s in segs:
                run = max(run, s.max_timestamp)
                pm.append(run)
            view = self._readable = _Readable(key, segs, [s.end_offset for s in segs], pm)
        return view

    # -- copy ------------------------------------------------------------------------
    def copy_candidates(self, last_stable_offset: int) -> list[LogSegment]:
        """Kafka's rule: sealed segments whose next segment's base <= LSO, from the one
        holding max(highest copied + 1, log start)."""
        segs = self.log.segments
        start = max(self.highest_offset + 1, self.log.log_start_offset)
        out = []
        for seg, nxt in zip(segs, segs[1:], strict=False):
            if nxt.base_offset > last_stable_offset:
                break
            if nxt.base_offset <= start or max(seg.size, 0) == 0:
                continue
            out.append(seg)
        return out

    def copy(self, last_stable_offset: int) -> int:
        """Copy every candidate segment; returns how many were copied. A failed copy is
        cleaned up (its files deleted, its entry dropped) and the error raised."""
        if self.log.config.remote_log_copy_disable:
            return 0
        self.write_topic_manifest()  # once per process, and again when the configs change
        n = 0
        for seg in self.copy_candidates(last_stable_offset):
            self.copy_segment(seg)
            n += 1
        return n

    def copy_segment(self, seg: LogSegment) -> RemoteSegment:
        steps = self.copy_steps(seg)
        try:
            for _ in steps:
                pass
        except Exception:
            self._abort_copy()
            raise
        return self.finished()[-1]

    def _abort_copy(self) -> None:
        try:
            self.recover()
        except Exception:
            pass  # the next open cleans up

    def _next_base(self, seg: LogSegment) -> int:
        segs = self.log.segments
        i = segs.index(seg)
        if i + 1 >= len(segs):
            raise ValueError(f"segment {seg.base_offset} is the active segment")
        return segs[i + 1].base_offset

    def _producer_state(self) -> dict[int, ProducerEntry]:
        """Producers as of the end of the last copied segment (from its .snapshot)."""
        if self._producers is None:
            done = self.finished()
            self._producers = {}
            if done:
                try:
                    self._producers = decode_snapshot(
                        self.store.get(mf.segment_key(self.topic, self.partition, done[-1],
                                                      ".snapshot")))
                except (RemoteObjectNotFound, ValueError):
                    self._producers = {}
        return self._producers

    def _lineage(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for s in self.finished():
            for epoch, start in s.leader_epochs:
                add_epoch(out, epoch, start)
        return out

    def copy_steps(self, seg: LogSegment) -> Iterator[str]:
        """Copy one sealed segment, yielding the name of each step once it is done."""
        with self._lock:
            next_base = self._next_base(seg)
            seg.check_indexes()
            headers: list[BatchHeader] = []
            epochs: list[tuple[int, int]] = []
            max_ts, offset_of_max = -1, -1
            for info in seg.iter_batches(0):
                h = info.header
                headers.append(h)
                if not epochs or h.partition_leader_epoch > epochs[-1][0]:
                    if h.partition_leader_epoch >= 0:
                        epochs.append((h.partition_leader_epoch, h.base_offset))
                if h.max_timestamp > max_ts:
                    max_ts = h.max_timestamp
                    raw = seg.pread(info.position, info.size)
                    offset_of_max = offset_of_first_max(raw, 0, h)
            if not headers:
                raise ValueError(f"segment {seg.base_offset} is empty")
            producers = dict(self._producer_state())
            advance_producers(producers, headers)
            lineage = self._lineage()
            for epoch, start in epochs:
                add_epoch(lineage, epoch, start)
            zm = seg.zone_map()
            zm.sync()
            last_head = seg.pread(zm.last_pos, HEADER_SIZE) if zm.last_pos >= 0 else b""
            oi, ti = seg.offset_index, seg.time_index
            index = b"".join(_OFF.pack(o - seg.base_offset, p)
                             for o, p in (oi.entry(i) for i in range(oi.entries)))
            tindex = b"".join(_TIME.pack(t, o - seg.base_offset)
                              for t, o in (ti.entry(i) for i in range(ti.entries)))
            txn_path = txnindex.path_for(seg.directory, seg.base_offset)
            txn = txn_path.read_bytes() if txn_path.exists() else b""
            size = max(seg.size, 0)
            mn = zm.min_timestamp
            rs = RemoteSegment(
                segment_id=uuid.uuid4().hex, base_offset=seg.base_offset,
                end_offset=next_base - 1, next_offset=next_base, size_bytes=size,
                max_timestamp=max_ts, offset_of_max=offset_of_max,
                min_timestamp=mn if mn <= max_ts else -1,
                state=SegmentState.COPY_SEGMENT_STARTED, leader_epochs=epochs,
                txn_index_empty=not txn, created_ms=_now_ms())
            files: list[tuple[str, bytes]] = [
                (".log", seg.pread(0, size)),
                (".index", index),
                (".timeindex", tindex),
                (".txnindex", txn),
                (".snapshot", encode_snapshot(producers)),
                (".leader_epoch_checkpoint", encode_epochs(
                    e for e in lineage if e[1] < next_base)),
                (".zonemap", zm.encode(last_head)),
            ]
            self.write_topic_manifest()
            segments = list(self.manifest.segments)
            # the manifest's start follows the log's (a DeleteRecords not persisted yet),
            # so readers of the bucket never see records below it
            start = max(self.manifest.log_start_offset, self.log.log_start_offset)
            self._write_manifest(segments + [rs], start)
            yield SegmentState.COPY_SEGMENT_STARTED.name
            for suffix, data in files:
                self._put(mf.segment_key(self.topic, self.partition, rs, suffix), data)
                self.bytes_copied += len(data)
                yield suffix
            done = msgspec.structs.replace(rs, state=SegmentState.COPY_SEGMENT_FINISHED)
            self._write_manifest(segments + [done], self.manifest.log_start_offset)
            self._producers = producers
            yield SegmentState.COPY_SEGMENT_FINISHED.name

    # -- delete (total retention, DeleteRecords) -----------------------------------------
    def expired(self, now_ms: int) -> list[RemoteSegment]:
        """Finished segments to delete, oldest first: wholly below the log start, then by
        retention.ms (max timestamp older), then by retention.bytes (the partition's
        remote size plus its local-only size above the limit), stopping at the first
        that stays."""
        cfg = self.log.config
        done = self.finished()
        start = self.log.log_start_offset
        victims: list[RemoteSegment] = []
        i = 0
        while i < len(done) and done[i].end_offset < start:
            victims.append(done[i])
            i += 1
        if cfg.retention_ms >= 0:
            while i < len(done) and now_ms - (done[i].max_timestamp if done[i].max_timestamp
                                              >= 0 else done[i].created_ms) > cfg.retention_ms:
                victims.append(done[i])
                i += 1
        if cfg.retention_bytes >= 0:
            highest = self.highest_offset
            local_only = sum(max(s.size, 0) for s in self.log.segments
                             if s.base_offset > highest)
            total = local_only + sum(s.size_bytes for s in done[i:])
            excess = total - cfg.retention_bytes
            while i < len(done) and excess - done[i].size_bytes >= 0:
                excess -= done[i].size_bytes
                victims.append(done[i])
                i += 1
        return victims

    def expire(self, now_ms: int | None = None) -> int:
        """Delete the expired segments (``expired``); returns how many went."""
        n = 0
        for step in self.expire_steps(_now_ms() if now_ms is None else now_ms):
            if step == SegmentState.DELETE_SEGMENT_FINISHED.name:
                n += 1
        return n

    def expire_steps(self, now_ms: int) -> Iterator[str]:
        for rs in self.expired(now_ms):
            yield from self.delete_steps(rs)

    def delete_steps(self, rs: RemoteSegment) -> Iterator[str]:
        """Delete one finished segment, yielding each step's name once it is done: both
        halves below in one call (a standalone tier, tests). A broker runs
        ``move_log_start_past`` on its event loop and ``delete_segment_steps`` in a
        thread."""
        self.move_log_start_past(rs)
        yield from self.delete_segment_steps(rs)

    def move_log_start_past(self, rs: RemoteSegment) -> int:
        """The first half of deleting ``rs``, on the thread that owns the log (a broker's
        event loop): the log's start moves past it (never past the log end), so no
        reader is handed an offset whose files are about to go. No store I/O. Returns
        the log start."""
        log = self.log
        new_start = min(max(log.log_start_offset, rs.next_offset), log.log_end_offset)
        if new_start > log.log_start_offset:
            log.advance_log_start_offset(new_start)
        return log.log_start_offset

    def delete_segment_steps(self, rs: RemoteSegment) -> Iterator[str]:
        """The second half (store I/O, a worker thread; the log is only read): manifest
        with ``rs`` DELETE_SEGMENT_STARTED and the log's start, its files, then a
        manifest without it. Yields each step's name once it is done."""
        with self._lock:
            segments = [msgspec.structs.replace(s, state=SegmentState.DELETE_SEGMENT_STARTED)
                        if s.segment_id == rs.segment_id else s for s in self.manifest.segments]
            self._write_manifest(segments, max(self.manifest.log_start_offset,
                                               self.log.log_start_offset))
            yield SegmentState.DELETE_SEGMENT_STARTED.name
            for suffix in mf.FILE_SUFFIXES:
                self._delete(mf.segment_key(self.topic, self.partition, rs, suffix))
                yield suffix
            self._forget(rs)
            self._write_manifest([s for s in self.manifest.segments
                                  if s.segment_id != rs.segment_id],
                                 self.manifest.log_start_offset)
            yield SegmentState.DELETE_SEGMENT_FINISHED.name

    def persist_log_start(self) -> None:
        """Write the log's start into the manifest when it moved (DeleteRecords)."""
        with self._lock:
            if self.log.log_start_offset > self.manifest.log_start_offset:
                self._write_manifest(list(self.manifest.segments), self.log.log_start_offset)

    def delete_all(self, *, topic_deleted: bool = False) -> int:
        """Delete the partition's remote data (store I/O, a worker thread; the log is not
        touched: remote.log.delete.on.disable detaches it first, see ``disable``).
        The manifest goes first, so every reader (read replicas, Spark) sees no segment
        before any file goes: rewritten empty, or, for a deleted topic
        (``topic_deleted``), deleted with the topic's topic.json after the files. Then
        every object under the partition's prefix; a crash in between leaves files no
        manifest names, which the next open deletes as orphans. Returns the objects
        deleted."""
        with self._lock:
            doomed = list(self.manifest.segments)
            manifest_key = mf.manifest_key(self.topic, self.partition)
            if topic_deleted:
                self._delete(manifest_key)
            else:
                self._write_manifest([], self.manifest.log_start_offset)
            n = 0
            for obj in self.store.list(self.prefix):
                if obj.key != manifest_key:
                    self._delete(obj.key)
                    n += 1
            for rs in doomed:
                self._forget(rs)
            self._producers = None
            if topic_deleted:
                self._delete(mf.topic_key(self.topic))
                self._topic_written = b""
            return n

    def disable(self) -> int:
        """remote.storage.enable turned off: the log stops using the tier and starts at
        its first local offset (Kafka moves the log start to the local log start: what
        was only remote is gone for readers first), then, with
        remote.log.delete.on.disable (KIP-950), the remote data is deleted
        (``delete_all``). Both halves in one call; a broker detaches on its event loop
        (``log.detach_tier()``) and runs ``delete_all`` in a thread. Returns the objects
        deleted."""
        self.log.detach_tier()
        return self.delete_all() if self.log.config.remote_log_delete_on_disable else 0

    def _delete_files(self, rs: RemoteSegment) -> int:
        for suffix in mf.FILE_SUFFIXES:
            self._delete(mf.segment_key(self.topic, self.partition, rs, suffix))
        self._forget(rs)
        return len(mf.FILE_SUFFIXES)

    def _forget(self, rs: RemoteSegment) -> None:
        with self._memo_lock:
            self._zone_maps.pop(rs.segment_id, None)
            for suffix in (".index", ".timeindex"):
                self._indexes.pop((rs.segment_id, suffix), None)
        if self.cache is not None:
            self.cache.drop(f"{rs.base_offset}_{rs.segment_id}")
        if self.chunks is not None:
            self.chunks.drop(f"{rs.base_offset}_{rs.segment_id}.")
        for key in [k for k in list(self._summaries) if k[0] == rs.segment_id]:
            gone = self._summaries.pop(key, None)
            if gone is not None:
                charge_summary_blocks(-gone.blocks)

    # -- fetched indexes -------------------------------------------------------------
    def _index(self, rs: RemoteSegment, suffix: str) -> _Index:
        """The segment's offset index as (offset, position) or time index as
        (timestamp, offset), absolute offsets; fetched once, then from memory (and the
        on-disk cache across restarts)."""
        key = (rs.segment_id, suffix)
        with self._memo_lock:
            known = self._indexes.get(key)
            if known is not None:
                self._indexes.move_to_end(key)
                return known
        require_store()
        obj = mf.segment_key(self.topic, self.partition, rs, suffix)
        width = 8 if suffix == ".index" else 12

        def valid(data: bytes) -> bool:
            return _index_valid(data, suffix, rs)

        try:
            if self.cache is not None:
                data = self.cache.get(self.store, obj,
                                      f"{rs.base_offset}_{rs.segment_id}{suffix}", valid)
            else:
                data = self.store.get(obj)
                if not valid(data):
                    raise RemoteStorageError(f"remote index {obj!r} is corrupt")
        except RemoteStorageError as exc:
            # The bucket's copy is damaged or gone: rebuild it from the .log's headers
            # (as Kafka rebuilds a local index), for this process only.
            log_line = f"{exc}; rebuilding it from the remote .log"
            _LOG.warning(log_line)
            return self._remember(self._indexes, key, _Index(self._rebuild_index(rs, suffix)))
        out = []
        for at in range(0, len(data), width):
            if width == 8:
                rel, pos = _OFF.unpack_from(data, at)
                out.append((rs.base_offset + rel, pos))
            else:
                ts, rel = _TIME.unpack_from(data, at)
                out.append((ts, rs.base_offset + rel))
        return self._remember(self._indexes, key, _Index(out))

    def _rebuild_index(self, rs: RemoteSegment, suffix: str) -> list[tuple[int, int]]:
        """Index entries from a walk of the remote .log: an offset entry per batch
        (exact, denser than Kafka's), a time entry per batch that raises the running max."""
        out: list[tuple[int, int]] = []
        obj = mf.segment_key(self.topic, self.partition, rs, ".log")
        buf = self.store.get_range(obj, 0, rs.size_bytes)
        running = -1
        for pos, h in iter_batches(buf):
            if suffix == ".index":
                out.append((h.last_offset, pos))
            elif h.max_timestamp > running:
                running = h.max_timestamp
                out.append((running, h.last_offset))
        return out

    def zone_map(self, rs: RemoteSegment) -> ZoneMap:
        with self._memo_lock:
            zm = self._zone_maps.get(rs.segment_id)
            if zm is not None:
                self._zone_maps.move_to_end(rs.segment_id)
        if zm is None:
            obj = mf.segment_key(self.topic, self.partition, rs, ".zonemap")
            interval = self.log.config.index_interval_bytes

            def valid(data: bytes) -> bool:
                ivl = _zone_interval(data)
                return ivl is not None and ZoneMap.decode(data, rs.base_offset, ivl) is not None

            try:
                data = (self.cache.get(self.store, obj,
                                       f"{rs.base_offset}_{rs.segment_id}.zonemap", valid)
                        if self.cache is not None else self.store.get(obj))
                ivl = _zone_interval(data)
                zm = ZoneMap.decode(data, rs.base_offset, ivl if ivl is not None else interval)
                if zm is None:
                    raise RemoteStorageError(f"remote zone map {obj!r} is corrupt")
            except RemoteStorageError as exc:
                # Damaged or gone in the bucket: rebuilt from the remote .log (as a local
                # segment rebuilds its sidecar), for this process only.
                _LOG.warning("%s; rebuilding it from the remote .log", exc)
                zm = self._rebuild_zone_map(rs, interval)
            self._remember(self._zone_maps, rs.segment_id, zm)
        return zm

    def _rebuild_zone_map(self, rs: RemoteSegment, interval: int) -> ZoneMap:
        """A segment's zone map from a walk of its remote .log, disorder counted against
        the largest timestamp of the finished segments before it."""
        running = NO_MAX
        for s in self.finished():
            if s.base_offset >= rs.base_offset:
                break
            if s.max_timestamp >= 0:
                running = max(running, s.max_timestamp)
        zm = ZoneMap(rs.base_offset, interval, running)
        obj = mf.segment_key(self.topic, self.partition, rs, ".log")
        buf = self.store.get_range(obj, 0, rs.size_bytes)
        self.bytes_fetched += len(buf)
        for pos, h in iter_batches(buf):
            running = zone_add_batch(zm, buf, pos, pos, h, running)
        zm.sync()
        return zm

    def _remember(self, memo: OrderedDict[Any, Any], key: Any, value: Any) -> Any:
        with self._memo_lock:
            memo[key] = value
            memo.move_to_end(key)
            while len(memo) > MEMORY_ENTRIES:
                memo.popitem(last=False)
        return value

    # -- reads -------------------------------------------------------------------------
    def _segment_for(self, offset: int) -> RemoteSegment | None:
        view = self._readable_view()
        i = bisect_right(view.ends, offset - 1)
        return view.segments[i] if i < len(view.segments) else None

    def _log_range(self, rs: RemoteSegment, start: int, end: int) -> bytes | memoryview:
        """Bytes [start, end) of the segment's .log: through the chunk cache when there
        is one (storage/remote/chunk_cache.py; a view of a cached chunk), else one
        ranged GET."""
        obj = mf.segment_key(self.topic, self.partition, rs, ".log")
        buf: bytes | memoryview
        if self.chunks is None:
            require_store()
            buf = self.store.get_range(obj, start, end)
            fetched = len(buf)
        else:
            buf, fetched = self.chunks.read(self.store, obj, f"{rs.base_offset}_{rs.segment_id}"
                                            ".log", rs.size_bytes, start, end)
        self.bytes_fetched += fetched
        return buf

    def _walk(self, rs: RemoteSegment, position: int, first_read: int = _FIRST_READ
              ) -> Iterator[tuple[bytes | memoryview, int, BatchHeader]]:
        """(buffer, position in buffer, header) of each whole batch from ``position``,
        read in pieces (``_log_range``) that start at ``first_read`` bytes and double up
        to ``_READ_CHUNK``."""
        pos = position
        chunk = first_read  # a lookup usually needs a batch or two: start small, then double
        while pos < rs.size_bytes:
            buf = self._log_range(rs, pos, min(rs.size_bytes, pos + chunk))
            chunk = min(chunk * 2, _READ_CHUNK)
            at = 0
            for p, h in iter_batches(buf):
                at = p + h.size
                yield buf, p, h
            if at == 0:  # a batch larger than the chunk: fetch it whole
                head = buf[:HEADER_SIZE]
                size = struct.unpack_from(">i", head, 8)[0] + LOG_OVERHEAD
                buf = self._log_range(rs, pos, pos + size)
                for p, h in iter_batches(buf):
                    yield buf, p, h
                at = size
            pos += at

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding ``offset`` (at least one, then as many as
        fit in ``max_bytes``), from one remote segment, none at or past ``max_offset``."""
        rs = self._segment_for(offset)
        if rs is None or offset < self.log.log_start_offset:
            raise OffsetOutOfRangeError(f"offset {offset} is not in remote storage")
        limit = rs.next_offset if max_offset is None else min(max_offset, rs.next_offset)
        if offset >= limit:
            return b""
        pos = self._index(rs, ".index").floor(offset, 0)
        out = bytearray()
        for buf, p, h in self._walk(rs, pos, max(_FIRST_READ, min(max_bytes, _READ_CHUNK))):
            if h.last_offset < offset:
                continue
            if h.base_offset >= limit or (out and len(out) + h.size > max_bytes):
                break
            out += buf[p:p + h.size]
            if len(out) >= max_bytes:
                break
        return bytes(out)

    def offset_for_timestamp(self, target: int) -> TimestampHit | None:
        """Kafka's remote lookup: the first readable segment whose max timestamp >=
        target, its time-index floor entry, the offset index, a ranged read and the
        in-batch search; None when no remote record qualifies (search locally)."""
        start = self.log.log_start_offset
        view = self._readable_view()
        for rs in view.segments[bisect_left(view.prefix_max, target):]:
            if rs.max_timestamp < target:
                continue
            entry = self._index(rs, ".timeindex").floor(target, rs.base_offset)
            pos = self._index(rs, ".index").floor(max(start, entry), 0)
            for buf, p, h in self._walk(rs, pos):
                if h.max_timestamp < target or h.last_offset < start:
                    continue
                hit = self._search(rs, buf, p, h, target, start)
                if hit is not None:
                    return TimestampHit(hit[0], hit[1], h.partition_leader_epoch)
        return None

    def _search(self, rs: RemoteSegment, buf: bytes | memoryview, p: int, h: BatchHeader,
                target: int, start: int) -> tuple[int, int] | None:
        """The in-batch search through the batch's block summary, as LogSegment searches
        locally (a 1 MB batch then costs one block). Built at the first search, not the
        second as locally: a remote batch searched once is likely searched again (its
        chunk is cached for that), and no background task summarises remote batches."""
        if (h.base_offset < start or h.records_count < SUMMARY_MIN_RECORDS
                or h.attributes & (COMPRESSION_MASK | TIMESTAMP_TYPE_MASK)):
            return first_record_at_or_after(buf, p, h, target, start)
        key = (rs.segment_id, h.base_offset)
        summary = self._summaries.get(key)
        if summary is None:
            if not summary_fits(h.records_count):
                return first_record_at_or_after(buf, p, h, target, start)
            built = build_summary(buf, p, h)
            summary = self._summaries.setdefault(key, built)
            if summary is built:
                charge_summary_blocks(built.blocks)
        b = summary_block(summary, target)
        return None if b < 0 else search_block(buf, p, h, summary, b, target)

    def max_timestamp_hit(self) -> TimestampHit | None:
        """The first record carrying the largest timestamp among readable segments."""
        best = None
        for rs in self.readable():
            if rs.max_timestamp >= 0 and (best is None or rs.max_timestamp > best.max_timestamp):
                best = rs
        if best is None:
            return None
        return TimestampHit(best.max_timestamp, best.offset_of_max,
                            self.epoch_at(best.offset_of_max))

    def epoch_at(self, offset: int) -> int:
        """The leader epoch of the batch holding ``offset`` per the segments' epochs."""
        epoch = -1
        for s in self.finished():
            for e, start in s.leader_epochs:
                if start <= offset:
                    epoch = e
        return epoch

    def count_time_windows(self, bounds: Any, start: int, end: int,
                           aborted: Sequence[TxnIndexEntry]) -> Any:
        """Cumulative counts (``tsindex.count_columns``: per bound, the records below it)
        of the data records in [start, end) of the readable segments, decoded from
        ranged reads of their .log from the offset index entry at or below ``start``."""
        import numpy as np

        from storage.columnar import decode_timestamps
        from storage.tsindex import count_columns

        cum = np.zeros(len(bounds), dtype=np.int64)
        for rs in self.readable():
            if rs.next_offset <= start or rs.base_offset >= end:
                continue
            pos = self._index(rs, ".index").floor(start, 0)
            obj = mf.segment_key(self.topic, self.partition, rs, ".log")
            buf = self._log_range(rs, pos, rs.size_bytes)
            cum += count_columns(decode_timestamps(buf, obj), bounds, start, end, aborted)
        return cum

    def zone_maps(self) -> list[ZoneMap]:
        """The readable segments' zone maps, oldest first."""
        return [self.zone_map(rs) for rs in self.readable()]


def _zone_interval(data: bytes) -> int | None:
    """The index interval a zone-map sidecar was built with (its header), if intact."""
    if len(data) < 22:
        return None
    try:
        magic, _v, _base, ivl = struct.unpack_from("<4sHqq", data, 0)
    except struct.error:
        return None
    return ivl if magic == b"CLZM" else None


def _index_valid(data: bytes, suffix: str, rs: RemoteSegment) -> bool:
    """Kafka's index sanity checks: whole entries, offsets within the segment, ascending."""
    width = 8 if suffix == ".index" else 12
    if len(data) % width:
        return False
    prev_key = -(1 << 63)
    for at in range(0, len(data), width):
        if width == 8:
            rel, pos = _OFF.unpack_from(data, at)
            key = rel
            if pos < 0 or pos >= max(rs.size_bytes, 1):
                return False
        else:
            key, rel = _TIME.unpack_from(data, at)
        if rel < 0 or rs.base_offset + rel > rs.end_offset or key < prev_key:
            return False
        prev_key = key
    return True
