"""Idempotent-producer state: producer id allocation and per-partition sequence checks.

This is Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` for non-transactional
producers, so a producer that retries a batch (librdkafka with
``enable.idempotence=true``, kafka-python 3 by default, the Java client by default)
gets every record exactly once.

Interface for the produce path (call the three steps with no ``await`` in between, or
under the partition's lock, so no other batch of the partition slips between them)::

    dup = producers.check(topic, partition, h.producer_id, h.producer_epoch,
                          h.base_sequence, h.last_offset_delta)
    if dup is not None:          # a retry of a batch already in the log
        answer NONE with dup.base_offset / dup.log_append_time_ms; do not append
    else:
        result = log.append(batch, now_ms=now)
        producers.record(topic, partition, h.producer_id, h.producer_epoch,
                         h.base_sequence, h.last_offset_delta, result.base_offset,
                         result.last_offset, log_append_time_ms, now_ms=now)

``check`` raises :class:`protocol.errors.KafkaError` with Kafka's code:
INVALID_PRODUCER_EPOCH (47) for an epoch below the known one, OUT_OF_ORDER_SEQUENCE_NUMBER
(45) for a gap or an old sequence no longer cached, INVALID_RECORD (87) for an
idempotent batch without a sequence (or a transactional one without a producer id),
INVALID_TXN_STATE (48) for a non-transactional batch of a producer whose transaction
is open on that partition. Batches with ``producer_id == -1`` are not idempotent
and always pass. An unknown producer id is accepted with any sequence, as Kafka does
since KIP-360 (it cannot tell a new producer from one whose state retention removed);
UNKNOWN_PRODUCER_ID (59) is therefore never answered, just as modern Kafka never does.
A duplicate (same epoch, same first and last sequence as one of the last five batches
of that producer on that partition) is answered with error NONE and the offsets of the
original append, which is what clients expect (DUPLICATE_SEQUENCE_NUMBER is a pre-1.0
behaviour that modern clients treat as an error).

Invariants:
- Producer ids are never handed out twice, even across crashes: ids come in blocks of
  ``ID_BLOCK_SIZE`` and a block's end is made durable (fsync + rename) in
  ``producer-id-block`` before its first id is returned; after a log replay the next id
  is also above every producer id seen in the logs.
- Per (producer id, topic, partition) the state holds the current epoch and at most
  the last ``BATCHES_TO_RETAIN`` (5, Kafka's ``NUM_BATCHES_TO_RETAIN``, the client's
  max in-flight limit) appended batches, oldest first.
- The state of a partition is a pure function of its log: ``restore_partition`` rebuilds
  it from the batch headers (starting from the clean-shutdown snapshot written by
  ``write_snapshot`` when one matches the log), so nothing is lost on a crash.
- Entries idle for ``producer.id.expiration.ms`` (1 day) are dropped, as Kafka does,
  except a producer whose transaction is open on the partition.

Transactions (Kafka's ``ProducerStateManager`` ongoing/aborted bookkeeping), per partition:
- a transactional data batch (attribute 0x10) of a producer without an open transaction
  opens one at its base offset; a COMMIT/ABORT marker closes it (``complete_txn``); a
  marker for a producer with no open transaction completes nothing (KAFKA-10702);
- an ABORT that closes a transaction adds ``AbortedTxn(pid, first offset, marker offset,
  last stable offset)`` to the partition's aborted list, which is ordered by marker
  offset (Kafka's ``.txnindex`` entries, kept in memory: rebuilt from the log on open,
  carried in the clean-shutdown snapshot); after a clean the cleaned range's entries
  are replaced by what the clean kept (``replace_aborted``): an entry whose data the
  cleaner removed leaves the list with its ``.txnindex`` entry, and a restart does not
  bring it back, since a marker whose data is gone opens no transaction in the replay;
- the last stable offset is the first offset of the oldest open transaction, else the
  high watermark; a partition with no open transaction answers the high watermark with
  one dictionary lookup.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from protocol.errors import ErrorCode, KafkaError
from storage.fsutil import atomic_write_text
from storage.records import BatchHeader
from storage.txnindex import TxnIndexEntry

BATCHES_TO_RETAIN = 5
ID_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = 2**63 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
EXPIRY_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms
ID_BLOCK_FILE = "producer-id-block"
SNAPSHOT_FILE = "producer-state-snapshot.json"
SNAPSHOT_VERSION = 2


# One aborted transaction of a partition: Kafka's 34-byte ``.txnindex`` entry
# (producer id, first offset, the ABORT marker's offset, LSO at the abort).
AbortedTxn = TxnIndexEntry


@dataclass
class PartitionTxns:
    """The open and aborted transactions of one partition."""

    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)  # by marker offset


class Duplicate(NamedTuple):
    """A retried batch that is already in the log: answer NONE with these values."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    log_append_time_ms: int


@dataclass
class ProducerEntry:
    """One producer's state on one partition."""

    epoch: int
    last_seen_ms: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    # The coordinator epoch of the last COMMIT/ABORT marker written for this producer here,
    # -1 before any (Kafka's ProducerStateEntry.coordinatorEpoch; DescribeProducers shows it).
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence; sequences wrap from Int32.MAX to 0 as in Kafka."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


TopicPartition = tuple[str, int]


class ProducerStateManager:
    """Producer ids and sequence state for every partition of one data directory."""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._partitions: dict[TopicPartition, dict[int, ProducerEntry]] = {}
        self._txns: dict[TopicPartition, PartitionTxns] = {}
        self._next_id = 0
        self._block_end = 0
        self._max_seen_id = -1
        self._last_expiry_ms = 0
        # The snapshot is consumed: once read it is deleted, so a later crash (after
        # which the log may have been truncated and regrown) always replays the log.
        self._snapshot = self._read_snapshot()
        (self.data_dir / SNAPSHOT_FILE).unlink(missing_ok=True)
        block_path = self.data_dir / ID_BLOCK_FILE
        if block_path.exists():
            lines = block_path.read_text().split()
            self._next_id = self._block_end = int(lines[1])

    # ---- producer ids (InitProducerId) -------------------------------------------

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before by this data directory.

        Ids already present in the logs are skipped too (a data dir whose id-block file
        was lost must not reuse them), unless a client forged an id so large that
        skipping it would exhaust the int64 range.
        """
        if self._next_id <= self._max_seen_id < MAX_PRODUCER_ID - ID_BLOCK_SIZE:
            self._next_id = self._max_seen_id + 1
        if self._next_id >= self._block_end:
            self._block_end = self._next_id + ID_BLOCK_SIZE
            atomic_write_text(self.data_dir / ID_BLOCK_FILE, f"0\n{self._block_end}\n")
        pid = self._next_id
        self._next_id += 1
        return pid

    # ---- the produce path ---------------------------------------------------------

    def check(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        last_offset_delta: int,
        *,
        is_transactional: bool = False,
    ) -> Duplicate | None:
        """Validate a batch before it is appended; a ``Duplicate`` means do not append."""
        if producer_id == NO_PRODUCER_ID:
            if is_transactional:
                raise KafkaError(ErrorCode.INVALID_RECORD,
                                 "a transactional batch needs a producer id")
            return None
        if not is_transactional:
            txns = self._txns.get((topic, partition))
            if txns is not None and producer_id in txns.open:
                raise KafkaError(
                    ErrorCode.INVALID_TXN_STATE,
                    f"producer {producer_id} sent a non-transactional batch to {topic}-"
                    f"{partition} while its transaction there is open",
                )
        if base_sequence < 0:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"idempotent batch of producer {producer_id} has no base sequence",
            )
        entry = self._partitions.get((topic, partition), {}).get(producer_id)
        if entry is None:
            return None
        first_seq = base_sequence
        last_seq = last_sequence(base_sequence, last_offset_delta)
        dup = entry.find_duplicate(producer_epoch, first_seq, last_seq)
        if dup is not None:
            return Duplicate(dup.first_offset, dup.last_offset, dup.log_append_time_ms)
        if producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {producer_epoch} is older than {entry.epoch} "
                f"on {topic}-{partition}",
            )
        if producer_epoch != entry.epoch:
            if first_seq != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id} new epoch {producer_epoch} must start at "
                    f"sequence 0, got {first_seq} on {topic}-{partition}",
                )
        elif entry.batches and not in_sequence(entry.last_seq, first_seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} sequence {first_seq} does not follow "
                f"{entry.last_seq} on {topic}-{partition}",
            )
        return None

    def record(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        last_offset_delta: int,
        base_offset: int,
        last_offset: int,
        log_append_time_ms: int,
        *,
        now_ms: int,
    ) -> None:
        """Remember a batch that was just appended (no-op for non-idempotent batches)."""
        if producer_id == NO_PRODUCER_ID:
            return
        self._update(
            (topic, partition), producer_id, producer_epoch, base_sequence,
            last_offset_delta, base_offset, last_offset, log_append_time_ms, now_ms,
        )
        if now_ms - self._last_expiry_ms >= EXPIRY_CHECK_INTERVAL_MS:
            self.remove_expired(now_ms)

    def check_batch(
        self, topic: str, partition: int, header: BatchHeader
    ) -> Duplicate | None:
        """``check`` with the fields taken from a parsed batch header."""
        return self.check(
            topic, partition, header.producer_id, header.producer_epoch,
            header.base_sequence, header.last_offset_delta,
            is_transactional=bool(header.attributes & 0x10),
        )

    def record_batch(
        self,
        topic: str,
        partition: int,
        header: BatchHeader,
        base_offset: int,
        log_append_time_ms: int,
        *,
        now_ms: int,
    ) -> None:
        """``record`` with the fields taken from the header of the batch as sent."""
        if header.attributes & 0x10:
            txns = self._txns.setdefault((topic, partition), PartitionTxns())
            txns.open.setdefault(header.producer_id, base_offset)
        self.record(
            topic, partition, header.producer_id, header.producer_epoch,
            header.base_sequence, header.last_offset_delta, base_offset,
            base_offset + header.last_offset_delta, log_append_time_ms, now_ms=now_ms,
        )

    def _update(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        last_offset_delta: int,
        base_offset: int,
        last_offset: int,
        log_append_time_ms: int,
        seen_ms: int,
    ) -> None:
        producers = self._partitions.setdefault(tp, {})
        entry = producers.get(producer_id)
        if entry is None or entry.epoch != producer_epoch:
            # A new epoch starts a fresh sequence history; the coordinator epoch stays.
            entry = ProducerEntry(producer_epoch, seen_ms, coordinator_epoch=(
                -1 if entry is None else entry.coordinator_epoch))
            producers[producer_id] = entry
        entry.last_seen_ms = max(entry.last_seen_ms, seen_ms)
        entry.batches.append(
            BatchMetadata(
                base_sequence, last_sequence(base_sequence, last_offset_delta),
                base_offset, last_offset, log_append_time_ms,
            )
        )
        if producer_id > self._max_seen_id:
            self._max_seen_id = producer_id

    # ---- lifetime ----------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> int:
        """Drop producers idle longer than producer.id.expiration.ms; returns how many."""
        self._last_expiry_ms = now_ms
        removed = 0
        for tp, producers in self._partitions.items():
            txns = self._txns.get(tp)
            busy = txns.open if txns is not None else {}
            stale = [
                pid for pid, e in producers.items()
                if now_ms - e.last_seen_ms >= self.producer_id_expiration_ms and pid not in busy
            ]
            for pid in stale:
                del producers[pid]
            removed += len(stale)
        return removed

    def drop_partition(self, topic: str, partition: int) -> None:
        """Forget a partition (its topic was deleted)."""
        self._partitions.pop((topic, partition), None)
        self._txns.pop((topic, partition), None)
        self._snapshot.pop((topic, partition), None)

    def restore_partition(
        self,
        topic: str,
        partition: int,
        log_start_offset: int,
        log_end_offset: int,
        read_headers: Callable[[int], Iterable[BatchHeader]],
        control_type: Callable[[BatchHeader], int | None] | None = None,
    ) -> None:
        """Rebuild a partition's state when its log is opened.

        ``read_headers(offset)`` must yield the headers of the log's batches in offset
        order, starting with the batch that contains ``offset`` (or the first batch at
        or after it); ``control_type(header)`` reads a control batch's marker type (0
        ABORT, 1 COMMIT). If the clean-shutdown snapshot covers this partition at an
        offset inside the log, it is loaded and only later batches are replayed;
        otherwise the whole log is replayed, so the result never depends on the snapshot
        being there. Open and aborted transactions are rebuilt the same way.
        """
        tp = (topic, partition)
        self._partitions.pop(tp, None)
        self._txns.pop(tp, None)
        start = log_start_offset
        snap = self._snapshot.pop(tp, None)
        if snap is not None and log_start_offset <= snap.offset <= log_end_offset:
            self._partitions[tp] = snap.producers
            if snap.txns.open or snap.txns.aborted:
                self._txns[tp] = snap.txns
            for pid in snap.producers:
                self._max_seen_id = max(self._max_seen_id, pid)
            start = snap.offset
        for h in read_headers(start):
            last_offset = h.base_offset + h.last_offset_delta
            if last_offset < start or h.producer_id == NO_PRODUCER_ID:
                continue
            if h.attributes & 0x20:  # control batches carry no data sequence
                kind = control_type(h) if control_type is not None else None
                if kind is not None:
                    # Chronolog writes every marker with one coordinator epoch (0), the
                    # complete_txn default: the header alone replays it.
                    self.complete_txn(topic, partition, h.producer_id, h.producer_epoch,
                                      kind == 1, h.base_offset, now_ms=max(h.max_timestamp, 0))
                continue
            if h.attributes & 0x10:
                txns = self._txns.setdefault(tp, PartitionTxns())
                txns.open.setdefault(h.producer_id, h.base_offset)
            log_append_time = h.max_timestamp if h.attributes & 0x08 else -1
            self._update(
                tp, h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                h.base_offset, last_offset, log_append_time, max(h.max_timestamp, 0),
            )

    # ---- transactions ---------------------------------------------------------------

    def complete_txn(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, marker_offset: int, *, now_ms: int,
                     coordinator_epoch: int = 0) -> AbortedTxn | None:
        """A COMMIT/ABORT marker at ``marker_offset`` was appended: close the producer's
        open transaction there (if any); an abort is added to the aborted list and
        returned. The producer's epoch on the partition moves up to the marker's (a
        fenced producer's later batches get INVALID_PRODUCER_EPOCH)."""
        tp = (topic, partition)
        producers = self._partitions.setdefault(tp, {})
        entry = producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            entry = producers[producer_id] = ProducerEntry(producer_epoch, now_ms)
        entry.coordinator_epoch = coordinator_epoch
        if producer_id > self._max_seen_id:
            self._max_seen_id = producer_id
        txns = self._txns.get(tp)
        if txns is None:
            return None
        first = txns.open.pop(producer_id, None)
        if first is None or commit:
            return None
        lso = min(txns.open.values(), default=marker_offset + 1)
        aborted = AbortedTxn(producer_id, first, marker_offset, lso)
        txns.aborted.append(aborted)
        return aborted

    def last_stable_offset(self, topic: str, partition: int, high_watermark: int,
                           log_start_offset: int = 0) -> int:
        """Kafka's LSO: the first offset of the oldest open transaction (never below the
        log start), else the high watermark."""
        txns = self._txns.get((topic, partition))
        if txns is None or not txns.open:
            return high_watermark
        return min(max(min(txns.open.values()), log_start_offset), high_watermark)

    def aborted_transactions(self, topic: str, partition: int, fetch_offset: int,
                             upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch from ``fetch_offset`` up to
        ``upper_offset`` must carry (Kafka's ``collectAbortedTxns``): marker offset >=
        fetch offset and first offset < upper bound, stopping at the first entry whose
        stored LSO reaches the upper bound."""
        txns = self._txns.get((topic, partition))
        if txns is None or not txns.aborted:
            return []
        entries = txns.aborted
        lo, hi = 0, len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if entries[mid].last_offset < fetch_offset:
                lo = mid + 1
            else:
                hi = mid
        out = []
        for e in entries[lo:]:
            if e.first_offset < upper_offset:
                out.append(e)
            if e.last_stable_offset >= upper_offset:
                break
        return out

    def replace_aborted(self, topic: str, partition: int, low: int, high: int,
                        entries: Iterable[AbortedTxn]) -> None:
        """The log cleaner rewrote the offsets [low, high): its aborted transactions are
        now ``entries`` (the cleaned segment's ``.txnindex``; those whose data the
        clean removed are gone), in marker order like the rest of the list."""
        txns = self._txns.get((topic, partition))
        new = sorted(entries, key=lambda e: e.last_offset)
        if txns is None:
            if new:
                self._txns[(topic, partition)] = PartitionTxns(aborted=new)
            return
        old = txns.aborted
        txns.aborted = [e for e in old if e.last_offset < low] + new + \
            [e for e in old if e.last_offset >= high]

    def aborted_list(self, topic: str, partition: int) -> list[AbortedTxn]:
        """Every aborted transaction the partition's state holds, by marker offset."""
        txns = self._txns.get((topic, partition))
        return list(txns.aborted) if txns is not None else []

    def open_txn_start(self, topic: str, partition: int, producer_id: int) -> int:
        """First offset of the producer's open transaction on the partition, else -1."""
        txns = self._txns.get((topic, partition))
        return txns.open.get(producer_id, -1) if txns is not None else -1

    def write_snapshot(self, end_offsets: dict[TopicPartition, int]) -> None:
        """Persist every partition's state at its log end offset (on clean shutdown)."""
        parts = []
        for tp, offset in end_offsets.items():
            producers = self._partitions.get(tp, {})
            txns = self._txns.get(tp, PartitionTxns())
            parts.append({
                "topic": tp[0],
                "partition": tp[1],
                "offset": offset,
                "open_txns": [[pid, first] for pid, first in txns.open.items()],
                "aborted_txns": [list(a) for a in txns.aborted],
                "producers": [
                    {
                        "id": pid,
                        "epoch": e.epoch,
                        "last_seen_ms": e.last_seen_ms,
                        "coordinator_epoch": e.coordinator_epoch,
                        "batches": [list(b) for b in e.batches],
                    }
                    for pid, e in producers.items()
                ],
            })
        doc = {"version": SNAPSHOT_VERSION, "partitions": parts}
        atomic_write_text(self.data_dir / SNAPSHOT_FILE, json.dumps(doc, separators=(",", ":")))

    def _read_snapshot(self) -> dict[TopicPartition, _Snapshot]:
        path = self.data_dir / SNAPSHOT_FILE
        if not path.exists():
            return {}
        try:
            doc = json.loads(path.read_text())
            if doc.get("version") != SNAPSHOT_VERSION:
                return {}
            out: dict[TopicPartition, _Snapshot] = {}
            for p in doc["partitions"]:
                producers: dict[int, ProducerEntry] = {}
                for pr in p["producers"]:
                    e = ProducerEntry(int(pr["epoch"]), int(pr["last_seen_ms"]),
                                      coordinator_epoch=int(pr.get("coordinator_epoch", -1)))
                    e.batches.extend(BatchMetadata(*map(int, b)) for b in pr["batches"])
                    producers[int(pr["id"])] = e
                txns = PartitionTxns(
                    {int(pid): int(first) for pid, first in p["open_txns"]},
                    [AbortedTxn(*map(int, a)) for a in p["aborted_txns"]],
                )
                out[(str(p["topic"]), int(p["partition"]))] = _Snapshot(
                    int(p["offset"]), producers, txns)
            return out
        except (ValueError, KeyError, TypeError):
            # An unreadable snapshot is only an optimisation lost: the log is replayed.
            return {}

    # ---- introspection (tests, metrics) ------------------------------------------

    def producer_count(self) -> int:
        return sum(len(p) for p in self._partitions.values())

    def entry(self, topic: str, partition: int, producer_id: int) -> ProducerEntry | None:
        return self._partitions.get((topic, partition), {}).get(producer_id)

    def on_log_start_moved(self, topic: str, partition: int, log_start_offset: int) -> None:
        """Forget the aborted transactions wholly below a new log start. Producers stay:
        since KIP-360 Kafka keeps a producer's state until it expires
        (``producer.id.expiration.ms``), however far DeleteRecords or retention move the
        log start, so a retried batch is still answered as the duplicate it is."""
        txns = self._txns.get((topic, partition))
        if txns is not None:
            txns.aborted = [a for a in txns.aborted if a.last_offset >= log_start_offset]

    def active(self, topic: str, partition: int) -> dict[int, ProducerEntry]:
        """Producer id -> state of every producer still tracked on the partition
        (DescribeProducers)."""
        return dict(self._partitions.get((topic, partition), {}))


class _Snapshot(NamedTuple):
    offset: int
    producers: dict[int, ProducerEntry]
    txns: PartitionTxns
