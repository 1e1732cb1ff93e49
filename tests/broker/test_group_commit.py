"""Group commit (log.flush.interval.messages): one fsync per partition per commit, never the
running commit for a later append, and a failed fsync reported to every waiter.

Driven on a real event loop with real logs in a temporary directory; the fsyncs are
real. A log whose descriptor is made invalid before its commit runs is how an EIO is
produced without a broken disk. End to end, a broker with flush.messages=1 answers
a confluent-kafka producer and every acknowledged record is there.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from broker.group_commit import GroupCommit
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=2000, retention_ms=-1, retention_bytes=-1)


def _append(log: Log, i: int) -> None:
    log.append(build_batch([Record(0, T0 + i, None, b"v" * 200, [])]), now_ms=T0)


async def test_appends_of_one_pass_share_one_commit_and_move_the_recovery_point(
    tmp_path: Path,
) -> None:
    logs = [Log(tmp_path / f"t-{p}", CFG) for p in range(3)]
    commit = GroupCommit(asyncio.get_running_loop())
    futures = []
    for i in range(12):  # rolls happen too: sealed segments join the same commit
        log = logs[i % 3]
        _append(log, i)
        futures.append(commit.join(("t", i % 3), log))
    assert len(set(futures)) == 1
    assert all(log.recovery_point == 0 for log in logs)
    await futures[0]
    assert commit.commits == 1
    for log in logs:
        assert log.recovery_point == log.log_end_offset
        assert not log.roll_flush_pending
        log.close()


async def test_an_append_during_a_running_commit_waits_for_the_next_one(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CFG)
    commit = GroupCommit(asyncio.get_running_loop())
    _append(log, 0)
    first = commit.join(("t", 0), log)
    await asyncio.sleep(0)  # the first commit starts: its work covers offset 0 only
    _append(log, 1)
    second = commit.join(("t", 0), log)
    assert second is not first
    await first
    assert log.recovery_point >= 1
    await second
    assert log.recovery_point == 2 and commit.commits == 2
    log.close()


async def test_a_failed_fsync_fails_its_waiters_and_keeps_the_flush_owed(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CFG)
    commit = GroupCommit(asyncio.get_running_loop())
    for i in range(12):
        _append(log, i)
    fut = commit.join(("t", 0), log)
    sealed_before = log.roll_flush_pending
    real_dup = os.dup
    # A descriptor number no process can hold: fsync refuses it (EBADF stands in for EIO).
    os.dup = lambda fd: 1_000_000_000 + fd  # type: ignore[assignment]
    try:
        with pytest.raises(OSError):
            await fut
    finally:
        os.dup = real_dup  # type: ignore[assignment]
    assert log.recovery_point == 0
    assert log.roll_flush_pending == sealed_before
    ok = commit.join(("t", 0), log)  # the next commit succeeds and covers everything
    await ok
    assert log.recovery_point == log.log_end_offset
    log.close()


def test_flush_messages_1_acknowledges_every_record_durably(broker_factory) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    from client import SyncClient

    b = broker_factory({"log.flush.interval.messages": "1"})
    with SyncClient(b.bootstrap) as c:
        c.create_topic("durable", 2)
    acked: list[tuple[int, int]] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 1})
    for i in range(5000):
        p.produce("durable", value=b"%d" % i, partition=i % 2,
                  on_delivery=lambda e, m: e is None and acked.append((m.partition(), m.offset())))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert sorted(acked) == sorted((q, o) for q in range(2) for o in range(2500))
    with SyncClient(b.bootstrap) as c:
        assert c.latest("durable") == {0: 2500, 1: 2500}
