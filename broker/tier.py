"""The remote-log-manager task (KIP-405's RemoteLogManager): copies sealed segments of
tiered topics to the object store and applies local and remote retention.

Invariants:
- Everything that touches the object store (copying a segment's files, writing a
  manifest, deleting remote segments, reading remote data) runs in this module's
  thread pool, never on the event loop; the event loop only picks the work (a
  snapshot of which sealed segments are eligible) and applies its outcome to the log.
- Only partitions of topics with ``remote.storage.enable=true`` and
  ``remote.log.copy.disable=false`` are copied, and only segments wholly below the
  partition's last stable offset (storage picks them; the bound is passed in), one
  partition at a time per pass, oldest segment first.
- A failure of the store (``RemoteStorageError``) is logged with its reason and the
  partition is retried after a backoff that starts at
  ``remote.log.manager.task.retry.backoff.ms``, doubles per consecutive failure up to
  ``remote.log.manager.task.retry.backoff.max.ms``, with
  ``remote.log.manager.task.retry.jitter`` random spread. Local data is never deleted
  because of it: local retention removes only segments already copied (the log
  enforces that); this task deletes local segments only below a log start that total
  retention (``retention.ms`` / ``.bytes`` over remote plus local) moved.
- A tiered partition whose tier could not be attached (the store was down) and whose
  local log does not start at 0 is ``unavailable``: reads answer KAFKA_STORAGE_ERROR
  until a retry attaches it, never a log start at the first local segment.
- A deleted topic, or one turned off with ``remote.log.delete.on.disable=true``, loses
  its remote data: manifest first (readers see nothing), then the objects.
- Counters (bytes copied, bytes fetched from the tier, copy failures, index cache
  hits) are plain ints read by ``broker.metrics`` at scrape time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from storage.remote.chunk_cache import DIR_NAME as CHUNK_CACHE_DIR
from storage.remote.chunk_cache import RemoteChunkCache
from storage.remote.index_cache import DIR_NAME as INDEX_CACHE_DIR
from storage.remote.index_cache import RemoteIndexCache
from storage.remote.store import ObjectStore, RemoteStorageError, open_store
from storage.remote.tier import RemoteTier

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.partitions import PartitionManager
    from storage.log import Log

T = TypeVar("T")

log = logging.getLogger("chronolog.tier")

Key = tuple[str, int]


def tiered(configs: dict[str, str]) -> bool:
    """Whether a topic's (override) configs turn the remote tier on."""
    return configs.get("remote.storage.enable", "false").strip().lower() == "true"


def copy_disabled(configs: dict[str, str]) -> bool:
    return _flag(configs, "remote.log.copy.disable")


def _flag(configs: dict[str, str], name: str) -> bool:
    return configs.get(name, "false").strip().lower() == "true"


@dataclass
class Backoff:
    """Per-partition retry state after failures of the store."""

    failures: int = 0
    not_before: float = 0.0  # time.monotonic() before which the partition is skipped
    last_error: str = ""

    def wait_s(self, base_ms: int, max_ms: int, jitter: float, rng: random.Random) -> float:
        ms = min(base_ms * (2 ** max(self.failures - 1, 0)), max_ms)
        spread = ms * jitter
        return max(0.0, ms + rng.uniform(-spread, spread)) / 1000.0


@dataclass
class TierCounters:
    """What broker/metrics.py exports (``chronolog_remote_*``)."""

    bytes_copied: int = 0
    segments_copied: int = 0
    copy_failures: int = 0
    bytes_fetched: int = 0
    remote_fetches: int = 0
    remote_lookups: int = 0
    segments_deleted: int = 0
    per_partition_failures: dict[Key, int] = field(default_factory=dict)


class RemoteLogManager:
    """One broker's remote-log-manager task and the thread pool remote I/O runs in."""

    def __init__(self, partitions: PartitionManager, config: BrokerConfig) -> None:
        self.partitions = partitions
        self.config = config
        self.counters = TierCounters()
        self.backoff: dict[Key, Backoff] = {}
        self.store: ObjectStore | None = None
        self.tiers: dict[Key, RemoteTier] = {}
        self.cache: RemoteIndexCache | None = None
        self.chunks: RemoteChunkCache | None = None
        # remote.log.manager.thread.pool.size's default is 10; on this small broker the
        # copy runs one partition at a time and readers share the same pool.
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="chronolog-tier")
        self._rng = random.Random()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.passes = 0

    # ------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open the store (in a thread: an S3 client may resolve names)."""
        loop = asyncio.get_running_loop()
        self.store = await loop.run_in_executor(self.executor, open_store, self.config.rsm_options)
        self.cache = RemoteIndexCache(Path(self.config.log_dirs) / INDEX_CACHE_DIR,
                                      self.config.remote_log_index_file_cache_total_size_bytes)
        self.chunks = self.open_chunk_cache()
        await self.attach_all()
        log.info("remote tier on: %s (task every %d ms)", self.config.remote_url,
                 self.config.remote_log_manager_task_interval_ms)

    def open_chunk_cache(self) -> RemoteChunkCache:
        """The local-disk cache of remote .log chunks (storage/remote/chunk_cache.py)."""
        return RemoteChunkCache(Path(self.config.log_dirs) / CHUNK_CACHE_DIR,
                                self.config.remote_log_chunk_cache_total_size_bytes)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = loop.create_task(self._run(), name="remote-log-manager")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self.executor.shutdown(wait=True, cancel_futures=True)
        if self.chunks is not None:
            self.chunks.close()

    def kick(self) -> None:
        """Run a pass now (tests, and after a topic turns tiering on)."""
        self._wake.set()

    async def _run(self) -> None:
        interval = self.config.remote_log_manager_task_interval_ms / 1000.0
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote-log-manager pass failed")
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), interval)
            except TimeoutError:
                pass

    # ------------------------------------------------------------ one pass

    async def run_once(self) -> int:
        """One pass over every tiered partition; returns segments copied."""
        self.passes += 1
        copied = 0
        await self._retire_untiered()
        await self.attach_all()
        now = time.monotonic()
        for key, plog in list(self.partitions.logs().items()):
            topic = self.partitions.topics.get(key[0])
            if topic is None or not tiered(topic.configs):
                continue
            state = self.backoff.get(key)
            if state is not None and now < state.not_before:
                continue
            try:
                if not copy_disabled(topic.configs):
                    copied += await self._copy_partition(key, plog)
                await self._remote_retention(key, plog)
            except RemoteStorageError as exc:
                self._failed(key, exc)
                continue
            if state is not None:
                log.info("remote tier: %s-%d works again after %d failure(s)", key[0], key[1],
                         state.failures)
                del self.backoff[key]
        return copied

    def _failed(self, key: Key, exc: Exception) -> None:
        cfg = self.config
        state = self.backoff.setdefault(key, Backoff())
        state.failures += 1
        state.last_error = str(exc)
        wait = state.wait_s(cfg.remote_log_manager_task_retry_backoff_ms,
                            cfg.remote_log_manager_task_retry_backoff_max_ms,
                            cfg.remote_log_manager_task_retry_jitter, self._rng)
        state.not_before = time.monotonic() + wait
        self.counters.copy_failures += 1
        self.counters.per_partition_failures[key] = (
            self.counters.per_partition_failures.get(key, 0) + 1)
        log.warning("remote tier: %s-%d failed (%d in a row), local data kept, retry in %d ms: %s",
                    key[0], key[1], state.failures, round(wait * 1000), exc)
        # The task wakes for the retry even if the interval is longer.
        asyncio.get_running_loop().call_later(wait, self._wake.set)

    # ------------------------------------------------------------ tiers

    def tier(self, key: Key) -> RemoteTier | None:
        """The attached remote tier of a partition, if its topic is tiered."""
        return self.tiers.get(key)

    async def attach_all(self) -> None:
        """Attach a tier to every partition of a tiered topic that has none yet (at start,
        before the listeners serve; then at every pass, for new or altered topics)."""
        now = time.monotonic()
        for key, plog in list(self.partitions.logs().items()):
            topic = self.partitions.topics.get(key[0])
            if topic is None or not tiered(topic.configs) or key in self.tiers:
                continue
            state = self.backoff.get(key)
            if state is not None and now < state.not_before:
                continue  # its retry is not due yet
            try:
                await self._attach(key, plog, topic.partitions)
            except RemoteStorageError as exc:
                self._failed(key, exc)

    async def _attach(self, key: Key, plog: Log, partitions: int) -> RemoteTier:
        assert self.store is not None, "remote tier not open"
        store = self.store
        topic_id = self.partitions.topic_id(key[0]).hex()
        loop = asyncio.get_running_loop()
        # Reading the manifest and finishing an interrupted copy or delete is store I/O:
        # in a thread, unattached; the log learns of the tier on the loop.
        tier = await loop.run_in_executor(self.executor, lambda: RemoteTier(
            plog, store, key[0], key[1], topic_id=topic_id, partitions=partitions,
            cache=self.cache, attach=False, chunks=self.chunks))
        plog.attach_tier(tier)
        self.tiers[key] = tier
        log.info("remote tier attached to %s-%d: %d segment(s) remote, highest offset %d",
                 key[0], key[1], len(tier.finished()), tier.highest_offset)
        return tier

    async def _retire_untiered(self) -> None:
        """Tiers whose topic went away or turned remote.storage.enable off: a deleted
        topic's remote data is deleted (as Kafka does); a topic turned off with
        remote.log.delete.on.disable=true (KIP-950) loses its remote data and reads
        locally again. Turning it off without that flag is refused by AlterConfigs."""
        loop = asyncio.get_running_loop()
        logs = self.partitions.logs()
        for key, tier in list(self.tiers.items()):
            topic = self.partitions.topics.get(key[0])
            # A topic deleted (and maybe created again under its name: another log).
            deleted = topic is None or logs.get(key) is not tier.log
            if not deleted and topic is not None and tiered(topic.configs):
                continue
            if not deleted and topic is not None \
                    and not _flag(topic.configs, "remote.log.delete.on.disable"):
                continue
            if not deleted:
                # Kafka moves the log start to the local log start: what was only remote
                # is gone for readers before its files go (on the loop, the log's owner).
                tier.log.detach_tier()
            try:
                n = await loop.run_in_executor(
                    self.executor, functools.partial(tier.delete_all, topic_deleted=deleted))
            except RemoteStorageError as exc:
                self._failed(key, exc)
                continue
            del self.tiers[key]
            self.backoff.pop(key, None)
            log.info("remote tier: %s-%d %s, %d remote object(s) deleted", key[0], key[1],
                     "deleted" if deleted else "no longer tiered (remote.log.delete.on.disable)", n)

    async def _copy_partition(self, key: Key, plog: Log) -> int:
        tier = self.tiers.get(key) or await self._attach(
            key, plog, self.partitions.topics[key[0]].partitions)
        lso = self.partitions.last_stable_offset(key[0], key[1], plog)
        loop = asyncio.get_running_loop()
        copied = 0
        # topics/<topic>/topic.json follows CreatePartitions and AlterConfigs at once (a
        # put only when its bytes change), not at the next copy: read replicas and Spark
        # learn new partitions and configs from it.
        tier.partitions = self.partitions.topics[key[0]].partitions
        await loop.run_in_executor(self.executor, tier.write_topic_manifest)
        # The candidates are picked on the loop (an in-memory snapshot of sealed
        # segments); each copy reads only those immutable files, in a thread.
        for seg in tier.copy_candidates(lso):
            before = tier.bytes_copied
            try:
                rs = await loop.run_in_executor(self.executor, tier.copy_segment, seg)
            except RemoteStorageError:
                raise
            except (OSError, ValueError) as exc:
                # The segment went away under the copy (DeleteRecords, deletion): the
                # partial upload is already cleaned up; the next pass picks again.
                raise RemoteStorageError(f"copy of {key[0]}-{key[1]} segment "
                                         f"{seg.base_offset} stopped: {exc}") from exc
            self.counters.segments_copied += 1
            self.counters.bytes_copied += tier.bytes_copied - before
            copied += 1
            log.info("remote tier: copied %s-%d offsets %d..%d (%d bytes)", key[0], key[1],
                     rs.base_offset, rs.end_offset, rs.size_bytes)
        return copied

    async def _remote_retention(self, key: Key, plog: Log) -> None:
        tier = self.tiers.get(key)
        if tier is None:
            return
        loop = asyncio.get_running_loop()
        if plog.log_start_offset > tier.manifest.log_start_offset:
            await loop.run_in_executor(self.executor, tier.persist_log_start)
        for rs in tier.expired(int(time.time() * 1000)):
            # The log start moves on the loop first (readers never see an offset the
            # tier is deleting); the store work runs in a thread.
            before = plog.log_start_offset
            if tier.move_log_start_past(rs) > before:
                self._log_start_moved(key, plog)
            await loop.run_in_executor(self.executor, _drain, tier.delete_segment_steps(rs))
            self.counters.segments_deleted += 1
            log.info("remote tier: deleted %s-%d offsets %d..%d (log start now %d)", key[0],
                     key[1], rs.base_offset, rs.end_offset, plog.log_start_offset)

    def _log_start_moved(self, key: Key, plog: Log) -> None:
        """After remote retention moved the log start: local segments wholly below it
        go, producer state and the checkpoint follow."""
        plog.delete_segments_below_log_start()
        producers = self.partitions.producers
        if producers is not None:
            producers.on_log_start_moved(key[0], key[1], plog.log_start_offset)
        self.partitions.checkpoint()

    async def log_start_moved(self, topic: str, partition: int) -> None:
        """After DeleteRecords: the manifest learns the new log start at once (read
        replicas and Spark stop serving below it), remote segments wholly below it go in
        the next pass."""
        tier = self.tiers.get((topic, partition))
        if tier is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, tier.persist_log_start)
        except RemoteStorageError as exc:
            log.warning("remote tier: %s-%d log start not yet in the manifest (retried by the "
                        "next pass): %s", topic, partition, exc)
        self.kick()

    # ------------------------------------------------------------ reads off the loop

    def remote_below(self, plog: Log, offset: int) -> bool:
        """Whether reading ``offset`` of ``plog`` goes to the object store."""
        return plog.is_remote_offset(offset)

    async def read(self, plog: Log, offset: int, max_bytes: int, max_offset: int) -> bytes:
        """``Log.read`` of an offset below the local log start, in the tier's thread pool."""
        loop = asyncio.get_running_loop()
        data: bytes = await loop.run_in_executor(
            self.executor, lambda: plog.read(offset, max_bytes, max_offset=max_offset))
        self.counters.remote_fetches += 1
        self.counters.bytes_fetched += len(data)
        return data

    async def call(self, fn: Callable[[], T]) -> T:
        """Run a blocking lookup or plan that may read the tier, off the loop."""
        self.counters.remote_lookups += 1
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    def unavailable(self, topic: str, partition: int) -> RemoteStorageError | None:
        """Why a tiered partition cannot be read now: its tier could not be attached
        (the store failed when the broker started or the topic turned tiering on) and
        its local log does not start at 0, so older records may exist only in the tier:
        its log start is not known and no answer below the local start would be right.
        Reads answer KAFKA_STORAGE_ERROR (retriable: clients try again) until a retry
        attaches it; None when it can be read."""
        key = (topic, partition)
        state = self.backoff.get(key)
        if state is None or key in self.tiers:
            return None
        plog = self.partitions.logs().get(key)
        if plog is None or plog.segments[0].base_offset == 0:
            return None  # offset 0 is local: no record can be remote-only, serve locally
        return RemoteStorageError(f"remote tier of {topic}-{partition} not available yet "
                                  f"({state.failures} attempt(s)): {state.last_error}")

    def has_remote_data(self, topic: str, partition: int) -> bool:
        """Whether a partition has readable remote segments (requests over it may touch
        the store)."""
        tier = self.tiers.get((topic, partition))
        return tier is not None and bool(tier.readable())

    async def event_time_ready(self, topic: str, partition: int) -> Exception | None:
        """Fetch the zone maps of a partition's remote segments (PlanTimeWindow and
        CountTimeWindows read them) in the tier's threads; the error if that failed."""
        down = self.unavailable(topic, partition)
        if down is not None:
            return down
        tier = self.tiers.get((topic, partition))
        if tier is None or not tier.readable():
            return None
        try:
            await self.call(tier.zone_maps)
        except Exception as exc:
            log.warning("remote tier: zone maps of %s-%d unavailable: %s", topic, partition, exc)
            return exc
        return None

    # ------------------------------------------------------------ status

    def status(self, key: Key, plog: Log) -> TierStatus:
        """One partition's tier figures (metrics, ``chronolog tier``, the console)."""
        tier = self.tiers.get(key)
        highest = tier.highest_offset if tier is not None else -1
        lag_bytes = sum(max(s.size, 0) for s in plog.segments[:-1] if s.base_offset > highest)
        lag_segments = sum(1 for s in plog.segments[:-1] if s.base_offset > highest)
        backoff = self.backoff.get(key)
        return TierStatus(
            log_start_offset=plog.log_start_offset,
            local_log_start_offset=plog.local_log_start_offset,
            remote_highest_offset=highest,
            log_end_offset=plog.log_end_offset,
            local_bytes=plog.size_in_bytes(),
            remote_bytes=tier.size_bytes() if tier is not None else 0,
            remote_segments=len(tier.finished()) if tier is not None else 0,
            upload_lag_bytes=lag_bytes,
            upload_lag_segments=lag_segments,
            failures=backoff.failures if backoff is not None else 0,
            last_error=backoff.last_error if backoff is not None else "",
        )

    def cache_stats(self) -> tuple[int, int, int]:
        """(hits, misses, bytes) of the remote index cache."""
        c = self.cache
        return (c.hits, c.misses, c.size_bytes) if c is not None else (0, 0, 0)

    def chunk_cache_stats(self) -> tuple[int, int, int]:
        """(hits, misses, bytes) of the remote chunk cache (chunks, not reads)."""
        c = self.chunks
        return (c.hits, c.misses, c.size_bytes) if c is not None else (0, 0, 0)


def _drain(steps: Iterator[str]) -> None:
    for _ in steps:
        pass


@dataclass(frozen=True)
class TierStatus:
    log_start_offset: int
    local_log_start_offset: int
    remote_highest_offset: int
    log_end_offset: int
    local_bytes: int
    remote_bytes: int
    remote_segments: int
    upload_lag_bytes: int
    upload_lag_segments: int
    failures: int
    last_error: str
