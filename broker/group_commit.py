"""Group commit: one fsync per partition covers every append of an event-loop pass.

``log.flush.interval.messages=1`` asks that a record be on disk before it is
acknowledged. One fsync per Produce request would cap a partition at the disk's
synchronous-write rate (~5k/s here); instead appends that reach their topic's
``flush.messages`` join the *next* commit, which starts once the current loop pass
is over (and not before the running one finished), takes the flush work of every
partition that joined (``Log.take_flush``: duplicated descriptors, so it may run
on any thread) and runs it on a worker thread. The Produce handler awaits the
commit its appends joined before it answers.

Invariants:
- An append joins the commit that has not started yet, never the running one, so
  a completed commit covers every append that joined it (its work was taken after
  they were written).
- At most one commit runs at a time; appends arriving meanwhile join the next one.
- A commit that fails (EIO, ENOSPC on metadata) fails the future of every request
  that waited for it: those partitions answer KAFKA_STORAGE_ERROR, and their logs
  keep the flush owed (``Log.roll_flush_failed``) for the next attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from storage.log import Log, RollFlush

log = logging.getLogger("chronolog.broker")

Key = tuple[str, int]


class GroupCommit:
    """Batches the fsyncs owed by appends on one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 on_synced: Callable[[Key], None] | None = None) -> None:
        self._loop = loop
        self._on_synced = on_synced
        self._next: dict[Key, Log] = {}
        self._next_future: asyncio.Future[None] | None = None
        self._running = False
        self.commits = 0  # how many commits ran (for tests and metrics)

    def join(self, key: Key, plog: Log) -> asyncio.Future[None]:
        """The future that completes once ``plog`` is synced up to its current end."""
        self._next[key] = plog
        if self._next_future is None:
            self._next_future = self._loop.create_future()
            # acks=0 requests never await it: retrieve a failure so it is not reported twice.
            self._next_future.add_done_callback(lambda f: f.cancelled() or f.exception())
            if not self._running:
                self._loop.call_soon(self._start)
        return self._next_future

    def _start(self) -> None:
        if self._running or not self._next:
            return
        logs, self._next = self._next, {}
        future, self._next_future = self._next_future, None
        assert future is not None
        works: list[tuple[Key, Log, RollFlush]] = []
        try:
            for key, plog in logs.items():
                works.append((key, plog, plog.take_flush()))
        except OSError as exc:  # out of descriptors: fail this commit, keep the flush owed
            for _key, plog, work in works:
                plog.roll_flush_failed(work)
            future.set_exception(exc)
            self._loop.call_soon(self._start)
            return
        self._running = True
        self.commits += 1
        done = self._loop.run_in_executor(None, _run_all, [w for _, _, w in works])

        def finished(f: asyncio.Future[None]) -> None:
            self._running = False
            exc = f.exception() if not f.cancelled() else asyncio.CancelledError()
            for key, plog, work in works:
                if exc is None:
                    plog.roll_flush_done(work)
                    if self._on_synced is not None:
                        self._on_synced(key)
                else:
                    plog.roll_flush_failed(work)
            if exc is None:
                future.set_result(None)
            else:
                log.error("group commit of %d partition(s) failed", len(works), exc_info=exc)
                future.set_exception(exc)
            if self._next:
                self._start()

        done.add_done_callback(finished)


def _run_all(works: list[RollFlush]) -> None:
    for work in works:
        work.run()
