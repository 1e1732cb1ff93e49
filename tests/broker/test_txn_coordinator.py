"""The transaction coordinator as a sans-I/O state machine (transactions-facts §2, §7),
driven by an explicit clock, and its durable store (torn last line, restart)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from broker.txn.coordinator import (
    PendingOffset,
    TransactionCoordinator,
    TxnMetadata,
    TxnState,
)
from broker.txn.store import TransactionStore
from protocol.errors import ErrorCode

TP = ("t", 0)


def make(saved: list[TxnMetadata] | None = None) -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(
        allocate_producer_id=lambda: next(ids),
        persist=(saved.append if saved is not None else lambda m: None),
        max_timeout_ms=900_000)


def test_init_gives_epoch_zero_then_bumps_and_rejects_bad_timeouts() -> None:
    c = make()
    assert c.init_producer_id("x", 0, -1, -1, 4, 0).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id("x", 900_001, -1, -1, 4, 0).error == \
        ErrorCode.INVALID_TRANSACTION_TIMEOUT
    first = c.init_producer_id("x", 60_000, -1, -1, 4, 0)
    assert (first.error, first.producer_epoch) == (0, 0)
    again = c.init_producer_id("x", 60_000, -1, -1, 4, 1)
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)


def test_second_init_during_ongoing_fences_with_51_and_the_retry_gets_epoch_plus_2() -> None:
    c = make()
    r = c.init_producer_id("x", 60_000, -1, -1, 4, 0)
    assert c.add_partitions("x", r.producer_id, 0, [TP], 0, 1) == 0
    fenced = c.init_producer_id("x", 60_000, -1, -1, 4, 2)
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert fenced.completion is not None and not fenced.completion.commit
    assert fenced.completion.producer_epoch == 1 and fenced.completion.partitions == (TP,)
    c.complete("x", 3)
    retry = c.init_producer_id("x", 60_000, -1, -1, 4, 4)
    assert (retry.error, retry.producer_epoch) == (0, 2)
    # The old producer: 47 below v2, 90 from v2, on EndTxn and AddPartitions.
    assert c.end_txn("x", r.producer_id, 0, True, 1, 5).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert c.end_txn("x", r.producer_id, 0, True, 3, 5).error == ErrorCode.PRODUCER_FENCED
    assert c.add_partitions("x", r.producer_id, 0, [TP], 0, 5) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert c.verify_produce(r.producer_id, 0, TP) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_end_txn_rules() -> None:
    c = make()
    r = c.init_producer_id("x", 60_000, -1, -1, 4, 0)
    pid = r.producer_id
    assert c.end_txn("x", pid, 0, True, 1, 1).error == ErrorCode.INVALID_TXN_STATE  # Empty
    assert c.end_txn("y", pid, 0, True, 1, 1).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    c.add_partitions("x", pid, 0, [TP], 0, 1)
    done = c.end_txn("x", pid, 0, True, 1, 2)
    assert done.error == 0 and done.completion is not None and done.completion.commit
    assert c.end_txn("x", pid, 0, True, 1, 2).error == ErrorCode.CONCURRENT_TRANSACTIONS  # Prepare
    assert c.add_partitions("x", pid, 0, [TP], 0, 2) == ErrorCode.CONCURRENT_TRANSACTIONS
    c.complete("x", 3)
    assert c.txns["x"].state == TxnState.COMPLETE_COMMIT
    assert c.end_txn("x", pid, 0, True, 1, 4).error == 0  # a retry
    assert c.end_txn("x", pid, 0, False, 1, 4).error == ErrorCode.INVALID_TXN_STATE


def test_kip_360_reinit_with_the_current_or_previous_epoch() -> None:
    c = make()
    r = c.init_producer_id("x", 60_000, -1, -1, 4, 0)
    bumped = c.init_producer_id("x", 60_000, r.producer_id, 0, 4, 1)
    assert (bumped.error, bumped.producer_epoch) == (0, 1)
    retried = c.init_producer_id("x", 60_000, r.producer_id, 0, 4, 2)
    assert (retried.error, retried.producer_epoch) == (0, 1)  # a retry of that bump
    assert c.init_producer_id("x", 60_000, r.producer_id, 7, 4, 3).error == \
        ErrorCode.PRODUCER_FENCED
    assert c.init_producer_id("x", 60_000, r.producer_id, 7, 3, 3).error == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    assert c.init_producer_id("x", 60_000, 99, 1, 4, 3).error == ErrorCode.PRODUCER_FENCED


def test_only_ongoing_transactions_time_out_counted_from_the_first_add() -> None:
    c = make()
    r = c.init_producer_id("x", 1_000, -1, -1, 4, 0)
    assert c.abort_timed_out(10_000) == []  # Empty never times out
    c.add_partitions("x", r.producer_id, 0, [TP], 0, 20_000)
    assert c.abort_timed_out(21_000) == []
    [abort] = c.abort_timed_out(21_001)
    assert not abort.commit and abort.producer_epoch == 1
    assert c.txns["x"].state == TxnState.PREPARE_ABORT


def test_txn_offsets_need_the_group_added_and_are_dropped_on_abort() -> None:
    c = make()
    r = c.init_producer_id("x", 60_000, -1, -1, 4, 0)
    off = [PendingOffset("t", 0, 5, -1, "")]
    assert c.txn_offset_commit("x", "g", r.producer_id, 0, off, 3, 1) == ErrorCode.INVALID_TXN_STATE
    assert c.add_offsets("x", r.producer_id, 0, "g", 0, 1) == 0
    assert c.txn_offset_commit("x", "g", r.producer_id, 0, off, 3, 1) == 0
    assert c.pending_groups() == {"g"}
    end = c.end_txn("x", r.producer_id, 0, False, 1, 2)
    assert end.completion is not None and end.completion.offsets == {"g": {("t", 0): off[0]}}
    c.complete("x", 3)
    assert c.pending_groups() == set()


def test_store_survives_a_torn_last_line_and_reloads_prepare_for_completion(tmp_path: Path) -> None:
    store = TransactionStore(tmp_path)
    store.load()
    c = TransactionCoordinator(allocate_producer_id=lambda: 7, persist=store.write,
                               max_timeout_ms=900_000)
    c.init_producer_id("x", 60_000, -1, -1, 4, 0)
    c.add_partitions("x", 7, 0, [TP], 0, 1)
    c.end_txn("x", 7, 0, True, 1, 2)  # PrepareCommit, markers not written yet
    with open(tmp_path / "transactions.log", "ab") as f:
        f.write(b'{"id":"x","pid":7,"ep')  # killed mid-write
    again = make()
    [pending] = again.load(TransactionStore(tmp_path).load())
    assert pending.commit and pending.partitions == (TP,)
    assert again.txns["x"].state == TxnState.PREPARE_COMMIT


def test_store_compacts_itself_while_running(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("broker.txn.store.COMPACT_MIN_LINES", 50)
    c: TransactionCoordinator
    store = TransactionStore(tmp_path, live=lambda: c.txns.values())
    store.load()
    c = TransactionCoordinator(allocate_producer_id=lambda: 7, persist=store.write,
                               max_timeout_ms=900_000)
    for i in range(200):
        c.init_producer_id("x", 60_000, -1, -1, 4, i)
    lines = (tmp_path / "transactions.log").read_bytes().splitlines()
    assert len(lines) < 60
    [meta] = TransactionStore(tmp_path).load()
    assert meta.producer_epoch == c.txns["x"].producer_epoch == 199


def test_store_fsyncs_per_change_only_under_the_brokers_flush_interval(
    tmp_path: Path, monkeypatch  # type: ignore[no-untyped-def]
) -> None:
    """Like Kafka's __transaction_state (a log under log.flush.interval.messages): no fsync
    per change by default, one per change at 1, one per N changes at N."""
    import os

    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    for every, changes, expect in ((None, 12, 0), (1, 12, 12), (5, 12, 2)):
        d = tmp_path / f"every-{every}"
        d.mkdir()
        store = (TransactionStore(d) if every is None
                 else TransactionStore(d, flush_messages=lambda n=every: n))
        store.load()
        monkeypatch.setattr("broker.txn.store.os.fsync", counting_fsync)
        c = TransactionCoordinator(allocate_producer_id=lambda: 7, persist=store.write,
                                   max_timeout_ms=900_000)
        for i in range(changes):
            c.init_producer_id("x", 60_000, -1, -1, 4, i)
        assert len(synced) == expect, every
        monkeypatch.undo()
        synced.clear()
        store.close()
        assert TransactionStore(d).load()[0].producer_epoch == changes - 1


def _counting(calls: list[int], real: Any) -> Any:
    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)
    return fsync


def test_endtxn_fsyncs_markers_and_its_changes_only_when_the_flush_interval_asks(
    tmp_path: Path, monkeypatch  # type: ignore[no-untyped-def]
) -> None:
    """By default a commit costs no fsync (Kafka relies on the page cache too); with
    log.flush.interval.messages=1 the PrepareCommit/CompleteCommit changes and the
    marker are on disk before EndTxn could be answered."""
    import asyncio
    import os

    from broker.config import BrokerConfig
    from broker.partitions import PartitionManager
    from broker.txn.service import TransactionService
    from storage import fsutil
    from storage.records import Record, build_batch

    for every, expect_segment, expect_store in ((None, 0, 0), (1, 1, 2)):
        d = tmp_path / f"every-{every}"
        cfg = (BrokerConfig(log_dirs=str(d)) if every is None
               else BrokerConfig(log_dirs=str(d), log_flush_interval_messages=every))
        pm = PartitionManager(cfg)
        pm.open(None)
        pm.create_topic("t", 1)
        svc = TransactionService(pm, None, max_timeout_ms=900_000, clock=lambda: 5)
        asyncio.run(svc.open())
        coord = svc.coordinator
        r = coord.init_producer_id("x", 60_000, -1, -1, 4, 1)
        assert coord.add_partitions("x", r.producer_id, r.producer_epoch, [TP], 3, 2) == 0
        pm.append("t", 0, build_batch([Record(0, 3, None, b"v", [])], producer_id=r.producer_id,
                                      producer_epoch=r.producer_epoch, base_sequence=0,
                                      is_transactional=True), 3)
        segment: list[int] = []
        store: list[int] = []
        monkeypatch.setattr(fsutil.FILES, "fsync", _counting(segment, fsutil.FILES.fsync))
        monkeypatch.setattr("broker.txn.store.os.fsync", _counting(store, os.fsync))
        end = coord.end_txn("x", r.producer_id, r.producer_epoch, True, 3, 4)
        assert end.error == 0 and end.completion is not None
        asyncio.run(svc.finish(end.completion))
        monkeypatch.undo()
        assert (len(segment), len(store)) == (expect_segment, expect_store), every
        assert coord.txns["x"].state == TxnState.COMPLETE_COMMIT
        svc.close()
        pm.close()
