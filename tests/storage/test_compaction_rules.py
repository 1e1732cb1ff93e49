"""The cleaner's scheduling rules and the gap rule, each against a brute-force oracle:
when a log is due (min.cleanable.dirty.ratio, max.compaction.lag.ms) and where its
cleanable range ends (min.compaction.lag.ms, the active segment); a compacted topic
rolls by max.compaction.lag.ms; recovery keeps compaction's gaps but still cuts at a
base offset that goes backwards; the I/O throttler keeps its rate."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.cleaner import CleanerSettings, Throttler, clean_log, log_to_clean
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch, decode_batch

T0 = 1_700_000_000_000


def _config(**extra: str) -> LogConfig:
    return LogConfig.from_kafka({"cleanup.policy": "compact", "segment.bytes": "400",
                                 "message.timestamp.before.max.ms": str(1 << 50), **extra})


def _append(log: Log, key: bytes, ts: int, value: bytes | None = b"v" * 40) -> None:
    log.append(build_batch([Record(0, ts, key, value, [])]), now_ms=T0 + 10_000_000)


@settings(max_examples=150, deadline=None)
@given(stamps=st.lists(st.integers(0, 5_000), min_size=1, max_size=40),
       min_lag=st.sampled_from([0, 500, 2_000]), max_lag=st.sampled_from([1_000, 3_000, 1 << 60]),
       ratio=st.sampled_from([0.0, 0.3, 0.99]), data=st.data(),
       checkpoint=st.none() | st.integers(0, 45))
def test_due_and_cleanable_range_match_the_oracle(tmp_path_factory, stamps: list[int],  # type: ignore[no-untyped-def]
                                                  min_lag: int, max_lag: int, ratio: float,
                                                  data: st.DataObject, checkpoint: int | None) -> None:
    d = tmp_path_factory.mktemp("due")
    max_lag = max(max_lag, min_lag)
    log = Log(d / "t-0", _config(**{"min.compaction.lag.ms": str(min_lag),
                                    "max.compaction.lag.ms": str(max_lag),
                                    "segment.ms": str(1 << 60)}))
    for i, ts in enumerate(stamps):
        _append(log, b"k%d" % (i % 5), T0 + ts)
    # The clock anywhere, or exactly a lag (+-1) after a segment's largest or first
    # timestamp: the boundaries of both rules.
    near = [t - T0 + lag + e for seg in log.segments
            for t in (seg.max_timestamp, seg.rolling_base_timestamp() or T0)
            for lag in (min_lag, max_lag) if lag < 1 << 40 for e in (-1, 0, 1)]
    now = data.draw(st.integers(0, 8_000) | st.sampled_from(near))
    ltc = log_to_clean(log, checkpoint, T0 + now)
    # Oracle: segments from the log's files, timestamps from the records themselves.
    segs = []
    for s in log.segments:
        recs = [r for info in s.iter_batches(0) for r in decode_batch(s.pread(info.position, info.size))]
        segs.append((s.base_offset, max(s.size, 0), [r.timestamp for r in recs]))
    leo = log.log_end_offset
    dirty = checkpoint if checkpoint is not None and 0 <= checkpoint <= leo else 0
    uppers = [b for b, _, _ in segs[1:]] + [leo + 1]
    stop = segs[-1][0]
    for (base, _, tss), upper in zip(segs[:-1], uppers, strict=False):
        if upper > dirty and min_lag > 0 and max(tss) > T0 + now - min_lag:
            stop = min(stop, base)
            break
    stop = max(stop, dirty)
    assert (ltc.first_dirty, ltc.first_uncleanable) == (dirty, stop)
    clean = sum(size for (base, size, _), upper in zip(segs, uppers, strict=True) if upper <= dirty)
    cleanable = sum(size for (base, size, _), upper in zip(segs, uppers, strict=True)
                    if upper > dirty and base < stop)
    need_now = any(upper > dirty and tss[0] < T0 + now - max_lag
                   for (base, _, tss), upper in zip(segs[:-1], uppers, strict=False))
    assert (ltc.clean_bytes, ltc.cleanable_bytes, ltc.need_now) == (clean, cleanable, need_now)
    total = clean + cleanable
    want_due = total > 0 and ((need_now and cleanable > 0) or cleanable / total > ratio)
    assert ltc.due(ratio) == want_due
    log.close()


def test_a_compacted_topic_rolls_by_max_compaction_lag(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", _config(**{"segment.bytes": str(1 << 20),
                                           "max.compaction.lag.ms": "1000"}))
    _append(log, b"a", T0)
    _append(log, b"a", T0 + 1000)
    assert len(log.segments) == 1
    _append(log, b"a", T0 + 1001)  # waited > max.compaction.lag.ms since the first batch
    assert len(log.segments) == 2
    plain = Log(tmp_path / "p-0", LogConfig.from_kafka({"max.compaction.lag.ms": "1000"}))
    for ts in (T0, T0 + 5000):
        plain.append(build_batch([Record(0, ts, b"a", b"v", [])]), now_ms=T0 + 10_000)
    assert len(plain.segments) == 1  # only compacted topics (Kafka's maxSegmentMs)


def _compacted_log(path: Path) -> Log:
    log = Log(path, _config(**{"segment.bytes": "100000", "delete.retention.ms": "0"}))
    for i in range(30):
        _append(log, b"k%d" % (i % 3), T0 + i)
    log.roll()
    assert clean_log(log, None, T0 + 100, CleanerSettings(), force=True) is not None
    return log


def _batch_positions(log: Log) -> list[tuple[int, int]]:
    return [(info.position, info.header.base_offset)
            for info in log.segments[0].iter_batches(0)]


def test_recovery_keeps_compaction_gaps(tmp_path: Path) -> None:
    log = _compacted_log(tmp_path / "t-0")
    before = _batch_positions(log)
    assert [o for _, o in before] == [27, 28, 29]  # gaps: 0..26 were compacted away
    log.flush()
    for s in log.segments:
        s.release()
    again = Log(tmp_path / "t-0", log.config, clean_shutdown=False, recovery_point=0)
    assert again.recovered_bytes_cut == 0 and _batch_positions(again) == before


def test_recovery_still_cuts_at_a_base_offset_that_goes_backwards(tmp_path: Path) -> None:
    log = _compacted_log(tmp_path / "t-0")
    (_, _), (p1, _), _ = _batch_positions(log)
    path = log.segments[0].log_path  # the cleaned segment keeps the group's first base
    log.flush()
    for s in log.segments:
        s.release()
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, struct.pack(">q", 20), p1)  # the second batch's base offset, below 28
    os.close(fd)
    again = Log(tmp_path / "t-0", log.config, clean_shutdown=False, recovery_point=0)
    assert again.recovered_bytes_cut > 0
    assert [o for _, o in _batch_positions(again)] == [27]


def test_without_compaction_a_gap_is_still_damage(tmp_path: Path) -> None:
    log = _compacted_log(tmp_path / "t-0")
    log.flush()
    for s in log.segments:
        s.release()
    plain = LogConfig.from_kafka({"segment.bytes": "100000"})
    # No compaction in the config and no cleaner checkpoint: the gap is damage.
    again = Log(tmp_path / "t-0", plain, clean_shutdown=False, recovery_point=0)
    assert again.recovered_bytes_cut > 0
    for s in again.segments:
        s.release()


def test_below_the_cleaner_checkpoint_gaps_survive_a_policy_change(tmp_path: Path) -> None:
    log = _compacted_log(tmp_path / "t-0")
    before = _batch_positions(log)
    log.flush()
    for s in log.segments:
        s.release()
    plain = LogConfig.from_kafka({"segment.bytes": "100000"})
    again = Log(tmp_path / "t-0", plain, clean_shutdown=False, recovery_point=0,
                cleaned_offset=30)
    assert again.recovered_bytes_cut == 0 and _batch_positions(again) == before


def test_throttler_keeps_the_rate() -> None:
    slept: list[float] = []
    t = Throttler(1_000_000, sleep=slept.append)
    for _ in range(10):
        t.maybe_throttle(100_000)  # 1 MB at once against 1 MB/s
    # Everything beyond what the elapsed time allows is slept off.
    assert 0.6 <= sum(slept) <= 1.0
    free = Throttler(float("inf"), sleep=slept.append)
    free.maybe_throttle(1 << 40)
    assert len(slept) <= 10


def _headers(log: Log) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, records, producer id) of every batch."""
    return [(i.header.base_offset, i.header.last_offset, i.header.records_count,
             i.header.producer_id) for s in log.segments for i in s.iter_batches(0)]


def test_a_producers_last_batch_is_kept_empty_when_its_records_all_go(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", _config(**{"segment.bytes": "100000"}))

    def produce(key: bytes, producer: int, seq: int = 0, n: int = 1) -> None:
        recs = [Record(i, T0, key, b"v", []) for i in range(n)]
        log.append(build_batch(recs, producer_id=producer, producer_epoch=0 if producer >= 0 else -1,
                               base_sequence=seq if producer >= 0 else -1), now_ms=T0 + 10)

    produce(b"a", 7, 0)        # offset 0: producer 7, superseded below
    produce(b"a", 7, 1, n=2)   # offsets 1-2: its last batch here, superseded below
    produce(b"a", -1)          # offset 3
    log.roll()
    assert clean_log(log, None, T0 + 20, CleanerSettings(), force=True) == 4
    # Only the producer's last batch stays, emptied: its offsets and sequence survive.
    assert _headers(log) == [(1, 2, 0, 7), (3, 3, 1, -1)]
    empty = next(log.segments[0].iter_batches(0)).header
    assert (empty.base_sequence, empty.max_timestamp, empty.compression) == (1, -1, 0)
    for t in (0, T0):
        hit = log.offset_for_timestamp(t)
        assert hit is not None and hit.offset == 3
    assert log.offset_for_timestamp(T0 + 1) is None
    # Cleaned again it stays while it is the producer's last; a later batch of the
    # producer, superseded in turn, takes its place.
    produce(b"a", 7, 3)        # offset 4
    produce(b"a", -1)          # offset 5
    log.roll()
    assert clean_log(log, 4, T0 + 30, CleanerSettings(), force=True) == 6
    assert _headers(log) == [(4, 4, 0, 7), (5, 5, 1, -1)]
    log.close()
    again = Log(tmp_path / "t-0", log.config, clean_shutdown=False, recovery_point=0)
    assert again.recovered_bytes_cut == 0 and _headers(again) == [(4, 4, 0, 7), (5, 5, 1, -1)]
