"""The I/O shell around ``TransactionCoordinator``: markers, offsets, timeouts, restart.

Invariants:
- a completion (commit or abort) writes one marker to every partition of the
  transaction (a partition deleted meanwhile is skipped), then materialises
  (commit) or drops (abort) the transaction's pending group offsets through the group
  coordinator's store, then records Complete*; EndTxn is answered after that, so a
  committed transaction is readable (and its offsets visible) when the client hears
  "committed" (Kafka answers after PrepareCommit is durable; markers may precede it).
- completions run one at a time per transactional id, in order;
- on open, a transaction found in Prepare* is completed again (markers already
  written are harmless: a marker for a producer with no open transaction completes
  nothing, as in Kafka) and an Ongoing one is aborted once its timeout passes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from broker.groups.store import CommittedOffset
from broker.txn.coordinator import COORDINATOR_EPOCH, Completion, TransactionCoordinator
from broker.txn.store import TransactionStore
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("chronolog.broker")


def _wall_ms() -> int:
    return int(time.time() * 1000)


class TransactionService:
    def __init__(self, partitions: Any, groups: Any, *, max_timeout_ms: int,
                 clock: Callable[[], int] = _wall_ms) -> None:
        self.partitions = partitions
        self.groups = groups
        self.clock = clock
        self.store = TransactionStore(
            partitions.state_dir, live=lambda: self.coordinator.txns.values(),
            flush_messages=lambda: partitions.config.log_flush_interval_messages)
        self.coordinator = TransactionCoordinator(
            allocate_producer_id=partitions.producers.allocate_producer_id,
            persist=self.store.write, max_timeout_ms=max_timeout_ms)
        self._locks: dict[str, asyncio.Lock] = {}

    async def open(self) -> None:
        """Load the stored state and finish what a crash left in Prepare*."""
        pending = self.coordinator.load(self.store.load())
        self.partitions.txn_verifier = self._verify
        for completion in pending:
            log.info("completing transaction %r (%s) left open by a restart",
                     completion.transactional_id, "commit" if completion.commit else "abort")
            await self.finish(completion)

    def close(self) -> None:
        self.partitions.txn_verifier = None
        self.store.close()

    def _verify(self, topic: str, partition: int, producer_id: int, producer_epoch: int) -> None:
        code = self.coordinator.verify_produce(producer_id, producer_epoch, (topic, partition))
        if code:
            raise KafkaError(ErrorCode(code),
                             f"transactional batch of producer {producer_id} epoch "
                             f"{producer_epoch} to {topic}-{partition} is not in its ongoing "
                             "transaction")

    def lock(self, transactional_id: str) -> asyncio.Lock:
        lk = self._locks.get(transactional_id)
        if lk is None:
            lk = self._locks[transactional_id] = asyncio.Lock()
        return lk

    async def finish(self, c: Completion) -> None:
        """Markers, offsets, Complete* (see the module docstring)."""
        now = self.clock()
        pm = self.partitions
        for topic, partition in c.partitions:
            if not pm.has_partition(topic, partition):
                continue
            pm.write_marker(topic, partition, c.producer_id, c.producer_epoch, c.commit,
                            COORDINATOR_EPOCH, now)
        if c.commit:
            for group, offsets in c.offsets.items():
                if not offsets:
                    continue
                items = [(o.topic, o.partition,
                          CommittedOffset(o.offset, o.leader_epoch, o.metadata, now))
                         for o in offsets.values()]
                await self.groups.commit_offsets(group, items)
        self.coordinator.complete(c.transactional_id, self.clock())

    async def abort_timed_out(self, now_ms: int) -> int:
        """The periodic sweep: abort (fencing the producer) every expired transaction."""
        completions = self.coordinator.abort_timed_out(now_ms)
        for c in completions:
            log.info("aborting transaction %r of producer %d: older than its timeout",
                     c.transactional_id, c.producer_id)
            async with self.lock(c.transactional_id):
                await self.finish(c)
        return len(completions)
