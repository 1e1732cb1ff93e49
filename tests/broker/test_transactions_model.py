"""A hypothesis state machine over one partition with interleaved transactional
producers (commit, abort, timeout), plain appends, clean restarts and crashes
(reopening without close, as after kill -9): every Fetch under both isolation levels
and every ListOffsets (timestamps, LATEST, EARLIEST, MAX_TIMESTAMP) equals an oracle
built from Kafka's rules (transactions-facts §3-§5).

The parts are the broker's own, in process: ``PartitionManager`` (real logs in a temp
dir), ``TransactionService`` with its coordinator and durable store, and the Fetch and
ListOffsets handlers' partition functions. Fetched bytes are filtered as Kafka's
consumer does (``CompletedFetch``): the aborted list, markers never delivered.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.config import BrokerConfig
from broker.handlers import list_offsets
from broker.handlers.fetch import read_partitions
from broker.partitions import PartitionManager
from broker.txn.service import TransactionService
from protocol.messages import ListOffsetsRequestTopicsPartitions
from storage.records import Record, build_batch, decode_batch, iter_batches

TOPIC = "m"
TIMEOUT_MS = 10_000
BASE = 1_700_000_000_000


@dataclass
class Entry:
    """One offset of the log as the oracle sees it."""

    ts: int
    control: bool
    txn: int | None  # which transaction a transactional data record belongs to
    value: bytes


@dataclass
class Slot:
    txn_id: str
    pid: int = -1
    epoch: int = -1
    seq: int = 0
    open_txn: int | None = None  # oracle transaction number while ongoing


class TxnModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="txn-model-"))
        self.clock = BASE
        self.entries: list[Entry] = []
        self.open_first: dict[int, int] = {}  # txn number -> first offset
        self.aborted: set[int] = set()
        self.next_txn = 0
        self.slots = [Slot("a"), Slot("b")]
        self.values = 0
        self._open(create=True)

    # ---- plumbing -----------------------------------------------------------------

    def _open(self, create: bool = False) -> None:
        cfg = BrokerConfig(log_dirs=str(self.dir), log_segment_bytes=600)
        self.pm = PartitionManager(cfg)
        self.pm.open(None)
        if create:
            self.pm.create_topic(TOPIC, 1)
        self.svc = TransactionService(self.pm, None, max_timeout_ms=900_000,
                                      clock=lambda: self.clock)
        asyncio.run(self.svc.open())

    def teardown(self) -> None:
        self.svc.close()
        self.pm.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def _value(self) -> bytes:
        self.values += 1
        return b"v%d" % self.values

    # ---- rules --------------------------------------------------------------------

    @rule(deltas=st.lists(st.integers(-5, 5), min_size=1, max_size=4))
    def plain_append(self, deltas: list[int]) -> None:
        now = self._tick()
        recs = [Record(0, now + d, None, self._value(), []) for d in deltas]
        base = self.pm.append(TOPIC, 0, build_batch(recs), now).base_offset
        assert base == len(self.entries)
        self.entries += [Entry(r.timestamp, False, None, r.value or b"") for r in recs]

    @rule(which=st.integers(0, 1), deltas=st.lists(st.integers(-5, 5), min_size=1, max_size=3))
    def txn_append(self, which: int, deltas: list[int]) -> None:
        slot = self.slots[which]
        now = self._tick()
        coord = self.svc.coordinator
        if slot.pid < 0:
            r = coord.init_producer_id(slot.txn_id, TIMEOUT_MS, -1, -1, 4, now)
            assert r.error == 0
            slot.pid, slot.epoch, slot.seq = r.producer_id, r.producer_epoch, 0
        if slot.open_txn is None:
            assert coord.add_partitions(slot.txn_id, slot.pid, slot.epoch, [(TOPIC, 0)], 3,
                                        now) == 0
            slot.open_txn = self.next_txn
            self.next_txn += 1
        recs = [Record(0, now + d, None, self._value(), []) for d in deltas]
        batch = build_batch(recs, producer_id=slot.pid, producer_epoch=slot.epoch,
                            base_sequence=slot.seq, is_transactional=True)
        base = self.pm.append(TOPIC, 0, batch, now).base_offset
        assert base == len(self.entries)
        slot.seq += len(recs)
        self.open_first.setdefault(slot.open_txn, base)
        self.entries += [Entry(r.timestamp, False, slot.open_txn, r.value or b"") for r in recs]

    @precondition(lambda self: any(s.open_txn is not None for s in self.slots))
    @rule(which=st.integers(0, 1), commit=st.booleans())
    def end(self, which: int, commit: bool) -> None:
        slot = next(s for s in self.slots[which:] + self.slots[:which] if s.open_txn is not None)
        now = self._tick()
        result = self.svc.coordinator.end_txn(slot.txn_id, slot.pid, slot.epoch, commit, 3, now)
        assert result.error == 0 and result.completion is not None
        asyncio.run(self.svc.finish(result.completion))
        self._marker(slot, commit, now)

    @precondition(lambda self: any(s.open_txn is not None for s in self.slots))
    @rule()
    def time_out(self) -> None:
        opened = [s for s in self.slots if s.open_txn is not None]
        self.clock += TIMEOUT_MS + 1
        now = self.clock
        assert asyncio.run(self.svc.abort_timed_out(now)) == len(opened)
        for slot in opened:
            self._marker(slot, False, now)
            slot.pid = -1  # fenced: the next use re-initialises (a new epoch)

    def _marker(self, slot: Slot, commit: bool, ts: int) -> None:
        assert slot.open_txn is not None
        self.entries.append(Entry(ts, True, None, b""))
        self.open_first.pop(slot.open_txn, None)
        if not commit:
            self.aborted.add(slot.open_txn)
        slot.open_txn = None

    @rule(crash=st.booleans())
    def restart(self, crash: bool) -> None:
        if crash:
            self.svc.store.close()  # the process dies: nothing else is closed cleanly
            if self.pm.logdir is not None:
                for plog in self.pm.logdir.logs().values():
                    plog.flush()
        else:
            self.svc.close()
            self.pm.close()
        self._open()

    # ---- the oracle ---------------------------------------------------------------

    def lso(self) -> int:
        return min(self.open_first.values(), default=len(self.entries))

    def delivered(self, committed: bool) -> list[tuple[int, bytes]]:
        bound = self.lso() if committed else len(self.entries)
        return [(o, e.value) for o, e in enumerate(self.entries[:bound])
                if not e.control and not (committed and e.txn in self.aborted)]

    def lookup(self, ts: int, committed: bool) -> tuple[int, int]:
        for o, e in enumerate(self.entries):
            if e.ts >= ts:
                if committed and o >= self.lso():
                    return -1, -1
                return e.ts, o
        return -1, -1

    def max_timestamp(self, committed: bool) -> tuple[int, int]:
        if not self.entries:
            return -1, -1
        best = max(e.ts for e in self.entries)
        o = next(i for i, e in enumerate(self.entries) if e.ts == best)
        if committed and o >= self.lso():
            return -1, -1
        return best, o

    # ---- the broker's answers -----------------------------------------------------------

    def fetch_all(self, committed: bool) -> list[tuple[int, bytes]]:
        ctx = SimpleNamespace(partitions=self.pm, config=SimpleNamespace(fetch_max_bytes=10**8),
                              broker=SimpleNamespace(tier=None))  # no remote tier
        offset, out = 0, []
        while True:
            body = SimpleNamespace(isolation_level=int(committed), max_bytes=300, topics=[
                SimpleNamespace(topic=TOPIC, partitions=[SimpleNamespace(
                    partition=0, current_leader_epoch=-1, fetch_offset=offset,
                    partition_max_bytes=300)])])
            responses, _, errors = read_partitions(body, ctx)  # type: ignore[arg-type]
            assert not errors
            part = responses[0]["partitions"][0]
            assert part["last_stable_offset"] == self.lso()
            data = part["records"]
            if not data:
                return out
            if not committed:
                assert part["aborted_transactions"] is None
            out += consumer_filter(data, part["aborted_transactions"] or [], offset)
            last = [h for _, h in iter_batches(data)][-1]
            offset = last.base_offset + last.last_offset_delta + 1

    def list_offset(self, ts: int, committed: bool) -> tuple[int, int]:
        p = ListOffsetsRequestTopicsPartitions(partition_index=0, timestamp=ts, current_leader_epoch=-1)
        a = list_offsets._partition(self.pm, TOPIC, p, 7, set(), committed)
        assert a["error_code"] == 0
        return a["timestamp"], a["offset"]

    @invariant()
    def reads_match_the_oracle(self) -> None:
        for committed in (False, True):
            assert self.fetch_all(committed) == self.delivered(committed)
            assert self.list_offset(-1, committed) == (
                -1, self.lso() if committed else len(self.entries))
            assert self.list_offset(-2, committed) == (-1, 0)
            assert self.list_offset(-3, committed) == self.max_timestamp(committed)
            probes = {e.ts for e in self.entries} | {e.ts + 1 for e in self.entries} | {0}
            for ts in sorted(probes):
                assert self.list_offset(ts, committed) == self.lookup(ts, committed), ts

    @invariant()
    def txnindex_files_hold_what_fetch_serves(self) -> None:
        """The .txnindex files on disk (what Kafka's tools read) are the aborted list
        that read_committed fetches, checked above against the oracle, are served from;
        one entry per aborted transaction, at its ABORT marker."""
        assert self.pm.producers is not None and self.pm.logdir is not None
        plog = self.pm.logdir.logs()[(TOPIC, 0)]
        on_disk = plog.aborted_txns_on_disk()
        assert on_disk == self.pm.producers.aborted_list(TOPIC, 0)
        markers = [o for o, e in enumerate(self.entries) if e.control]
        assert len(on_disk) == len(self.aborted) and {e.last_offset for e in on_disk} <= set(markers)


def consumer_filter(data: bytes, aborted: list[dict[str, int]],
                    fetch_offset: int) -> list[tuple[int, bytes]]:
    """Kafka's consumer (``CompletedFetch``): whole batches, aborted transactions skipped,
    control records never delivered; only records at or after the fetch offset."""
    pending = sorted(aborted, key=lambda a: a["first_offset"])
    aborted_pids: set[int] = set()
    out = []
    for pos, h in iter_batches(data):
        last = h.base_offset + h.last_offset_delta
        while pending and pending[0]["first_offset"] <= last:
            aborted_pids.add(pending.pop(0)["producer_id"])
        if h.attributes & 0x20:
            if decode_batch(data, pos)[0].key == b"\x00\x00\x00\x00":  # ABORT
                aborted_pids.discard(h.producer_id)
            continue
        if h.attributes & 0x10 and h.producer_id in aborted_pids:
            continue
        out += [(r.offset, r.value or b"") for r in decode_batch(data, pos)
                if r.offset >= fetch_offset]
    return out


TxnModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_transactions_match_kafkas_rules = TxnModel.TestCase
