"""The broker's log cleaner: picks compacted partitions and runs ``storage.cleaner`` off the event loop.

Invariants:
- ``log.cleaner.threads`` workers (asyncio tasks) each clean at most one partition
  at a time, never the same one as another worker; the heavy phase (key map,
  filtering, writing ``.cleaned`` files: ``storage.cleaner.run_job``) runs in one of
  as many worker processes (spawned once, reused), so the event loop only takes the
  snapshot (``plan``) and the swap (``CleanResult.commit``), each one synchronous
  step: appends, fetches and lookups see the old segments or the new ones, never a
  mix. Processes rather than threads: a cleaning thread holds the GIL between its
  batches and the event loop waits for it after every system call (measured: produce
  30-45 % slower while cleaning with a thread; see docs/storage.md).
- Transactions (Kafka's rules, storage/cleaner.py): the cleanable range ends at the
  partition's last stable offset, so records of open transactions are never cleaned;
  aborted data (known from the segments' ``.txnindex`` files) is removed, and so
  are markers whose data is gone once delete.retention.ms has passed; after a clean
  the partition's aborted-transaction list (what read_committed Fetch serves) takes
  the cleaned segments' ``.txnindex`` entries for the cleaned range.
- A partition is picked as Kafka's ``grabFilthiestCompactedLog``: cleanup.policy
  includes compact, and its dirty ratio exceeds min.cleanable.dirty.ratio or a dirty
  record is older than max.compaction.lag.ms; the highest ratio first. With nothing
  to clean a worker sleeps ``log.cleaner.backoff.ms``.
- The cleaner checkpoint (``cleaner-offset-checkpoint`` in the data dir, Kafka's
  text format) records each partition's next dirty offset after a clean; it is
  rewritten (atomically) after every clean, keeping entries only for partitions that
  still exist, so a restart does not clean from the log start again.
- A clean whose partition was deleted, truncated or had segments removed
  meanwhile is discarded (its ``.cleaned`` files removed); a failed clean is logged
  and its partition skipped until the broker restarts (Kafka's uncleanable
  partitions), the broker goes on.
- ``close`` stops the workers: a clean in progress is aborted between two reads
  (a shared multiprocessing event); whatever it left is removed when the log loads.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import time
import weakref
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from storage.cleaner import (
    CleanAborted,
    CleanerSettings,
    CleanPlan,
    CleanResult,
    init_worker,
    log_to_clean,
    plan,
    read_cleaner_checkpoint,
    run_job,
    write_cleaner_checkpoint,
)

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.partitions import PartitionManager
    from storage.log import Log

log = logging.getLogger("chronolog.cleaner")

Key = tuple[str, int]


class CleanerTask:
    """Runs the cleaner workers for one broker (see the module docstring)."""

    def __init__(self, partitions: PartitionManager, config: BrokerConfig) -> None:
        self.partitions = partitions
        self.config = config
        threads = max(config.log_cleaner_threads, 1)
        # Kafka splits the dedupe buffer among the threads; each process throttles its
        # share of the I/O rate.
        self.settings = CleanerSettings(
            dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_size // threads,
            load_factor=config.log_cleaner_io_buffer_load_factor,
            io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second / threads,
        )
        self._threads = threads
        self.checkpoints: dict[Key, int] = read_cleaner_checkpoint(partitions.data_dir)
        self.in_progress: set[Key] = set()
        # The Log object each checkpoint entry speaks for: a partition deleted and
        # created again (a new Log) starts dirty from its log start.
        self._owners: weakref.WeakValueDictionary[Key, Log] = weakref.WeakValueDictionary()
        self._checkpoint_lock = asyncio.Lock()
        self.uncleanable: set[Key] = set()
        self.cleans = 0  # completed cleans (tests and metrics read it)
        self._plans: set[CleanPlan] = set()
        # The worker processes (and the event that stops them) start with the first
        # clean: a broker without compacted topics runs none.
        self._mp = multiprocessing.get_context("spawn")
        self._abort: Any = None
        self._executor: ProcessPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._wake = asyncio.Event()

    def _new_pool(self) -> ProcessPoolExecutor:
        if self._abort is None:
            self._abort = self._mp.Event()
        return ProcessPoolExecutor(max_workers=self._threads, mp_context=self._mp,
                                   initializer=init_worker, initargs=(self._abort, os.getpid()))

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        for i in range(self.config.log_cleaner_threads):
            self._tasks.append(loop.create_task(self._worker(), name=f"log-cleaner-{i}"))

    def wake(self) -> None:
        """Look for work now instead of after the backoff (tests, config changes)."""
        self._wake.set()

    async def close(self) -> None:
        self._stopping = True
        if self._abort is not None:
            self._abort.set()
        for p in list(self._plans):
            p.abort.set()
        self._wake.set()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    # ------------------------------------------------------------ one worker

    async def _worker(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = self.config.log_cleaner_backoff_ms / 1000.0
        while not self._stopping:
            try:
                cleaned = await self._clean_one(loop)
            except Exception:
                log.exception("log cleaner worker failed")
                cleaned = False
            if cleaned or self._stopping:
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=backoff)
            except TimeoutError:
                pass

    def _pick(self, now_ms: int) -> tuple[Key, CleanPlan] | None:
        """The filthiest due partition and its plan (on the event loop)."""
        best = None
        for key, plog in self.partitions.logs().items():
            cfg = plog.config
            if self._owners.get(key) is not plog:
                if key in self._owners:
                    self.checkpoints.pop(key, None)  # the partition was created anew
                    self.uncleanable.discard(key)
                self._owners[key] = plog
            if not cfg.compact or key in self.in_progress or key in self.uncleanable:
                continue
            try:
                # Records of open transactions (at or above the LSO) are not cleaned.
                lso = self.partitions.last_stable_offset(key[0], key[1], plog)
                ltc = log_to_clean(plog, self.checkpoints.get(key), now_ms, lso)
            except Exception:
                log.exception("cannot tell what to clean in %s-%d; skipping it", *key)
                self.uncleanable.add(key)
                continue
            if ltc.due(cfg.min_cleanable_dirty_ratio) and (best is None or ltc.ratio > best[1].ratio):
                best = (key, ltc, plog)
        if best is None:
            return None
        key, ltc, plog = best
        p = plan(plog, ltc, now_ms)
        if p is None:
            return None
        return key, p

    async def _clean_one(self, loop: asyncio.AbstractEventLoop) -> bool:
        now = int(time.time() * 1000)
        picked = self._pick(now)
        if picked is None:
            return False
        key, p = picked
        plog = self.partitions.get_log(*key)
        self.in_progress.add(key)
        self._plans.add(p)
        log.info("cleaning %s-%d: dirty offsets [%d, %d), %d segment(s)", key[0], key[1],
                 p.first_dirty, p.first_uncleanable, len(p.segments))
        try:
            if self._executor is None:
                self._executor = self._new_pool()
            outcome = await loop.run_in_executor(self._executor, run_job, p.job(), self.settings)
            result: CleanResult = p.adopt(outcome)
        except CleanAborted as exc:
            log.info("cleaning %s-%d stopped: %s", key[0], key[1], exc)
            return False
        except BrokenProcessPool:
            log.error("the cleaner process of %s-%d died; starting another", *key)
            self._executor = self._new_pool()
            return False
        except Exception:
            if self.partitions.logs().get(key) is not plog:
                return False  # deleted while it was being cleaned
            log.exception("cleaning %s-%d failed; it is skipped until restart", *key)
            self.uncleanable.add(key)
            return False
        finally:
            self._plans.discard(p)
            self.in_progress.discard(key)
            p.close()
        if self._stopping or self.partitions.logs().get(key) is not plog:
            result.discard()  # shutting down, or the partition was deleted meanwhile
            return False
        try:
            swapped = result.commit(plog)
        except OSError:
            log.exception("swapping cleaned segments into %s-%d failed", *key)
            self.uncleanable.add(key)
            return False
        if not swapped:
            log.info("cleaning %s-%d discarded: its segments changed meanwhile", *key)
            return True
        # Entries below a log start that DeleteRecords advanced meanwhile stay forgotten.
        start = plog.log_start_offset
        self.partitions.segments_replaced(key, [
            (g.base, g.upper, [e for e in g.aborted if e.last_offset >= start])
            for g in result.groups])
        self.checkpoints[key] = result.next_dirty
        async with self._checkpoint_lock:  # one writer of the file at a time
            live = self.partitions.logs()
            self.checkpoints = {k: v for k, v in self.checkpoints.items() if k in live}
            await loop.run_in_executor(None, write_cleaner_checkpoint,
                                       self.partitions.data_dir, dict(self.checkpoints))
        self.cleans += 1
        s = result.stats
        log.info("cleaned %s-%d up to offset %d: %.1f MB read, %.1f MB written, "
                 "%d of %d records kept, %d keys, %.2f s (%.1f MB/s)",
                 key[0], key[1], result.next_dirty, s.bytes_read / 1e6, s.bytes_written / 1e6,
                 s.records_kept, s.records_read, s.map_entries, s.seconds,
                 s.bytes_read / 1e6 / s.seconds if s.seconds else 0.0)
        return True
