"""A roll leaves its fsyncs to a RollFlush (the broker runs it on a worker thread):
the append that rolls does no fsync, and the recovery point moves only once the
sealed segment is synced, never past data a truncation made new."""

from __future__ import annotations

import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.config import LogConfig
from storage.log import Log, RollFlush
from storage.records import Record, build_batch

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=600, index_interval_bytes=100, retention_ms=-1, retention_bytes=-1)


def _batch(i: int) -> bytes:
    return build_batch([Record(0, T0 + i, None, b"v" * 150, [])])


def _rolled(directory: Path, batches: int, cfg: LogConfig = CFG) -> tuple[Log, RollFlush]:
    """A log that rolled while ``batches`` were appended, and the flush it owes."""
    log = Log(directory, cfg)
    for i in range(batches):
        log.append(_batch(i), now_ms=T0)
    work = log.take_roll_flush()
    assert work is not None
    return log, work


def _run_on_a_thread(work: object) -> None:
    t = threading.Thread(target=work.run)  # type: ignore[attr-defined]
    t.start()
    t.join()


def test_a_roll_does_not_move_the_recovery_point_until_its_flush_ran(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CFG)
    for i in range(3):
        log.append(_batch(i), now_ms=T0)
    assert len(log.segments) > 1  # rolled
    assert log.recovery_point == 0 and log.roll_flush_pending
    work = log.take_roll_flush()
    assert work is not None and work.upto == log.active.base_offset
    _run_on_a_thread(work)
    log.roll_flush_done(work)
    assert log.recovery_point == log.active.base_offset
    assert not log.roll_flush_pending and log.take_roll_flush() is None
    assert all(not seg.dirty for seg in log.segments[:-1])
    assert work.fds == []  # descriptors released
    log.close()


def test_a_truncation_meanwhile_keeps_the_recovery_point_below_new_data(tmp_path: Path) -> None:
    log, work = _rolled(tmp_path / "t-0", 6)
    log.truncate_to(1)
    for i in range(6):  # offsets 1.. again, new and unsynced
        log.append(_batch(10 + i), now_ms=T0)
    _run_on_a_thread(work)
    log.roll_flush_done(work)
    assert log.recovery_point <= 1
    log.flush()
    assert log.recovery_point == log.log_end_offset
    log.close()


def test_segments_deleted_before_the_flush_is_taken_are_skipped(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=100, retention_ms=-1,
                    retention_bytes=700)
    log = Log(tmp_path / "t-0", cfg)
    for i in range(8):
        log.append(_batch(i), now_ms=T0)
    assert log.delete_old_segments(T0) > 0
    work = log.take_roll_flush()
    assert work is not None and work.segments
    alive = {id(s) for s in log.segments}
    assert all(id(s) in alive for s in work.segments)
    _run_on_a_thread(work)
    log.roll_flush_done(work)
    assert log.recovery_point == log.active.base_offset
    log.close()


def test_a_failed_flush_is_owed_to_the_next_flush(tmp_path: Path) -> None:
    log, work = _rolled(tmp_path / "t-0", 3)
    sealed = list(work.segments)
    log.roll_flush_failed(work)  # what the broker calls when work.run() raised
    assert log.recovery_point == 0 and log.roll_flush_pending
    again = log.take_roll_flush()
    assert again is not None and again.segments == sealed
    again.close()
    log.flush()
    assert log.recovery_point == log.log_end_offset and not log.roll_flush_pending
    log.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["append", "take", "run", "truncate", "flush", "retain"]),
                max_size=40))
def test_the_recovery_point_never_claims_more_than_was_synced(tmp_path_factory, ops) -> None:  # type: ignore[no-untyped-def]
    """Oracle: the offsets known to be on disk are [0, synced) where synced grows only
    when a flush or a finished RollFlush covers them, and shrinks with truncation."""
    d = tmp_path_factory.mktemp("rf") / "t-0"
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=100, retention_ms=-1,
                    retention_bytes=1500)
    log = Log(d, cfg)
    synced = 0
    taken: list[tuple[object, int, int]] = []  # (work, upto, truncations when taken)
    truncations = 0
    i = 0
    for op in ops:
        if op == "append":
            log.append(_batch(i), now_ms=T0)
            i += 1
        elif op == "take":
            work = log.take_roll_flush()
            if work is not None:
                taken.append((work, work.upto, truncations))
        elif op == "run" and taken:
            work, upto, seen = taken.pop(0)
            _run_on_a_thread(work)
            log.roll_flush_done(work)  # type: ignore[arg-type]
            if seen == truncations:
                synced = max(synced, min(upto, log.log_end_offset))
        elif op == "truncate" and log.log_end_offset > 0:
            log.truncate_to(log.log_end_offset // 2)
            truncations += 1
            synced = min(synced, log.log_end_offset)
        elif op == "flush":
            log.flush()
            synced = log.log_end_offset
        elif op == "retain":
            log.delete_old_segments(T0)
        assert log.recovery_point <= max(synced, 0), (op, log.recovery_point, synced)
        assert log.recovery_point <= log.log_end_offset
    for work, _, _ in taken:
        work.close()  # type: ignore[attr-defined]
    log.close()
