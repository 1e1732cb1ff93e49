"""Kafka's transaction coordinator as a sans-I/O state machine (``TransactionCoordinator``,
``TransactionMetadata``), driven by the caller's clock.

Every method takes ``now_ms`` and returns an answer (an error code and values); state
changes that must be made durable are handed to ``persist`` (a callable the I/O shell
provides) *before* the method returns, and the work to finish a transaction (markers
on each partition, offsets to materialise) is returned as :class:`Completion` values
for the shell to carry out, after which it calls :meth:`complete`.

Invariants (transactions-facts §2, TV1 only: no client here negotiates TV2):
- States and transitions are Kafka's: Empty -> Ongoing -> PrepareCommit/PrepareAbort ->
  CompleteCommit/CompleteAbort -> (Empty on the next InitProducerId, Ongoing on the next
  AddPartitions/AddOffsets). Prepare* is durable before markers are written and
  Complete* only after every marker was appended.
- InitProducerId with a transactional id: a new id gets a fresh producer id, epoch 0;
  Empty/Complete* bump the epoch (a new producer id at epoch 32766); Ongoing is fenced
  (epoch bumped, transaction aborted at the new epoch) and answered
  CONCURRENT_TRANSACTIONS so the retry gets epoch + 2; Prepare* is
  CONCURRENT_TRANSACTIONS. KIP-360 (v3+): the expected epoch equal to the current one
  bumps, equal to the previous one is a retry (current returned), otherwise fenced.
- Fencing errors: PRODUCER_FENCED (90), except INVALID_PRODUCER_EPOCH (47) for
  InitProducerId below v4 and AddPartitions/AddOffsets/EndTxn/TxnOffsetCommit below v2.
- Only Ongoing transactions time out: start (the first AddPartitions/AddOffsets) +
  timeout < now; a timed-out transaction is aborted through the epoch fence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

from protocol.errors import ErrorCode

MAX_EPOCH = 32767
EXHAUSTED_EPOCH = MAX_EPOCH - 1  # isEpochExhausted: a new producer id is issued
COORDINATOR_EPOCH = 0  # one node, never re-elected: constant, never lower than in a log

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6


STATE_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
}
_COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


class PendingOffset(NamedTuple):
    """An offset committed inside a transaction (TxnOffsetCommit), not yet visible."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str


@dataclass
class TxnMetadata:
    """One transactional id (one ``__transaction_state`` value)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    # group id -> (topic, partition) -> pending offset
    offsets: dict[str, dict[TopicPartition, PendingOffset]] = field(default_factory=dict)
    start_ms: int = -1
    last_update_ms: int = -1

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.transactional_id, "pid": self.producer_id, "epoch": self.producer_epoch,
            "last_epoch": self.last_producer_epoch, "timeout_ms": self.timeout_ms,
            "state": int(self.state), "partitions": sorted([t, p] for t, p in self.partitions),
            "offsets": {g: [list(o) for o in offs.values()] for g, offs in self.offsets.items()},
            "start_ms": self.start_ms, "last_update_ms": self.last_update_ms,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> TxnMetadata:
        offsets: dict[str, dict[TopicPartition, PendingOffset]] = {}
        for group, rows in rec.get("offsets", {}).items():
            offsets[str(group)] = {
                (str(r[0]), int(r[1])): PendingOffset(str(r[0]), int(r[1]), int(r[2]), int(r[3]),
                                                      str(r[4]))
                for r in rows
            }
        return cls(
            str(rec["id"]), int(rec["pid"]), int(rec["epoch"]), int(rec["last_epoch"]),
            int(rec["timeout_ms"]), TxnState(int(rec["state"])),
            {(str(t), int(p)) for t, p in rec["partitions"]}, offsets,
            int(rec["start_ms"]), int(rec["last_update_ms"]),
        )


class Completion(NamedTuple):
    """Work that ends a transaction: write a marker of ``commit`` at ``producer_epoch`` to
    each partition, materialise (commit) or drop (abort) ``offsets``, then call
    ``TransactionCoordinator.complete(transactional_id)``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]
    offsets: dict[str, dict[TopicPartition, PendingOffset]]


class InitResult(NamedTuple):
    error: int
    producer_id: int = -1
    producer_epoch: int = -1
    completion: Completion | None = None


class Result(NamedTuple):
    error: int
    completion: Completion | None = None


def _fenced(version: int, first_90_version: int) -> int:
    return int(ErrorCode.PRODUCER_FENCED if version >= first_90_version
               else ErrorCode.INVALID_PRODUCER_EPOCH)


class TransactionCoordinator:
    """Every transactional id of this broker; see the module docstring."""

    def __init__(self, *, allocate_producer_id: Callable[[], int],
                 persist: Callable[[TxnMetadata], None], max_timeout_ms: int) -> None:
        self._allocate = allocate_producer_id
        self._persist = persist
        self.max_timeout_ms = max_timeout_ms
        self.txns: dict[str, TxnMetadata] = {}
        self._by_pid: dict[int, str] = {}

    # ---- loading ------------------------------------------------------------------

    def load(self, records: list[TxnMetadata]) -> list[Completion]:
        """Adopt the stored state (last record per id wins); returns the completions a
        transaction left in Prepare* needs (its markers may not all be written)."""
        out = []
        for meta in records:
            self.txns[meta.transactional_id] = meta
            self._by_pid[meta.producer_id] = meta.transactional_id
            if meta.state in _PREPARE:
                out.append(self._completion(meta))
        return out

    # ---- InitProducerId ---------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_pid: int,
                         expected_epoch: int, version: int, now_ms: int) -> InitResult:
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return InitResult(int(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state == TxnState.DEAD:
            meta = TxnMetadata(transactional_id, self._allocate(), 0, -1, timeout_ms,
                               TxnState.EMPTY, last_update_ms=now_ms)
            self._save(meta)
            return InitResult(0, meta.producer_id, meta.producer_epoch)
        if meta.state in _PREPARE:
            return InitResult(int(ErrorCode.CONCURRENT_TRANSACTIONS))
        if expected_pid != -1:
            if expected_pid != meta.producer_id:
                return InitResult(_fenced(version, 4))
            if expected_epoch != meta.producer_epoch:
                if expected_epoch == meta.last_producer_epoch and meta.state != TxnState.ONGOING:
                    return InitResult(0, meta.producer_id, meta.producer_epoch)
                return InitResult(_fenced(version, 4))
        if meta.state == TxnState.ONGOING:
            # A new instance of the producer: fence the old one and abort its transaction.
            completion = self._fence_and_abort(meta, now_ms)
            return InitResult(int(ErrorCode.CONCURRENT_TRANSACTIONS), completion=completion)
        meta.last_producer_epoch = meta.producer_epoch
        if meta.producer_epoch >= EXHAUSTED_EPOCH:
            meta.producer_id = self._allocate()
            meta.producer_epoch = 0
            meta.last_producer_epoch = -1
        else:
            meta.producer_epoch += 1
        meta.timeout_ms = timeout_ms
        meta.state = TxnState.EMPTY
        meta.partitions = set()
        meta.offsets = {}
        meta.start_ms = -1
        meta.last_update_ms = now_ms
        self._save(meta)
        return InitResult(0, meta.producer_id, meta.producer_epoch)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------

    def _check(self, transactional_id: str, producer_id: int, producer_epoch: int,
               version: int) -> tuple[int, TxnMetadata | None]:
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state == TxnState.DEAD or meta.producer_id != producer_id:
            return int(ErrorCode.INVALID_PRODUCER_ID_MAPPING), None
        if meta.producer_epoch != producer_epoch:
            return _fenced(version, 2), None
        return 0, meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[TopicPartition], version: int, now_ms: int) -> int:
        err, meta = self._check(transactional_id, producer_id, producer_epoch, version)
        if meta is None:
            return err
        if meta.state in _PREPARE:
            return int(ErrorCode.CONCURRENT_TRANSACTIONS)
        new = [tp for tp in partitions if tp not in meta.partitions]
        if meta.state == TxnState.ONGOING and not new:
            return 0
        self._begin(meta, now_ms)
        meta.partitions.update(new)
        self._save(meta)
        return 0

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    group_id: str, version: int, now_ms: int) -> int:
        err, meta = self._check(transactional_id, producer_id, producer_epoch, version)
        if meta is None:
            return err
        if meta.state in _PREPARE:
            return int(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state == TxnState.ONGOING and group_id in meta.offsets:
            return 0
        self._begin(meta, now_ms)
        meta.offsets.setdefault(group_id, {})
        self._save(meta)
        return 0

    def _begin(self, meta: TxnMetadata, now_ms: int) -> None:
        if meta.state != TxnState.ONGOING:
            meta.state = TxnState.ONGOING
            meta.partitions = set()
            meta.offsets = {}
            meta.start_ms = now_ms
        meta.last_update_ms = now_ms

    # ---- TxnOffsetCommit -------------------------------------------------------------------

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int,
                          producer_epoch: int, offsets: list[PendingOffset], version: int,
                          now_ms: int) -> int:
        """Keep offsets pending until the transaction ends: the group must have been
        added (AddOffsetsToTxn) to the ongoing transaction, else INVALID_TXN_STATE."""
        err, meta = self._check(transactional_id, producer_id, producer_epoch, version)
        if meta is None:
            return err
        if meta.state != TxnState.ONGOING or group_id not in meta.offsets:
            return int(ErrorCode.INVALID_TXN_STATE)
        pending = meta.offsets[group_id]
        for o in offsets:
            pending[(o.topic, o.partition)] = o
        meta.last_update_ms = now_ms
        self._save(meta)
        return 0

    def pending_groups(self) -> set[str]:
        """Groups with offsets waiting for a transaction to end (RequireStable -> 88)."""
        return {g for m in self.txns.values() if m.state in (TxnState.ONGOING, *_PREPARE)
                for g, offs in m.offsets.items() if offs}

    def pending_partitions(self, group_id: str) -> frozenset[TopicPartition]:
        """The group's partitions with an offset pending in an open transaction."""
        return frozenset(tp for m in self.txns.values()
                         if m.state in (TxnState.ONGOING, *_PREPARE)
                         for tp in m.offsets.get(group_id, {}))

    # ---- EndTxn -----------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool, version: int, now_ms: int) -> Result:
        err, meta = self._check(transactional_id, producer_id, producer_epoch, version)
        if meta is None:
            return Result(err)
        state = meta.state
        if state == TxnState.ONGOING:
            meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            meta.last_update_ms = now_ms
            self._save(meta)
            return Result(0, self._completion(meta))
        wanted_complete = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        wanted_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state == wanted_complete:
            return Result(0)  # a retry of an end already done
        if state == wanted_prepare:
            return Result(int(ErrorCode.CONCURRENT_TRANSACTIONS))
        return Result(int(ErrorCode.INVALID_TXN_STATE))

    def complete(self, transactional_id: str, now_ms: int) -> None:
        """Every marker of the Prepare* transaction is written: Complete*."""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state not in _PREPARE:
            return
        meta.state = (TxnState.COMPLETE_COMMIT if meta.state == TxnState.PREPARE_COMMIT
                      else TxnState.COMPLETE_ABORT)
        meta.partitions = set()
        meta.offsets = {}
        meta.last_update_ms = now_ms
        self._save(meta)

    # ---- timeouts ----------------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> list[Completion]:
        """Fence and abort every Ongoing transaction older than its timeout."""
        out = []
        for meta in list(self.txns.values()):
            if meta.state == TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now_ms:
                out.append(self._fence_and_abort(meta, now_ms))
        return out

    def _fence_and_abort(self, meta: TxnMetadata, now_ms: int) -> Completion:
        if meta.producer_epoch < EXHAUSTED_EPOCH:
            meta.last_producer_epoch = meta.producer_epoch
            meta.producer_epoch += 1
        meta.state = TxnState.PREPARE_ABORT
        meta.last_update_ms = now_ms
        self._save(meta)
        return self._completion(meta)

    # ---- helpers ------------------------------------------------------------------------------

    def _completion(self, meta: TxnMetadata) -> Completion:
        return Completion(
            meta.transactional_id, meta.producer_id, meta.producer_epoch,
            meta.state == TxnState.PREPARE_COMMIT, tuple(sorted(meta.partitions)),
            {g: dict(o) for g, o in meta.offsets.items()},
        )

    def _save(self, meta: TxnMetadata) -> None:
        self.txns[meta.transactional_id] = meta
        self._by_pid[meta.producer_id] = meta.transactional_id
        self._persist(meta)

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self.txns.get(transactional_id)

    def verify_produce(self, producer_id: int, producer_epoch: int, tp: TopicPartition) -> int:
        """The produce path's check of a transactional batch (KIP-890 part 1): 0 when
        ``tp`` is in the ongoing transaction of this producer id and epoch, else
        INVALID_PRODUCER_EPOCH (an older epoch) or INVALID_TXN_STATE."""
        txn_id = self._by_pid.get(producer_id)
        meta = self.txns.get(txn_id) if txn_id is not None else None
        if meta is None or meta.producer_id != producer_id:
            return int(ErrorCode.INVALID_TXN_STATE)
        if producer_epoch < meta.producer_epoch:
            return int(ErrorCode.INVALID_PRODUCER_EPOCH)
        if (meta.state == TxnState.ONGOING and meta.producer_epoch == producer_epoch
                and tp in meta.partitions):
            return 0
        return int(ErrorCode.INVALID_TXN_STATE)
