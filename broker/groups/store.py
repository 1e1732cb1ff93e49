"""Durable group state: committed offsets and group metadata, in one append-only file.

Kafka keeps these facts in the compacted ``__consumer_offsets`` topic (offset
commit keys, group metadata keys, tombstones). Chronolog keeps the same facts in
``__chronolog/consumer-offsets.log``, one JSON line per change:

- ``{"g": group, "c": [[topic, partition, offset, leader_epoch, metadata, commit_ts], ...]}``
  one OffsetCommit request's accepted offsets (the format of earlier Chronolog
  versions, which this module reads unchanged);
- ``{"g": group, "m": record}`` a group's metadata snapshot (``Group.to_record()``,
  keyed by its ``"type"``), replacing the previous one;
- ``{"g": group, "m": null}`` a group tombstone: the group and all its offsets are gone
  (DeleteGroups, expiry);
- ``{"g": group, "d": [[topic, partition], ...]}`` offsets deleted (OffsetDelete, expiry).

Why a file and not a ``__consumer_offsets`` topic: one node, one coordinator and no
client ever reads the topic, so the topic's only job would be durability and
compaction, which a line-per-change file gives with less machinery and no record
batch framing on the commit path. The store is the coordinator's, not a topic's:
it never appears in Metadata.

Invariants:
- A change is applied to memory (visible to readers) only once its line is written
  and fsynced, and its awaitable resolves only then: an acknowledged OffsetCommit or
  SyncGroup survives ``kill -9``. Lines are written by one writer thread that takes
  every line queued while the previous fsync ran and writes them with one fsync
  (group commit), so the event loop never waits on the disk and N concurrent
  commits cost about one fsync. Changes are applied in submission order.
- A line is one whole change; a torn or garbled last line (a crash mid-write) is
  dropped and cut off when the file is opened. A failed write is cut off too, so
  later lines are never hidden behind garbage.
- Compaction rewrites the file to the live state (plus every change submitted but
  not yet applied), then atomically renames it over the old one; it is queued in
  order with the appends, so nothing durable is lost. It runs when the file holds
  more than twice as many entries as are live.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from storage.fsutil import fsync_dir

log = logging.getLogger("chronolog.broker")

OFFSETS_FILE = "consumer-offsets.log"
COMPACT_MIN_ENTRIES = 1000


class CommittedOffset(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


Key = tuple[str, str, int]  # (group, topic, partition)
TopicPartition = tuple[str, int]


class _Rewrite(NamedTuple):
    """A compaction job in the writer's queue: the whole new file."""

    data: bytes


class _Job:
    __slots__ = ("payload", "apply", "future", "error")

    def __init__(self, payload: bytes | _Rewrite, apply: Callable[[], None] | None,
                 future: asyncio.Future[None] | None) -> None:
        self.payload = payload
        self.apply = apply
        self.future = future
        self.error: BaseException | None = None


class GroupStore:
    """Every group's committed offsets and metadata for one data directory."""

    def __init__(self, data_dir: Path | str) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.data_dir / OFFSETS_FILE
        self._offsets: dict[Key, CommittedOffset] = {}
        self._by_group: dict[str, set[TopicPartition]] = {}
        self._records: dict[str, dict[str, Any]] = {}
        self._entries_in_file = 0
        self._load()
        self._file = open(self.path, "ab")
        # Writer thread state (created on the first async write).
        self._cond = threading.Condition()
        self._queue: list[_Job] = []
        self._thread: threading.Thread | None = None
        self._stop = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Jobs submitted, in order, not yet applied (the loop thread's view).
        self._unapplied: deque[_Job] = deque()
        self.syncs = 0  # fdatasyncs done: with group commit, fewer than changes written

    # ---- reads -------------------------------------------------------------------

    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._offsets.get((group, topic, partition))

    def fetch_group(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        """All of a group's committed offsets, for OffsetFetch with null topics."""
        return {
            tp: self._offsets[(group, tp[0], tp[1])] for tp in sorted(self._by_group.get(group, ()))
        }

    def has_group(self, group: str) -> bool:
        """Whether the group has committed offsets."""
        return bool(self._by_group.get(group))

    def groups(self) -> list[str]:
        """Groups with committed offsets."""
        return sorted(g for g, tps in self._by_group.items() if tps)

    def has_record(self, group: str) -> bool:
        """Whether the group has a metadata snapshot."""
        return group in self._records

    def group_records(self) -> dict[str, dict[str, Any]]:
        """The latest metadata snapshot of every group that has one (loaded at open)."""
        return dict(self._records)

    # ---- writes (async: durable before they resolve) -------------------------------

    async def commit_async(self, group: str, offsets: Iterable[tuple[str, int, CommittedOffset]]) -> None:
        """Durably store one request's offsets, all or nothing."""
        items = list(offsets)
        if items:
            await self._submit(self._encode_commit(group, items), lambda: self._apply_commit(group, items))

    async def write_group(self, group: str, record: dict[str, Any] | None) -> None:
        """Durably replace a group's metadata snapshot; ``None`` deletes the group and its offsets."""
        line = _line({"g": group, "m": record})
        await self._submit(line, lambda: self._apply_record(group, record))

    async def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """Durably forget some of a group's committed offsets."""
        tps = [tp for tp in partitions if (group, tp[0], tp[1]) in self._offsets]
        if tps:
            line = _line({"g": group, "d": [[t, p] for t, p in tps]})
            await self._submit(line, lambda: self._apply_delete(group, tps))

    # ---- writes (blocking; for tools and tests without an event loop) -------------

    def commit(self, group: str, offsets: Iterable[tuple[str, int, CommittedOffset]]) -> None:
        """``commit_async`` that blocks for the fsync (no async write may be in flight)."""
        items = list(offsets)
        if items:
            self._write_now(self._encode_commit(group, items))
            self._apply_commit(group, items)
            self._maybe_compact()

    def delete_topic(self, topic: str) -> None:
        """Forget every group's offsets of a deleted topic (Kafka removes them too).

        Applied at once and made durable by a compaction queued behind the writes in
        flight (or done now when there is no event loop)."""
        doomed = [k for k in self._offsets if k[1] == topic]
        if not doomed:
            return
        for k in doomed:
            self._drop(k)
        self.compact()

    def compact(self) -> None:
        """Rewrite the file to the live state, atomically, in order with queued writes."""
        parts: list[bytes] = []
        for group in sorted(self._records):
            parts.append(_line({"g": group, "m": self._records[group]}))
        for group in sorted(self._by_group):
            rows = [[t, p, *self._offsets[(group, t, p)]] for t, p in sorted(self._by_group[group])]
            if rows:
                parts.append(_encode_rows(group, rows))
        for job in self._unapplied:
            if isinstance(job.payload, bytes):
                parts.append(job.payload)
        data = b"".join(parts)
        entries = len(self._offsets) + len(self._records) + len(self._unapplied)
        if self._thread is None:
            self._rewrite(data)
        else:
            job = _Job(_Rewrite(data), None, None)
            self._unapplied.append(job)
            self._enqueue(job)
        self._entries_in_file = entries

    def close(self) -> None:
        """Stop the writer (after the queued writes) and close the file."""
        thread = self._thread
        if thread is not None:
            with self._cond:
                self._stop = True
                self._cond.notify()
            thread.join()
            self._thread = None
        self._file.close()

    # ---- the writer ----------------------------------------------------------------

    def _submit(self, line: bytes, apply: Callable[[], None]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        if self._thread is None:
            self._loop = loop
            self._thread = threading.Thread(target=self._run, name="group-store", daemon=True)
            self._thread.start()
        fut: asyncio.Future[None] = loop.create_future()
        job = _Job(line, apply, fut)
        self._unapplied.append(job)
        self._enqueue(job)
        return fut

    def _enqueue(self, job: _Job) -> None:
        with self._cond:
            self._queue.append(job)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if not self._queue and self._stop:
                    return
                batch, self._queue = self._queue, []
            self._write_batch(batch)
            loop = self._loop
            if loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self._completed, len(batch))
                except RuntimeError:  # the loop closed meanwhile
                    return

    def _write_batch(self, batch: list[_Job]) -> None:
        """Write runs of lines with one fsync each; rewrites in their place in the order."""
        run: list[_Job] = []
        for job in batch:
            if isinstance(job.payload, _Rewrite):
                self._flush_run(run)
                run = []
                try:
                    self._rewrite(job.payload.data)
                except OSError as exc:
                    log.error("group store compaction failed: %s", exc)
            else:
                run.append(job)
        self._flush_run(run)

    def _flush_run(self, run: list[_Job]) -> None:
        if not run:
            return
        data = b"".join(job.payload for job in run if isinstance(job.payload, bytes))
        try:
            self._write_now(data)
        except OSError as exc:
            for job in run:
                job.error = exc

    def _write_now(self, data: bytes) -> None:
        f = self._file
        start = f.tell()
        try:
            f.write(data)
            f.flush()
            os.fdatasync(f.fileno())
            self.syncs += 1
        except OSError:
            try:  # never leave a half-written line in front of later ones
                f.seek(start)
                f.truncate(start)
            except OSError:
                pass
            raise

    def _rewrite(self, data: bytes) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.data_dir)
        old = self._file
        self._file = open(self.path, "ab")
        old.close()

    def _completed(self, n: int) -> None:
        """On the loop: apply the next ``n`` written jobs in order and wake their waiters."""
        for _ in range(n):
            job = self._unapplied.popleft()
            fut = job.future
            if job.error is not None:
                if fut is not None and not fut.done():
                    fut.set_exception(job.error)
                continue
            if job.apply is not None:
                job.apply()
            if fut is not None and not fut.done():
                fut.set_result(None)
        self._maybe_compact()

    # ---- applying changes ------------------------------------------------------------

    def _encode_commit(self, group: str, items: list[tuple[str, int, CommittedOffset]]) -> bytes:
        return _encode_rows(group, [[t, p, *o] for t, p, o in items])

    def _apply_commit(self, group: str, items: Sequence[tuple[str, int, CommittedOffset]]) -> None:
        for topic, partition, off in items:
            self._offsets[(group, topic, partition)] = off
            self._by_group.setdefault(group, set()).add((topic, partition))
        self._entries_in_file += len(items)

    def _apply_record(self, group: str, record: dict[str, Any] | None) -> None:
        if record is None:
            self._records.pop(group, None)
            for t, p in list(self._by_group.get(group, ())):
                self._drop((group, t, p))
        else:
            self._records[group] = record
        self._entries_in_file += 1

    def _apply_delete(self, group: str, tps: Iterable[TopicPartition]) -> None:
        for t, p in tps:
            self._drop((group, t, p))
        self._entries_in_file += 1

    def _drop(self, key: Key) -> None:
        self._offsets.pop(key, None)
        tps = self._by_group.get(key[0])
        if tps is not None:
            tps.discard((key[1], key[2]))
            if not tps:
                del self._by_group[key[0]]

    def _maybe_compact(self) -> None:
        live = len(self._offsets) + len(self._records)
        if self._entries_in_file > max(COMPACT_MIN_ENTRIES, 2 * live):
            self.compact()

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        good = 0
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                break  # torn last line: the change was never acknowledged
            try:
                self._replay(json.loads(data[pos:nl]))
            except (ValueError, KeyError, TypeError):
                break  # a garbled line can only be the torn tail of a crash
            pos = nl + 1
            good = pos
        if good < len(data):
            log.warning("group store %s: dropping %d bytes of a torn last write", self.path,
                        len(data) - good)
            with open(self.path, "r+b") as f:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())

    def _replay(self, doc: dict[str, Any]) -> None:
        group = str(doc["g"])
        if "c" in doc:
            parsed = [
                (str(t), int(p), CommittedOffset(int(o), int(e), m, int(ts)))
                for t, p, o, e, m, ts in doc["c"]
            ]
            self._apply_commit(group, parsed)
        elif "m" in doc:
            record = doc["m"]
            if record is not None and not isinstance(record, dict):
                raise TypeError("group record is not an object")
            self._apply_record(group, record)
        elif "d" in doc:
            self._apply_delete(group, [(str(t), int(p)) for t, p in doc["d"]])
        else:
            raise KeyError("unknown group store line")


def _line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def _encode_rows(group: str, rows: Sequence[Sequence[object]]) -> bytes:
    return _line({"g": group, "c": rows})


_STORES: dict[Path, GroupStore] = {}


def store_for(data_dir: Path | str) -> GroupStore:
    """The process's one store for a data directory, opened on first use."""
    key = Path(data_dir).resolve()
    store = _STORES.get(key)
    if store is None:
        store = GroupStore(key)
        _STORES[key] = store
    return store


def forget_store(data_dir: Path | str) -> None:
    """Close and drop the process's store of a data directory (broker shutdown)."""
    store = _STORES.pop(Path(data_dir).resolve(), None)
    if store is not None:
        store.close()
