"""Log compaction against an oracle: a hypothesis state machine.

The machine appends random keyed batches (repeated keys, tombstones, every codec,
out-of-order timestamps, CreateTime or LogAppendTime) to a compacted log with small
segments and indexes, and interleaves cleans at an advancing clock (with a small or
a large key map, min.compaction.lag.ms and delete.retention.ms drawn per run), clean
and unclean restarts, and crashes injected between the cleaner's file steps.

The oracle is a plain list of every produced record, each batch with its delete
horizon. Its clean is the rule in storage/cleaner.py's docstring, computed by brute
force over that list: the key map over the dirty range in offset order until it is
full, then every record below the map's end that is not its key's latest, every
record without a key, and every tombstone whose batch horizon has passed, go.
Segment boundaries (and the mtime of a segment left empty) come from the log; every
record's presence, offset, key, value, timestamp and headers, every batch's base and
last offset, and the horizon bits are the oracle's. After each step: the log's
records equal the oracle's, every time lookup equals the first surviving offset
with timestamp >= T, MAX_TIMESTAMP and EARLIEST agree, and both indexes of every
segment pass their sanity checks. A crash leaves the old view or the new one (or,
when several groups were being committed, the new view up to a segment boundary and
the old one after it: groups commit in offset order, each at its own commit point).
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from broker.producers import ProducerStateManager
from storage import swap
from storage.cleaner import ENTRY_OVERHEAD, CleanerSettings, clean_log
from storage.config import LogConfig
from storage.errors import InvalidRecordError
from storage.log import MAX_TIMESTAMP, Log
from storage.records import (
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Record,
    build_batch,
    control_type,
    decode_batch,
    parse_header,
)
from storage.txnindex import TxnIndexEntry

T0 = 1_700_000_000_000
KEYS = [f"k{i}".encode() for i in range(8)] + [b"", b"a-longer-key-" * 3]
COMMIT_KEY, ABORT_KEY = b"\x00\x00\x00\x01", b"\x00\x00\x00\x00"  # version 0 + type
MARKER_VALUE = b"\x00\x00\x00\x00\x00\x03"  # version 0 + coordinator epoch 3
STEPS = ["cleaned", "swap.index", "swap.timeindex", "swap.replaces", "log-swapped",
         "committed", "renamed.index", "renamed.timeindex", "renamed.log"]


class Crash(Exception):
    pass


@dataclasses.dataclass
class MRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    ts: int
    headers: list[tuple[str, bytes | None]]
    present: bool = True


@dataclasses.dataclass
class MBatch:
    base: int
    last: int
    records: list[MRecord]
    horizon: int | None = None
    producer: int = -1
    empty: bool = False  # every record went; kept as an empty batch for its producer
    txn: int = -1  # the transaction the batch (data or marker) belongs to
    control: bool = False
    epoch: int = 0

    def alive(self) -> bool:
        return any(r.present for r in self.records)

    def in_log(self) -> bool:
        return self.alive() or self.empty


class CompactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="chronolog-compact-"))
        self.batches: list[MBatch] = []
        self.now = T0 + 10_000
        self.checkpoint: int | None = None
        self.log: Log | None = None
        self.sequences: dict[int, int] = {}
        # Transactions: producer id -> (transaction, first offset) of the open ones; the
        # aborted ones; their .txnindex entries (the broker's aborted list).
        self.open_txns: dict[int, tuple[int, int]] = {}
        self.aborted: set[int] = set()
        self.aborted_entries: list[TxnIndexEntry] = []
        self.txn_count = 0
        self.epochs: dict[int, int] = {}  # a coordinator's abort may bump an epoch

    def teardown(self) -> None:
        swap.crash_hook = None
        if self.log is not None:
            for s in self.log.segments:
                s.release()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ setup

    @initialize(
        segment_bytes=st.sampled_from([700, 1500, 4000]),
        interval=st.sampled_from([0, 100, 600]),
        index_bytes=st.sampled_from([72, 240, 4096]),
        min_lag=st.sampled_from([0, 0, 300]),
        retention=st.sampled_from([0, 200, 1000]),
        log_append_time=st.booleans(),
        small_map=st.booleans(),
    )
    def setup(self, segment_bytes: int, interval: int, index_bytes: int, min_lag: int,
              retention: int, log_append_time: bool, small_map: bool) -> None:
        self.config = LogConfig.from_kafka({
            "cleanup.policy": "compact",
            "segment.bytes": str(segment_bytes),
            "index.interval.bytes": str(interval),
            "segment.index.bytes": str(index_bytes),
            "min.compaction.lag.ms": str(min_lag),
            "delete.retention.ms": str(retention),
            "message.timestamp.type": "LogAppendTime" if log_append_time else "CreateTime",
            "message.timestamp.before.max.ms": str(1 << 50),
        })
        budget = (ENTRY_OVERHEAD + 3) * 4 if small_map else 1 << 20
        self.settings = CleanerSettings(dedupe_buffer_bytes=budget, load_factor=1.0)
        self.log = Log(self.tmp / "t-0", self.config)

    # ------------------------------------------------------------ rules

    @rule(data=st.data(), n=st.integers(1, 6), codec=st.sampled_from([0, 0, 1, 2, 3, 4]),
          keyless=st.booleans(), producer=st.sampled_from([-1, -1, 1, 2]))
    def append(self, data: st.DataObject, n: int, codec: int, keyless: bool, producer: int) -> None:
        self._append(data, n, codec, keyless, producer, -1)

    def _append(self, data: st.DataObject, n: int, codec: int, keyless: bool, producer: int,
                txn: int) -> None:
        """Append one batch of n random records (of transaction ``txn`` when >= 0)."""
        assert self.log is not None
        recs = []
        for _ in range(n):
            key = data.draw(st.sampled_from(KEYS))
            value = data.draw(st.one_of(st.none(), st.binary(max_size=12)))
            ts = self.now - 2000 + data.draw(st.integers(0, 2500))
            headers = data.draw(st.sampled_from([[], [("h", b"x")], [("h", None)]]))
            recs.append((key, value, ts, headers))
        if keyless:
            recs[0] = (None, *recs[0][1:])
        seq = self.sequences.get(producer, 0)
        epoch = self.epochs.get(producer, 0)
        batch = build_batch([Record(i, ts, k, v, h) for i, (k, v, ts, h) in enumerate(recs)],
                            compression=codec, producer_id=producer,
                            producer_epoch=epoch if producer >= 0 else -1,
                            base_sequence=seq if producer >= 0 else -1,
                            is_transactional=txn >= 0)
        base = self.log.log_end_offset
        if keyless:
            with pytest.raises(InvalidRecordError):
                self.log.append(batch, now_ms=self.now)
            return
        result = self.log.append(batch, now_ms=self.now)
        assert result.base_offset == base
        if producer >= 0:
            self.sequences[producer] = seq + n
        lat = self.config.log_append_time
        self.batches.append(MBatch(base, base + n - 1, [
            MRecord(base + i, k, v, result.max_timestamp if lat else ts, h)
            for i, (k, v, ts, h) in enumerate(recs)], producer=producer, txn=txn,
            epoch=max(epoch, 0)))

    @rule(data=st.data())
    def append_keyless_as_is(self, data: st.DataObject) -> None:
        """Records without a key, as a topic switched from delete to compact holds."""
        assert self.log is not None
        if self.config.log_append_time:
            return
        base = self.log.log_end_offset
        ts = self.now - data.draw(st.integers(0, 500))
        self.log.append_as_is(build_batch([Record(0, ts, None, b"nokey", [])], base_offset=base),
                              now_ms=self.now)
        self.batches.append(MBatch(base, base, [MRecord(base, None, b"nokey", ts, [])]))

    @rule(ms=st.integers(1, 700))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule()
    def roll(self) -> None:
        assert self.log is not None
        self.log.roll(self.now)

    @rule()
    def clean(self) -> None:
        assert self.log is not None
        expected_next = self._oracle_clean()
        got = clean_log(self.log, self.checkpoint, self.now, self.settings, force=True,
                        last_stable_offset=self._lso())
        if got is not None:
            assert got == expected_next
            self.checkpoint = got
        self._rebuild_and_sync(restart=False)

    @rule(step=st.sampled_from(STEPS))
    def crash_while_cleaning(self, step: str) -> None:
        assert self.log is not None
        before = copy.deepcopy(self.batches)
        before_entries = self.aborted_entries
        old_checkpoint = self.checkpoint
        self._oracle_clean()
        after = self.batches
        after_entries = self.aborted_entries

        def hook(name: str) -> None:
            if name == step:
                raise Crash(name)

        swap.crash_hook = hook
        crashed = False
        got = None
        try:
            got = clean_log(self.log, self.checkpoint, self.now, self.settings, force=True,
                            last_stable_offset=self._lso())
        except Crash:
            crashed = True
        finally:
            swap.crash_hook = None
        if not crashed:  # the step was never reached: nothing to clean, or no such step
            if got is None:
                self.batches = before
                self.aborted_entries = before_entries
            else:
                self.checkpoint = got
            return
        # A crash: abandon the Log object (no close, no flush, no marker) and load the
        # directory as after a kill -9.
        for s in self.log.segments:
            s.release()
        self.log = Log(self.tmp / "t-0", self.config, clean_shutdown=False, recovery_point=0)
        view = self._sut_view()
        bases = [s.base_offset for s in self.log.segments] + [1 << 62]
        for split in bases:
            mixed = [copy.deepcopy(b) for b in after if b.base < split] + \
                    [copy.deepcopy(b) for b in before if b.base >= split]
            if view == self._model_view(mixed):
                self.batches = mixed
                self.aborted_entries = [e for e in after_entries if e.last_offset < split] + \
                    [e for e in before_entries if e.last_offset >= split]
                break
        else:
            raise AssertionError(f"crash at {step} left neither the old nor the new segments")
        self._rebuild_and_sync()
        self.checkpoint = old_checkpoint  # the checkpoint is written after a commit

    @rule(unclean=st.booleans())
    def restart(self, unclean: bool) -> None:
        self._reopen(unclean)

    def _reopen(self, unclean: bool) -> None:
        assert self.log is not None
        if unclean:
            self.log.flush()
            for s in self.log.segments:
                s.release()
            self.log = Log(self.tmp / "t-0", self.config, clean_shutdown=False, recovery_point=0)
            assert self.log.recovered_bytes_cut == 0  # the gap rule accepts compacted segments
        else:
            self.log.close()
            self.log = Log(self.tmp / "t-0", self.config)
        self._rebuild_and_sync()

    def _rebuild_and_sync(self, restart: bool = True) -> None:
        """What the broker does at start: rebuild producer and transaction state from the
        log (broker/producers.py, no snapshot), then make the ``.txnindex`` files say the
        same. The rebuilt aborted list must hold no entry the oracle dropped (a clean
        that dropped one is not undone) and every producer keeps its epoch, sequence
        and open transaction (a fencing marker or a last batch the cleaner kept)."""
        assert self.log is not None
        log = self.log
        kinds: dict[int, int | None] = {}

        def headers(_offset: int) -> Iterator[BatchHeader]:
            for seg in log.segments:
                for info in seg.iter_batches(0):
                    raw = seg.pread(info.position, info.size)
                    h = parse_header(raw, 0)
                    if h.attributes & CONTROL_MASK:
                        kinds[h.base_offset] = control_type(raw)
                    yield h

        state = ProducerStateManager(self.tmp / "producer-state")
        state.restore_partition("t", 0, log.log_start_offset, log.log_end_offset, headers,
                                lambda h: kinds.get(h.base_offset))
        rebuilt = state.aborted_list("t", 0)
        # No entry the cleaner dropped comes back; a rebuilt entry starts at the first
        # batch left of its transaction, which may be later. The rebuild may drop an
        # entry the files still hold only when no data of its transaction is left (a
        # crash committed the clean's earlier group but not the marker's, or the key
        # map ended between the data and the marker).
        kept = {(e.producer_id, e.last_offset): e for e in self.aborted_entries}
        for r in rebuilt:
            e = kept.get((r.producer_id, r.last_offset))
            assert e is not None and r.first_offset >= e.first_offset, r
        txn_of = {b.base: b.txn for b in self.batches if b.control}
        left = {b.txn for b in self.batches
                if not b.control and b.in_log() and b.last >= log.log_start_offset}
        found = {(r.producer_id, r.last_offset) for r in rebuilt}
        assert all(txn_of[last] not in left for pid, last in kept if (pid, last) not in found)
        for producer, (_txn, first) in self.open_txns.items():
            assert state.open_txn_start("t", 0, producer) == first
        for producer, seq in self.sequences.items():
            entry = state.entry("t", 0, producer)
            assert entry is not None and entry.epoch == self.epochs.get(producer, 0), producer
            assert entry.last_seq == seq - 1, producer
        if restart:
            self.aborted_entries = rebuilt  # the broker's list and files from now on
            log.sync_aborted_txns(rebuilt)

    def _lso(self) -> int:
        """The last stable offset: the first offset of the oldest open transaction."""
        assert self.log is not None
        return min((first for _, first in self.open_txns.values()),
                   default=self.log.log_end_offset)

    # ------------------------------------------------------------ the oracle's clean

    def _oracle_clean(self) -> int:
        """Apply the cleaner's rule to the model; returns the next dirty offset."""
        assert self.log is not None
        log = self.log
        segs = log.segments
        start = log.log_start_offset
        dirty = self.checkpoint if self.checkpoint is not None and \
            start <= self.checkpoint <= log.log_end_offset else start
        stop = min(log.active.base_offset, self._lso())
        bounds = [(s.base_offset, segs[i + 1].base_offset) for i, s in enumerate(segs[:-1])]
        lag = self.config.min_compaction_lag_ms
        if lag > 0:
            for (base, upper), seg in zip(bounds, segs, strict=False):
                if upper <= dirty:
                    continue
                recs = [r for b in self.batches for r in b.records
                        if r.present and base <= r.offset < upper]
                largest = max((r.ts for r in recs), default=-1) if recs else seg.largest_timestamp()
                if largest > self.now - lag:
                    stop = min(stop, base)
                    break
        stop = max(stop, dirty)
        # The key map: every keyed record from the dirty start in offset order, each
        # new key costing ENTRY_OVERHEAD + len(key) of the budget; whole batches only.
        latest_of: dict[bytes, int] = {}
        used = 0
        latest = dirty - 1
        full = False
        for base, upper in bounds:
            if full or upper <= dirty or base >= stop:
                continue
            for b in self.batches:
                if not (base <= b.base < upper) or not b.in_log() or b.last < dirty:
                    continue
                if b.base >= stop:
                    break  # the LSO inside this segment
                # Markers and aborted data put no key in the map; a batch goes in whole
                # or not at all (then the map is full and ends before it).
                mapped = [] if b.control or b.txn in self.aborted else [
                    r for r in b.records if r.present and r.key is not None and r.offset >= dirty]
                fresh = {r.key for r in mapped if r.key not in latest_of}
                cost = sum(ENTRY_OVERHEAD + len(k) for k in fresh if k is not None)
                if used + cost > self.settings.map_budget:
                    full = True
                    break
                used += cost
                latest_of.update((r.key, r.offset) for r in mapped if r.key is not None)
                latest = max(latest, b.last)
            if not full:
                latest = max(latest, min(upper, stop) - 1)
        end = latest + 1
        rewritten = [b for b in self.batches if b.in_log() and any(
            base <= b.base < upper for base, upper in bounds if base < end)]
        last_of = {b.producer: b.base for b in rewritten if b.producer >= 0 and not b.control}
        # A producer's fencing marker: its last batch here is a marker with a higher
        # epoch than its last data batch here (or it has none): it stays.
        fencing: dict[int, int] = {}
        for b in rewritten:
            if b.producer < 0:
                continue
            if not b.control:
                fencing.pop(b.producer, None)
            elif b.epoch > max((d.epoch for d in rewritten if not d.control
                                and d.producer == b.producer and d.base < b.base), default=-1):
                fencing[b.producer] = b.base
            else:
                fencing.pop(b.producer, None)
        first_left: dict[int, int] = {}  # producer -> its first transactional batch left
        entries = {(e.producer_id, e.last_offset): e for e in self.aborted_entries}
        start = log.log_start_offset
        for b in rewritten:
            if b.control:
                first = first_left.pop(b.producer, None)
                entry = entries.pop((b.producer, b.base), None)
                if first is not None and entry is not None:
                    entries[(b.producer, b.base)] = entry
                if first is not None or b.base > latest or fencing.get(b.producer) == b.base:
                    continue  # data of its transaction is left, or not this clean's to decide
                if b.horizon is None:
                    b.horizon = self.now + self.config.delete_retention_ms
                elif self.now >= b.horizon:
                    b.records[0].present = False
                continue
            self._oracle_clean_batch(b, latest, latest_of, last_of)
            if b.txn >= 0 and b.in_log() and b.last >= start:
                first_left.setdefault(b.producer, b.base)
        self.aborted_entries = sorted(entries.values(), key=lambda e: e.last_offset)
        return max(end, dirty)

    def _oracle_clean_batch(self, b: MBatch, latest: int, latest_of: dict[bytes, int],
                            last_of: dict[int, int]) -> None:
        """The cleaner's rule for one data batch of the rewritten segments."""
        b.empty = False
        if b.txn in self.aborted and b.last <= latest:
            for r in b.records:
                r.present = False
        passed = b.horizon is not None and self.now >= b.horizon
        tombstones = False
        for r in b.records:
            if not r.present:
                continue
            if r.offset > latest:
                tombstones = tombstones or r.value is None
                continue
            if r.key is None or r.offset < latest_of.get(r.key, -1):
                r.present = False
            elif r.value is None:
                if passed:
                    r.present = False
                else:
                    tombstones = True
        if tombstones and b.horizon is None and b.alive():
            b.horizon = self.now + self.config.delete_retention_ms
        if not b.alive() and b.producer >= 0 and last_of.get(b.producer) == b.base:
            b.empty = True  # the producer's last batch here keeps its header
            b.horizon = None

    # ------------------------------------------------------------ views

    @staticmethod
    def _model_view(batches: list[MBatch]) -> list[tuple[object, ...]]:
        out: list[tuple[object, ...]] = []
        for b in batches:
            if b.in_log():
                out.append(("batch", b.base, b.last, b.horizon))
                out.extend((r.offset, r.key, r.value, r.ts, r.headers)
                           for r in b.records if r.present)
        return out

    def _sut_view(self) -> list[tuple[object, ...]]:
        assert self.log is not None
        out: list[tuple[object, ...]] = []
        for seg in self.log.segments:
            for info in seg.iter_batches(0):
                raw = seg.pread(info.position, info.size)
                h = parse_header(raw, 0)
                horizon = h.base_timestamp if h.attributes & DELETE_HORIZON_MASK else None
                out.append(("batch", h.base_offset, h.base_offset + h.last_offset_delta, horizon))
                out.extend((r.offset, r.key, r.value, r.timestamp, list(r.headers))
                           for r in decode_batch(raw, 0))
        return out

    # ------------------------------------------------------------ invariants

    @invariant()
    def records_match_the_oracle(self) -> None:
        if self.log is None:
            return
        assert self._sut_view() == self._model_view(self.batches)

    @invariant()
    def time_lookups_match_the_oracle(self) -> None:
        if self.log is None:
            return
        present = [r for b in self.batches for r in b.records if r.present]
        stamps = sorted({r.ts for r in present})
        targets = {0, self.now + 10_000} | set(stamps) | {t + 1 for t in stamps} | \
            {t - 1 for t in stamps}
        for t in sorted(targets):
            want = next(((r.ts, r.offset) for r in present if r.ts >= t), None)
            hit = self.log.offset_for_timestamp(max(t, 0))
            assert (None if hit is None else (hit.timestamp, hit.offset)) == want, t
        if present:
            top = max(r.ts for r in present)
            first = next(r.offset for r in present if r.ts == top)
            hit = self.log.offset_for_timestamp(MAX_TIMESTAMP)
            assert hit is not None and (hit.timestamp, hit.offset) == (top, first)

    def _read_committed(self) -> list[tuple[int, bytes | None, bytes | None]]:
        """What a read_committed consumer from offset 0 gets (Kafka's CompletedFetch rule)
        from the log's batches below the LSO and its ``.txnindex`` entries: entries move
        into an aborted-producer set once their first offset is <= a batch's last offset,
        an ABORT marker takes its producer out, transactional batches of producers in the
        set are skipped, control records are never delivered."""
        assert self.log is not None
        lso = self._lso()
        pending = sorted(self.log.aborted_txns_on_disk(), key=lambda e: e.first_offset)
        aborting: set[int] = set()
        out: list[tuple[int, bytes | None, bytes | None]] = []
        for seg in self.log.segments:
            for info in seg.iter_batches(0):
                raw = seg.pread(info.position, info.size)
                h = parse_header(raw, 0)
                if h.base_offset >= lso:
                    return out
                while pending and pending[0].first_offset <= h.base_offset + h.last_offset_delta:
                    aborting.add(pending.pop(0).producer_id)
                records = decode_batch(raw, 0)
                if h.attributes & CONTROL_MASK:
                    if records and records[0].key == ABORT_KEY:
                        aborting.discard(h.producer_id)
                    continue
                if h.attributes & TRANSACTIONAL_MASK and h.producer_id in aborting:
                    continue
                out.extend((r.offset, r.key, r.value) for r in records)
        return out

    @invariant()
    def read_committed_matches_the_oracle(self) -> None:
        """The committed view: the oracle's surviving committed records below the LSO; and
        for every key, the latest committed record ever produced below the LSO is what
        the consumer sees last for it (a tombstone may have gone after its horizon).
        Aborted records are never seen; open transactions' records are all in the log."""
        if self.log is None:
            return
        lso = self._lso()
        view = self._read_committed()
        committed = [r for b in self.batches if not b.control and b.txn not in self.aborted
                     for r in b.records if r.offset < lso]
        assert view == [(r.offset, r.key, r.value) for r in committed if r.present]
        latest: dict[bytes | None, tuple[int, bytes | None, bytes | None]] = {}
        for r in committed:
            latest[r.key] = (r.offset, r.key, r.value)
        seen: dict[bytes | None, tuple[int, bytes | None, bytes | None]] = {}
        for rec in view:
            seen[rec[1]] = rec
        for key, rec in latest.items():
            if key is None:
                continue
            assert seen.get(key) == rec or (rec[2] is None and key not in seen), key
        in_log = {r[0] for r in self._sut_view() if isinstance(r[0], int)}
        open_ids = {t for t, _ in self.open_txns.values()}
        assert all(r.offset in in_log for b in self.batches if b.txn in open_ids
                   for r in b.records)

    @invariant()
    def txnindex_matches_the_oracle(self) -> None:
        """The ``.txnindex`` files hold the oracle's entries: an aborted transaction
        stays listed while data of it is left, from its first batch left."""
        if self.log is None:
            return
        assert self.log.aborted_txns_on_disk() == self.aborted_entries

    @invariant()
    def indexes_are_sane(self) -> None:
        if self.log is None:
            return
        for seg in self.log.segments:
            assert seg._indexes_sane()
            prev = -1
            for i in range(seg.time_index.entries):
                ts, off = seg.time_index.entry(i)
                assert ts > prev and seg.base_offset <= off < seg.next_offset
                prev = ts
            if seg is not self.log.active and max(seg.size, 0) > 0:
                assert seg.time_index.last_entry()[0] == seg.max_timestamp


class TxnCompactionMachine(CompactionMachine):
    """The same machine with transactions: producers 7-9 append transactional batches,
    end them with COMMIT or ABORT markers (an abort also writes its ``.txnindex``
    entry, as the broker does) or leave them open; every clean is bounded by the LSO."""

    @rule(data=st.data(), n=st.integers(1, 4), codec=st.sampled_from([0, 0, 1, 3]),
          producer=st.sampled_from([7, 8, 9]))
    def append_transactional(self, data: st.DataObject, n: int, codec: int, producer: int) -> None:
        assert self.log is not None
        if producer not in self.open_txns:
            self.open_txns[producer] = (self.txn_count, self.log.log_end_offset)
            self.txn_count += 1
        self._append(data, n, codec, False, producer, self.open_txns[producer][0])

    @rule(data=st.data(), commit=st.booleans(), bump=st.booleans())
    def end_transaction(self, data: st.DataObject, commit: bool, bump: bool) -> None:
        """End an open transaction; an abort may bump the producer's epoch (as the
        coordinator does when it fences a producer): its marker then holds the epoch
        alone until the producer writes again, at sequence 0."""
        if not self.open_txns:
            return
        self._end(data.draw(st.sampled_from(sorted(self.open_txns))), commit, bump)

    @rule(data=st.data(), n=st.integers(1, 3), codec=st.sampled_from([0, 0, 1, 3]),
          producer=st.sampled_from([7, 8, 9]), commit=st.booleans())
    def transaction(self, data: st.DataObject, n: int, codec: int, producer: int,
                    commit: bool) -> None:
        """A whole transaction of one batch (so that many end and get cleaned)."""
        if producer in self.open_txns:
            return
        self.append_transactional(data, n, codec, producer)
        self._end(producer, commit, False)

    @rule(ms=st.integers(0, 1200))
    def clean_wait_clean(self, ms: int) -> None:
        """Roll, clean, let ``ms`` pass, clean again: the steps that set a marker's
        horizon and then reach it, in one rule so that runs get there often."""
        self.roll()
        self.clean()
        self.now += ms
        self.clean()

    def _end(self, producer: int, commit: bool, bump: bool) -> None:
        assert self.log is not None
        txn, first = self.open_txns.pop(producer)
        epoch = self.epochs.get(producer, 0)
        if bump and not commit:
            epoch += 1
            self.epochs[producer] = epoch
            self.sequences[producer] = 0
        result = self.log.append_control(commit, producer_id=producer, producer_epoch=epoch,
                                         coordinator_epoch=3, now_ms=self.now)
        marker = result.base_offset
        if not commit:
            lso = min((f for _, f in self.open_txns.values()), default=marker + 1)
            entry = TxnIndexEntry(producer, first, marker, lso)
            self.log.append_aborted_txn(entry)
            self.aborted_entries.append(entry)
            self.aborted.add(txn)
        key = COMMIT_KEY if commit else ABORT_KEY
        self.batches.append(MBatch(marker, marker, [
            MRecord(marker, key, MARKER_VALUE, result.max_timestamp, [])],
            producer=producer, txn=txn, control=True, epoch=epoch))

    @rule(producer=st.sampled_from([7, 8, 9]))
    def fence(self, producer: int) -> None:
        """The coordinator aborts, with a bumped epoch, a transaction of ``producer``
        that added the partition but wrote nothing to it: an ABORT marker without data
        (and without a ``.txnindex`` entry, as the broker writes none for it), the only
        batch holding the new epoch until the producer writes again."""
        assert self.log is not None
        if producer in self.open_txns:
            return
        epoch = self.epochs.get(producer, 0) + 1
        self.epochs[producer] = epoch
        self.sequences[producer] = 0
        result = self.log.append_control(False, producer_id=producer, producer_epoch=epoch,
                                         coordinator_epoch=3, now_ms=self.now)
        marker = result.base_offset
        self.aborted.add(self.txn_count)
        self.batches.append(MBatch(marker, marker, [
            MRecord(marker, ABORT_KEY, MARKER_VALUE, result.max_timestamp, [])],
            producer=producer, txn=self.txn_count, control=True, epoch=epoch))
        self.txn_count += 1


CompactionMachine.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCompaction = CompactionMachine.TestCase

TxnCompactionMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCompactionWithTransactions = TxnCompactionMachine.TestCase
