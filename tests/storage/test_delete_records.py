"""DeleteRecords at the storage level (KIP-107), against a brute-force oracle.

Hypothesis writes random batches (timestamps out of order, duplicates, several segments)
into a partition of a real data directory, cuts it by offset or by time, and checks
every lookup against a plain list of the records: the log start is the cut, the
segments wholly below it are gone from disk, EARLIEST is the cut, reads below it are
out of range, and "the first offset at or after T" only ever answers with surviving
records, for times before the new log start too. The same holds after a clean
restart and after a crash (the log start is checkpointed when it moves).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError
from storage.log import EARLIEST_TIMESTAMP, Log
from storage.logdir import LogDir
from storage.records import Record, build_batch

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100, segment_index_bytes=240,
                   message_timestamp_after_max_ms=1 << 62)


def oracle_lookup(records: list[tuple[int, int]], start: int, t: int) -> tuple[int, int] | None:
    """(offset, ts) of the smallest surviving offset whose timestamp is >= t."""
    for off, ts in records:
        if off >= start and ts >= t:
            return off, ts
    return None


def check(plog: Log, records: list[tuple[int, int]], cut: int, probes: list[int]) -> None:
    assert plog.log_start_offset == cut
    assert plog.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == cut
    assert plog.log_end_offset == len(records)
    first = plog.segments[0]
    # the segment holding the cut stays; every segment wholly below it is gone from disk
    assert first.base_offset <= cut
    assert len(plog.segments) == 1 or plog.segments[1].base_offset > cut
    on_disk = sorted(int(p.name[:20]) for p in plog.dir.glob("*.log"))
    assert on_disk == [s.base_offset for s in plog.segments]
    if cut > 0:
        with pytest.raises(OffsetOutOfRangeError):
            plog.read(cut - 1, 1 << 20)
    for t in probes:
        hit = plog.offset_for_timestamp(t)
        want = oracle_lookup(records, cut, t)
        assert (None if hit is None else (hit.offset, hit.timestamp)) == want, t


batches_st = st.lists(
    st.lists(st.integers(0, 5_000), min_size=1, max_size=6),  # record timestamps (ms after T0)
    min_size=1, max_size=25,
)


@given(batches=batches_st, by_time=st.booleans(), where=st.floats(0, 1), data=st.data())
def test_delete_records_by_offset_or_time_matches_the_oracle_and_survives_restarts(
    batches: list[list[int]], by_time: bool, where: float, data: st.DataObject
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chronolog-delrec-"))
    try:
        logdir = LogDir(tmp, CONFIG)
        plog = logdir.get_or_create("t", 0)
        records: list[tuple[int, int]] = []
        for stamps in batches:
            batch = build_batch([Record(0, T0 + s, None, b"x" * 40) for s in stamps])
            base = plog.append(batch, now_ms=T0).base_offset
            records += [(base + i, T0 + s) for i, s in enumerate(stamps)]
        if by_time:
            # the CLI's --before-time: the first offset whose timestamp is >= T
            t = T0 + int(where * 5_200)
            hit = oracle_lookup(records, 0, t)
            cut = hit[0] if hit is not None else len(records)
            lookup = plog.offset_for_timestamp(t)  # the time index path, before the cut
            assert (len(records) if lookup is None else lookup.offset) == cut
        else:
            cut = int(where * len(records))
        plog.advance_log_start_offset(cut)
        plog.delete_segments_below_log_start()
        logdir.checkpoint()
        probes = sorted({T0 - 1, T0, T0 + 5_001, *(ts for _, ts in records),
                         *data.draw(st.lists(st.integers(T0 - 10, T0 + 5_010), max_size=8))})
        check(plog, records, cut, probes)
        # a crash: no close, no clean-shutdown marker; the checkpoint carries the start
        for seg in plog.segments:
            seg.release()
        crashed = LogDir(tmp, CONFIG)
        assert not crashed.clean_shutdown
        check(crashed.get("t", 0), records, cut, probes)  # type: ignore[arg-type]
        crashed.close()
        reopened = LogDir(tmp, CONFIG)
        check(reopened.get("t", 0), records, cut, probes)  # type: ignore[arg-type]
        # retention still respects the moved start (and never goes below it)
        again = reopened.get("t", 0)
        assert again is not None
        again.delete_old_segments(T0)
        check(again, records, cut, probes)
        reopened.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_lower_offset_never_moves_the_log_start_back(tmp_path: Path) -> None:
    logdir = LogDir(tmp_path, CONFIG)
    plog = logdir.get_or_create("t", 0)
    for i in range(20):
        plog.append(build_batch([Record(0, T0 + i, None, b"y" * 40)]), now_ms=T0)
    plog.advance_log_start_offset(12)
    plog.advance_log_start_offset(5)
    assert plog.log_start_offset == 12
    with pytest.raises(OffsetOutOfRangeError):
        plog.advance_log_start_offset(21)
    logdir.close()
