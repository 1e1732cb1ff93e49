"""Exact per-bucket counts (``Log.count_time_windows``) against a brute-force oracle.

The event-time state machine (tests/storage/test_event_time.py: random disorder,
equal timestamps, tiny segments, restarts with sidecars kept/deleted/torn after
kill -9, truncation, retention, DeleteRecords, compaction, transactions) gains the
sorted-timestamp index's own steps: background slices with little or no time (indexes
left partial), ``.tsindex`` sidecars deleted, torn or made stale. After every step
the counts for several boundary sets (before, after, inside the data, on record
timestamps) equal the oracle's exactly, read_uncommitted and read_committed (below a
random LSO, aborted transactions' records left out).
"""

from __future__ import annotations

import bisect
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch
from storage.tsindex import TsIndex
from storage.txnindex import TxnIndexEntry
from tests.helpers.event_time_machine import NOW, T0, EventTimeMachine, data_records

PID = 7


def oracle_records(log: Log) -> list[tuple[int, int, bool]]:
    """(offset, timestamp, transactional of producer PID) of every data record in
    [log start, high watermark), decoded batch by batch."""
    return [(r.offset, r.timestamp, h.is_transactional and h.producer_id == PID)
            for h, r in data_records(log)]


def oracle_counts(recs: list[tuple[int, int, bool]], bounds: list[int], end: int,
                  aborted: list[TxnIndexEntry]) -> list[int]:
    out = [0] * (len(bounds) - 1)
    for o, t, txn in recs:
        if o >= end:
            continue
        if txn and any(e.first_offset <= o < e.last_offset for e in aborted):
            continue
        k = bisect.bisect_right(bounds, t) - 1
        if 0 <= k < len(out):
            out[k] += 1
    return out


class CountMachine(EventTimeMachine):
    def __init__(self) -> None:
        super().__init__()
        self.aborted: list[TxnIndexEntry] = []
        self.txn_first = -1

    @rule(data=st.data(), codec=st.sampled_from([0, 0, 1, 4]),
          shape=st.sampled_from(["in_order", "shuffled", "late_batch", "ties", "straddle"]))
    def append(self, data: st.DataObject, codec: int, shape: str) -> None:
        leo = self.log.log_end_offset
        was_open = self.open_txn
        super().append(data, codec, shape)
        if self.open_txn and not was_open:
            self.txn_first = leo
        elif self.open_txn and self.txn_first < 0:
            self.txn_first = leo

    @rule(commit=st.booleans())
    def end_txn(self, commit: bool) -> None:
        if self.open_txn:
            marker = self.log.log_end_offset
            if not commit:
                self.aborted.append(TxnIndexEntry(PID, self.txn_first, marker, marker))
            self.txn_first = -1
        super().end_txn(commit)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        super().truncate(data)
        self.txn_first = -1

    @rule(budget=st.sampled_from([0.0, 0.0, 1.0, 1000.0]), times=st.integers(1, 3))
    def background_step(self, budget: float, times: int) -> None:
        """The broker's background slices: zone maps, then sorted-timestamp indexes."""
        for _ in range(times):
            if self.log.build_zone_maps(budget):
                self.log.build_ts_indexes(budget)

    @rule(how=st.sampled_from(["delete", "tear", "flip", "stale"]), data=st.data())
    def damage_ts_sidecars_then_kill(self, how: str, data: st.DataObject) -> None:
        """kill -9, then a .tsindex sidecar lost, torn, damaged, or one from another
        state of the .log (a stale copy put back after more appends)."""
        self.log.build_zone_maps(1000.0)
        self.log.build_ts_indexes(1000.0)
        paths = sorted((self.tmp / "t-0").glob("*.tsindex"))
        stale = {p: p.read_bytes() for p in paths}
        if how == "stale":
            self.append(data, 0, "shuffled")
            self.log.roll()
            self.log.build_zone_maps(1000.0)
            self.log.build_ts_indexes(1000.0)
            self.truncate(data)
        for seg in self.log.segments:
            seg.release()
        paths = sorted((self.tmp / "t-0").glob("*.tsindex"))
        if paths:
            p = data.draw(st.sampled_from(paths))
            raw = p.read_bytes()
            if how == "delete":
                p.unlink()
            elif how == "tear":
                p.write_bytes(raw[:data.draw(st.integers(0, max(0, len(raw) - 1)))])
            elif how == "flip":
                b = bytearray(raw)
                b[data.draw(st.integers(0, len(b) - 1))] ^= 0x10
                p.write_bytes(bytes(b))
        if how == "stale":
            for p, raw in stale.items():
                if p.with_suffix(".log").exists():
                    p.write_bytes(raw)
        self.log = Log(self.tmp / "t-0", self.config, clean_shutdown=False, recovery_point=0)
        self.txn_first = -1 if not self.open_txn else self.txn_first

    @invariant()
    def counts_are_exact(self) -> None:
        recs = oracle_records(self.log)
        leo = self.log.log_end_offset
        aborted = [e for e in self.aborted if e.last_offset < leo]
        rng = random.Random(len(recs) * 31 + leo)
        tss = sorted(t for _, t, _ in recs)
        sets = [[T0 - 100, T0 - 1], [NOW + 10**9, NOW + 2 * 10**9], [T0 - 1, NOW + 10**9],
                [T0, T0, T0 + 1]]
        pts = sorted(rng.randint(T0 - 10, self.clock + 6000) for _ in range(rng.randint(2, 12)))
        sets.append(pts)
        if tss:
            sets.append(sorted({*rng.sample(tss, min(len(tss), 6)), tss[0], tss[-1] + 1}))
            if len(sets[-1]) < 2:
                sets[-1].append(sets[-1][0] + 1)
        hw = self.log.high_watermark
        for bounds in sets:
            assert self.log.count_time_windows(bounds) == oracle_counts(recs, bounds, hw, []), bounds
        lso = rng.randint(self.log.log_start_offset, hw) if hw > self.log.log_start_offset else hw
        for bounds in sets[2:]:
            got = self.log.count_time_windows(bounds, max_offset=lso, aborted=aborted)
            assert got == oracle_counts(recs, bounds, lso, aborted), (bounds, lso, aborted)


TestCountMachine = CountMachine.TestCase
TestCountMachine.settings = settings(
    max_examples=int(__import__("os").environ.get("EVT_EXAMPLES", "60")),
    stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- single behaviours -------------------------------------------------------------------

def _fill(log: Log, n: int, seed: int = 5) -> list[int]:
    rng = random.Random(seed)
    out: list[int] = []
    for _ in range(n):
        ts = [T0 + rng.randint(0, 100_000) for _ in range(rng.randint(1, 20))]
        out += ts
        log.append(build_batch([Record(0, t, b"k", b"v" * 40) for t in ts]), now_ms=NOW)
    return out


def _expect(ts: list[int], bounds: list[int]) -> list[int]:
    return np.diff(np.searchsorted(np.sort(np.asarray(ts)), bounds)).tolist()


def test_sidecars_are_written_by_the_background_step_and_kafka_files_are_untouched(
        tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=4000, index_interval_bytes=500)
    log = Log(tmp_path / "a-0", cfg)
    ts = _fill(log, 80)
    before = {p.name: p.read_bytes() for p in (tmp_path / "a-0").iterdir()
              if p.suffix in (".log", ".index", ".timeindex")}
    sealed = log.segments[:-1]
    assert sealed and not any(s.ts_index_path.exists() for s in sealed)  # not at append
    assert log.build_zone_maps(1000.0) and log.build_ts_indexes(1000.0)
    assert all(s.ts_index_path.exists() for s in sealed)
    assert not log.active.ts_index_path.exists()  # the active segment's stays in memory
    bounds = list(range(T0 - 5, T0 + 100_010, 777))
    assert log.count_time_windows(bounds) == _expect(ts, bounds)
    after = {p.name: p.read_bytes() for p in (tmp_path / "a-0").iterdir()
             if p.suffix in (".log", ".index", ".timeindex")}
    assert {k: v for k, v in after.items() if k in before} == before
    log.close()


def test_a_sidecar_round_trips_and_rejects_damage() -> None:
    from storage.columnar import TimestampColumns
    tsi = TsIndex(100, 500)
    offs = np.arange(100, 110, dtype=np.int64)
    ts = np.asarray([5, 3, 9, 9, 1, 0, 7, 7, 2, 8], dtype=np.int64)
    z = np.zeros(10, dtype=np.int64)
    tsi.add(np.asarray([100, 104, 107], dtype=np.int64), 999,
            TimestampColumns(offs, ts, z, np.zeros(10, dtype=np.bool_)))
    raw = tsi.encode(900, b"h" * 61)
    got = TsIndex.decode(raw, 100, 500)
    assert got is not None
    back, last_pos, _ = got
    assert last_pos == 900 and back.first == [100, 104, 107] and back.covered == 999
    bounds = np.asarray([0, 2, 6, 9, 10], dtype=np.int64)
    for lo, hi in [(0, 3), (0, 1), (1, 2), (1, 3), (2, 3)]:
        assert back.cum(lo, hi, bounds).tolist() == tsi.cum(lo, hi, bounds).tolist()
    assert back.cum(1, 2, bounds).tolist() == [0, 2, 2, 3, 3]  # block 1 holds 1, 0, 7
    assert TsIndex.decode(raw[:-1], 100, 500) is None
    assert TsIndex.decode(raw, 101, 500) is None
    flipped = bytearray(raw)
    flipped[70] ^= 1
    assert TsIndex.decode(bytes(flipped), 100, 500) is None


@pytest.mark.parametrize("log_append_time", [False, True])
def test_a_cold_count_decodes_and_equals_the_indexed_count(tmp_path: Path,
                                                           log_append_time: bool) -> None:
    cfg = LogConfig(segment_bytes=6000, index_interval_bytes=300,
                    message_timestamp_type="LogAppendTime" if log_append_time else "CreateTime")
    log = Log(tmp_path / "c-0", cfg)
    ts = _fill(log, 120)
    bounds = list(range(T0 - 5, T0 + 100_010, 5000))
    cold = log.count_time_windows(bounds)
    assert log.build_zone_maps(1000.0) and log.build_ts_indexes(1000.0)
    warm = log.count_time_windows(bounds)
    assert cold == warm
    if log_append_time:
        assert sum(warm) == 0  # every record carries the append time NOW, past the bounds
        assert log.count_time_windows([NOW, NOW + 1]) == [len(ts)]
    else:
        assert warm == _expect(ts, bounds)
    log.close()


def test_background_slices_with_no_time_left_still_finish(tmp_path: Path) -> None:
    """Each slice reads at least one block for the disorder counts, so slices whose
    budget is gone before their first read (the broker's 2 ms on big batches) still
    finish, and the sorted-timestamp indexes do not wait for them."""
    cfg = LogConfig(segment_bytes=3000, index_interval_bytes=200)
    log = Log(tmp_path / "s-0", cfg)
    ts: list[int] = []
    for i in range(60):  # every batch straddles the running max: counted from its records
        batch = [T0 + 5000 + i, T0 + i] if i % 2 else [T0 + 10 * i, T0 + 6000 + i]
        ts += batch
        log.append(build_batch([Record(0, t, None, b"x" * 30) for t in batch]), now_ms=NOW)
    zones = indexed = False
    for _ in range(2000):
        zones = log.build_zone_maps(0.0) or zones
        indexed = log.build_ts_indexes(0.0) or indexed
        if zones and indexed:
            break
    assert zones and indexed
    bounds = list(range(T0 - 1, T0 + 7000, 333))
    assert log.count_time_windows(bounds) == _expect(ts, bounds)
    log.close()
