"""Committed consumer-group offsets, durable in the data directory.

Kafka keeps these in the compacted ``__consumer_offsets`` topic; Chronolog keeps the
same facts — per (group, topic, partition): offset, leader epoch, metadata string,
commit time — in one append-only file, ``consumer-offsets.log``, with one JSON line
per OffsetCommit request.

There is no group membership protocol yet (JoinGroup/SyncGroup/Heartbeat are a later
issue), so every group is what Kafka calls a "simple" group: it has no members and its
generation is -1. The commit rules follow Kafka's coordinator for such groups
(``OffsetMetadataManager.validateOffsetCommit``): a commit with generation < 0 is
accepted whatever the member id; a commit with generation >= 0 claims a membership
that cannot exist, so it gets UNKNOWN_MEMBER_ID (25) if the group is known and
ILLEGAL_GENERATION (22) if it is not.

Invariants:
- ``commit``/``commit_async`` return only after the line is written and fsynced (the
  async form fsyncs in a worker thread, one commit at a time, so the event loop never
  waits on the disk), so an acknowledged commit survives a crash; a line is one whole
  request, so a request is all-or-nothing (a torn last line is dropped and cut off
  when the file is opened). Readers see a commit once it is durable.
- The file is compacted (rewritten to the live entries, then atomically renamed over
  the old one) when it holds more than twice as many entries as are live, so its size
  stays proportional to the number of live offsets.
- Offsets older than ``offsets.retention.minutes`` (7 days) since their last commit
  expire, as they do for Kafka's empty groups; expiry runs at open and at compaction.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from storage.fsutil import fsync_dir

OFFSETS_FILE = "consumer-offsets.log"
DEFAULT_OFFSETS_RETENTION_MS = 7 * 24 * 3_600_000
DEFAULT_OFFSET_METADATA_MAX_BYTES = 4096
COMPACT_MIN_ENTRIES = 1000


class CommittedOffset(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


Key = tuple[str, str, int]  # (group, topic, partition)


class GroupOffsetStore:
    """Every group's committed offsets for one data directory."""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        offsets_retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS,
        now_ms: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.data_dir / OFFSETS_FILE
        self.offsets_retention_ms = offsets_retention_ms
        self._offsets: dict[Key, CommittedOffset] = {}
        self._by_group: dict[str, set[tuple[str, int]]] = {}
        self._entries_in_file = 0
        self._lock: asyncio.Lock | None = None
        self._io_lock = threading.Lock()
        self._in_flight: list[tuple[str, list[tuple[str, int, CommittedOffset]]]] = []
        self._load()
        self.expire(now_ms if now_ms is not None else _now_ms())
        self._file = open(self.path, "ab")

    # ---- reads -------------------------------------------------------------------

    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._offsets.get((group, topic, partition))

    def fetch_group(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        """All of a group's committed offsets, for OffsetFetch with null topics."""
        return {
            tp: self._offsets[(group, tp[0], tp[1])] for tp in sorted(self._by_group.get(group, ()))
        }

    def has_group(self, group: str) -> bool:
        return bool(self._by_group.get(group))

    def groups(self) -> list[str]:
        return sorted(g for g, tps in self._by_group.items() if tps)

    # ---- writes ------------------------------------------------------------------

    def commit(
        self, group: str, offsets: Iterable[tuple[str, int, CommittedOffset]]
    ) -> None:
        """Durably store one request's offsets, all or nothing (blocks for the fsync)."""
        items = list(offsets)
        if items:
            self._append_durably(self._encode(group, items))
            self._apply(group, items)

    async def commit_async(
        self, group: str, offsets: Iterable[tuple[str, int, CommittedOffset]]
    ) -> None:
        """``commit`` with the write and fsync in a worker thread, so a slow disk stalls
        only this request, not the event loop; commits are applied in arrival order."""
        items = list(offsets)
        if not items:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        line = self._encode(group, items)
        async with self._lock:
            # Written but not yet applied: a compaction meanwhile must keep these too.
            pending = (group, items)
            self._in_flight.append(pending)
            try:
                await asyncio.to_thread(self._append_durably, line)
            finally:
                self._in_flight.remove(pending)
            self._apply(group, items)

    def _encode(self, group: str, items: list[tuple[str, int, CommittedOffset]]) -> bytes:
        return self._encode_rows(group, [[t, p, *o] for t, p, o in items])

    @staticmethod
    def _encode_rows(group: str, rows: Sequence[Sequence[object]]) -> bytes:
        return json.dumps({"g": group, "c": rows}, separators=(",", ":")).encode() + b"\n"

    def _append_durably(self, line: bytes) -> None:
        with self._io_lock:
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())

    def _apply(self, group: str, items: list[tuple[str, int, CommittedOffset]]) -> None:
        for topic, partition, off in items:
            self._put(group, topic, partition, off)
        self._entries_in_file += len(items)
        self._maybe_compact()

    def delete_topic(self, topic: str) -> None:
        """Forget every group's offsets of a deleted topic (Kafka removes them too)."""
        doomed = [k for k in self._offsets if k[1] == topic]
        if not doomed:
            return
        for k in doomed:
            self._drop(k)
        self.compact()

    def expire(self, now_ms: int) -> int:
        """Drop offsets not committed within offsets.retention.minutes; returns how many."""
        if self.offsets_retention_ms < 0:
            return 0
        stale = [
            k for k, v in self._offsets.items()
            if now_ms - v.commit_timestamp_ms > self.offsets_retention_ms
        ]
        for k in stale:
            self._drop(k)
        if stale:
            self.compact()
        return len(stale)

    def compact(self) -> None:
        """Rewrite the file to the live entries, one line per group, atomically.

        Runs on the event loop; it waits for a worker-thread write in progress (the IO
        lock) and keeps commits that are written but not yet applied (``_in_flight``),
        so no durable commit is dropped from the file.
        """
        with self._io_lock:
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "wb") as f:
                for group in sorted(self._by_group):
                    items = [[t, p, *self._offsets[(group, t, p)]]
                             for t, p in sorted(self._by_group[group])]
                    if items:
                        f.write(self._encode_rows(group, items))
                for group, pending in self._in_flight:
                    f.write(self._encode(group, pending))
                f.flush()
                os.fsync(f.fileno())
            old = getattr(self, "_file", None)
            os.replace(tmp, self.path)
            fsync_dir(self.data_dir)
            if old is not None:
                old.close()
                self._file = open(self.path, "ab")
            self._entries_in_file = len(self._offsets) + sum(len(i) for _, i in self._in_flight)

    def close(self) -> None:
        self._file.close()

    # ---- internals ---------------------------------------------------------------

    def _put(self, group: str, topic: str, partition: int, off: CommittedOffset) -> None:
        self._offsets[(group, topic, partition)] = off
        self._by_group.setdefault(group, set()).add((topic, partition))

    def _drop(self, key: Key) -> None:
        self._offsets.pop(key, None)
        tps = self._by_group.get(key[0])
        if tps is not None:
            tps.discard((key[1], key[2]))
            if not tps:
                del self._by_group[key[0]]

    def _maybe_compact(self) -> None:
        if self._entries_in_file > max(COMPACT_MIN_ENTRIES, 2 * len(self._offsets)):
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
                break  # torn last line: the commit was never acknowledged
            try:
                doc = json.loads(data[pos:nl])
                group = str(doc["g"])
                parsed = [
                    (str(t), int(p), CommittedOffset(int(o), int(e), m, int(ts)))
                    for t, p, o, e, m, ts in doc["c"]
                ]
            except (ValueError, KeyError, TypeError):
                break  # a garbled line can only be the torn tail of a crash
            for topic, partition, off in parsed:
                self._put(group, topic, partition, off)
            self._entries_in_file += len(parsed)
            pos = nl + 1
            good = pos
        if good < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())


_STORES: dict[Path, GroupOffsetStore] = {}


def store_for(data_dir: Path | str, *, offsets_retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS) -> GroupOffsetStore:
    """The process's one store for a data directory, opened on first use."""
    key = Path(data_dir).resolve()
    store = _STORES.get(key)
    if store is None:
        store = GroupOffsetStore(key, offsets_retention_ms=offsets_retention_ms)
        _STORES[key] = store
    return store


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
