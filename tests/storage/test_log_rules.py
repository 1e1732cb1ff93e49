"""Kafka's append-time rules on a real log: validation errors append nothing, rolls
on time (from the first batch's timestamp, with jitter) and on relative-offset
overflow, reads bounded by max_offset, trusted appends."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from storage.log import Log
from storage.records import Record, build_batch, iter_batches

T = 1_700_000_000_000
NOW = T + 1000


def batch(*tss: int, size: int = 10, **kw: object) -> bytes:
    return build_batch([Record(0, t, None, b"x" * size, []) for t in tss], **kw)  # type: ignore[arg-type]


def test_rejected_batches_append_nothing(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(max_message_bytes=500, segment_bytes=400))
    log.append(batch(T), now_ms=NOW)
    good = bytearray(batch(T + 1))
    cases: list[tuple[bytes, type[Exception]]] = []
    b = bytearray(good)
    struct.pack_into(">q", b, 0, 5)
    cases.append((bytes(b), InvalidRecordError))  # base offset must be 0
    b = bytearray(good)
    b[-1] ^= 1
    cases.append((bytes(b), CorruptRecordError))  # CRC
    cases.append((bytes(good + good), InvalidRecordError))  # two batches
    cases.append((batch(T, size=450), RecordTooLargeError))
    cases.append((batch(T, size=380), RecordListTooLargeError))
    cases.append((batch(T, timestamp_type=1), InvalidTimestampError))
    cases.append((batch(T, NOW + 3_600_001), InvalidTimestampError))
    for raw, err in cases:
        with pytest.raises(err):
            log.append(raw, now_ms=NOW)
    assert log.log_end_offset == 1
    assert log.active.size == len(batch(T))
    with pytest.raises(InvalidTimestampError) as info:
        log.append(batch(T, NOW + 3_600_001, T, NOW + 4_000_000), now_ms=NOW)
    assert [i for i, _ in info.value.record_errors] == [1, 3]


def test_time_roll_measures_from_the_first_batch_timestamp(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_ms=100))
    log.append(batch(T), now_ms=NOW)
    log.append(batch(T + 100), now_ms=NOW)  # waited 100, not > 100
    log.append(batch(T - 5000), now_ms=NOW)  # backwards timestamps never roll
    assert len(log.segments) == 1
    log.append(batch(T + 101), now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.append(batch(T + 150), now_ms=NOW)  # the new segment counts from T + 101
    assert len(log.segments) == 2


def test_jitter_shortens_the_time_roll(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_ms=100, segment_jitter_ms=1000))
    jitter = log.active.jitter_ms
    assert 0 <= jitter < 100
    log.append(batch(T), now_ms=NOW)
    log.append(batch(T + 100 - jitter), now_ms=NOW)
    assert len(log.segments) == 1
    log.append(batch(T + 101 - jitter), now_ms=NOW)
    assert len(log.segments) == 2


def test_relative_offset_overflow_rolls(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    log.append(batch(T), now_ms=NOW)
    b = bytearray(batch(T + 1))
    struct.pack_into(">q", b, 0, 1)
    struct.pack_into(">i", b, 23, (1 << 31) - 1)  # last offset 2**31: beyond base 0 + int32
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    log.append_as_is(bytes(b))
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert log.log_end_offset == 1 + (1 << 31)


def test_read_stops_before_max_offset_and_returns_one_whole_batch(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    for i in range(5):
        log.append(batch(T + i, T + i, size=100), now_ms=NOW)
    raw = log.read(0, 1 << 20, max_offset=5)
    assert [h.base_offset for _, h in iter_batches(raw)] == [0, 2, 4]
    assert len(log.read(3, 1)) == len(batch(T, T, size=100))  # whole batch despite max_bytes
    assert log.read(3, 1 << 20, max_offset=2) == b""


def test_append_as_is_keeps_offsets_and_can_leave_a_gap(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    b = bytearray(batch(T, T + 1))
    struct.pack_into(">q", b, 0, 10)
    r = log.append_as_is(bytes(b))
    assert (r.base_offset, r.last_offset, log.log_end_offset) == (10, 11, 12)
    assert [s.base_offset for s in log.segments] == [10]
    assert log.log_start_offset == 10 and r.log_start_offset == 10
    got = log.offset_for_timestamp(T + 1)
    assert got is not None and got.offset == 11
    with pytest.raises(CorruptRecordError):
        log.append_as_is(bytes(b))  # below the log end


def test_sealed_segments_give_back_descriptors_beyond_the_open_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With thousands of segments, lookups and reads across all of them must not run
    out of file descriptors: least recently used sealed segments close their files
    and reopen on demand, with exact answers throughout."""
    import os

    from storage import segment

    monkeypatch.setattr(segment, "MAX_OPEN_SEGMENTS", 4)
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300, index_interval_bytes=50))
    for i in range(60):
        log.append(batch(T + i, T + i, size=60), now_ms=NOW)
    assert len(log.segments) >= 30
    before = len(os.listdir("/proc/self/fd"))
    walk = log.segments[0].iter_batches(0)  # a lazily consumed walk across evictions
    first = next(walk)
    for _ in range(2):
        for i in range(60):
            got = log.offset_for_timestamp(T + i)
            assert got is not None and got.offset == 2 * i
            assert iter_batches(log.read(2 * i, 1)).__next__()[1].base_offset == 2 * i
    rest = list(walk)
    assert [first.header.base_offset] + [b.header.base_offset for b in rest] == [
        b.header.base_offset for b in log.segments[0].iter_batches(0)]
    assert len(os.listdir("/proc/self/fd")) - before <= 4 * 4 + 8
    log.close()


def test_records_without_timestamps_never_match_and_age_by_mtime(tmp_path: Path) -> None:
    """CreateTime records stamped -1 (no timestamp) are stored, never match a search,
    and a segment holding only such records ages by its .log mtime for retention."""
    import os

    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=200, retention_ms=1000))
    log.append(batch(-1, -1), now_ms=NOW)
    log.append(batch(-1), now_ms=NOW)  # rolls: the first segment holds only -1 records
    log.append(batch(T + 5, -1, T + 3), now_ms=NOW)
    assert log.offset_for_timestamp(0) is not None
    got = log.offset_for_timestamp(T)
    assert got is not None and (got.timestamp, got.offset) == (T + 5, 3)
    mx = log.offset_for_timestamp(-3)
    assert mx is not None and (mx.timestamp, mx.offset) == (T + 5, 3)
    first = log.segments[0]
    assert first.max_timestamp == -1
    os.utime(first.log_path, (0, (NOW - 5000) / 1000))
    assert first.largest_timestamp() == NOW - 5000
    assert log.delete_old_segments(NOW) >= 1
    assert log.log_start_offset > 0
    log.close()
