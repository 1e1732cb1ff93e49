"""Kafka's ``.txnindex`` files: format, placement, and what happens to them when
segments roll, are truncated, deleted by retention or reopened after damage.

The oracle is a plain list of the aborted transactions appended, cut the way each
operation cuts a log (truncation drops markers at or after the new end; deleting
segments drops markers below the new first segment), and placed by the rule "the
segment whose offsets hold the marker"."""

from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import txnindex
from storage.cleaner import CleanerSettings, clean_log
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch
from storage.txnindex import TxnIndexEntry


def test_an_entry_is_kafkas_34_bytes() -> None:
    """Kafka's AbortedTxn layout, spelled out field by field: int16 version 0, then the
    producer id, first offset, last offset and last stable offset as int64."""
    entry = TxnIndexEntry(producer_id=0x0102030405060708, first_offset=17, last_offset=42,
                          last_stable_offset=43)
    expected = (b"\x00\x00" + bytes(range(1, 9)) + (17).to_bytes(8, "big")
                + (42).to_bytes(8, "big") + (43).to_bytes(8, "big"))
    assert txnindex.encode([entry]) == expected and len(expected) == 34
    assert txnindex.decode(expected * 2) == [entry, entry]
    assert txnindex.decode(expected + expected[:20]) == [entry]  # a torn append
    assert txnindex.decode(b"\x00\x01" + expected[2:]) == []  # an unknown version


def _placement_holds(log: Log) -> None:
    """Each file holds only markers of its own segment, and no segment-less file exists."""
    bases = [s.base_offset for s in log.segments]
    for i, base in enumerate(bases):
        upper = bases[i + 1] if i + 1 < len(bases) else log.log_end_offset
        for e in txnindex.read(txnindex.path_for(log.dir, base)):
            assert base <= e.last_offset < upper
    for name in os.listdir(log.dir):
        if name.endswith(".txnindex"):
            assert int(name[:20]) in bases, name


ops = st.lists(st.one_of(
    st.tuples(st.just("data"), st.integers(1, 4)),
    st.tuples(st.just("abort"), st.integers(0, 3)),
    st.tuples(st.just("commit"), st.just(0)),
    st.tuples(st.just("roll"), st.just(0)),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
    st.tuples(st.just("delete_below"), st.integers(0, 40)),
    st.tuples(st.just("reopen"), st.sampled_from(["clean", "lose_a_file", "tear_a_file"])),
), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops)
def test_files_hold_exactly_the_aborts_of_their_segments(tmp_path_factory, ops) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("txnidx") / "t-0"
    config = LogConfig(segment_bytes=400)
    log = Log.open(d, config)
    oracle: list[TxnIndexEntry] = []
    now = 1_000
    try:
        for op, arg in ops:
            now += 1
            if op == "data":
                log.append(build_batch([Record(0, now, None, b"v" * 20, [])] * arg), now_ms=now)
            elif op in ("abort", "commit"):
                marker = log.append_control(op == "commit", producer_id=7, producer_epoch=0,
                                            coordinator_epoch=0, now_ms=now).base_offset
                if op == "abort":
                    entry = TxnIndexEntry(7, max(log.log_start_offset, marker - arg), marker, marker + 1)
                    log.append_aborted_txn(entry)
                    oracle.append(entry)
            elif op == "roll":
                log.roll(now)
            elif op == "truncate":
                if arg < log.log_end_offset:
                    log.truncate_to(arg)
                    # Below the first segment the log restarts empty at the offset.
                    oracle = [e for e in oracle if e.last_offset < arg]
            elif op == "delete_below":
                target = min(arg, log.log_end_offset)
                log.advance_log_start_offset(max(target, log.log_start_offset))
                log.delete_segments_below_log_start()
                first = log.segments[0].base_offset
                oracle = [e for e in oracle if e.last_offset >= first]
            else:
                log.close()
                if arg != "clean" and oracle:
                    bases = [s.base_offset for s in log.segments]
                    victim = bases[bisect_right(bases, oracle[-1].last_offset) - 1]
                    path = txnindex.path_for(d, victim)
                    if arg == "lose_a_file":
                        path.unlink()
                    else:
                        with open(path, "r+b") as f:
                            f.truncate(path.stat().st_size - 5)
                log = Log.open(d, config)
                # What the broker does at every start, from the list it rebuilt from the log.
                log.sync_aborted_txns(oracle)
            assert log.aborted_txns_on_disk() == oracle
            _placement_holds(log)
    finally:
        log.close()


def test_sync_rewrites_only_files_that_disagree(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300))
    entries = []
    for i in range(6):
        log.append(build_batch([Record(0, i, None, b"x" * 50, [])] * 2), now_ms=i)
        marker = log.append_control(False, producer_id=i, producer_epoch=0, coordinator_epoch=0,
                                    now_ms=i).base_offset
        entries.append(TxnIndexEntry(i, marker - 2, marker, marker + 1))
        log.append_aborted_txn(entries[-1])
    assert len(log.segments) > 2
    assert log.sync_aborted_txns(entries) == 0
    assert log.sync_aborted_txns(entries[1:]) == 1  # only the first marker's file changes
    assert log.aborted_txns_on_disk() == entries[1:]
    files = [n for n in os.listdir(log.dir) if n.endswith(".txnindex")]
    assert len(files) >= 2
    assert log.sync_aborted_txns([]) == len(files)
    assert not [n for n in os.listdir(log.dir) if n.endswith(".txnindex")]
    log.close()


def test_a_clean_keeps_the_entries_whose_data_is_left_in_the_segment_holding_each_marker(
        tmp_path: Path) -> None:
    """The cleaner merges sealed segments into one: the entries of the merged segments
    whose transaction still has a batch end up in the new segment's file, in marker
    order; the others go with their data. Producers 1 and 2 each abort three
    transactions: the aborted data goes, except each producer's last batch (kept
    empty for its sequence), so only each producer's last entry stays."""
    config = LogConfig.from_kafka({"cleanup.policy": "compact", "segment.bytes": "400",
                                   "min.cleanable.dirty.ratio": "0.01"})
    log = Log.open(tmp_path / "t-0", config)
    entries = []
    seq = {1: 0, 2: 0}
    for i in range(12):
        pid = 1 + (i % 4 == 3) if i % 2 else -1
        log.append(build_batch([Record(0, i, f"k{i % 3}".encode(), b"v" * 40, [])],
                               producer_id=pid, producer_epoch=0 if pid > 0 else -1,
                               base_sequence=seq.get(pid, -1), is_transactional=pid > 0),
                   now_ms=i)
        if pid > 0:
            seq[pid] += 1
            marker = log.append_control(False, producer_id=pid, producer_epoch=0,
                                        coordinator_epoch=0, now_ms=i).base_offset
            entries.append(TxnIndexEntry(pid, marker - 1, marker, marker + 1))
            log.append_aborted_txn(entries[-1])
    log.roll(100)
    # Cleaned segments are grouped up to segment.bytes: a larger one lets them merge.
    log.update_config(LogConfig.from_kafka({"cleanup.policy": "compact", "segment.bytes": "100000",
                                            "min.cleanable.dirty.ratio": "0.01"}))
    before = len(log.segments)
    assert clean_log(log, None, 1_000, CleanerSettings(), force=True) is not None
    assert len(log.segments) < before  # segments were merged
    last = {e.producer_id: e for e in entries}
    assert log.aborted_txns_on_disk() == [e for e in entries if last[e.producer_id] is e]
    _placement_holds(log)
    log.close()
