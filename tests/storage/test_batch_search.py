"""Searching inside one batch (the record-level step of every time lookup) against a
brute-force decode: large batches with runs of equal-layout records, timestamp
deltas of every varint width, negative deltas, duplicates, all codecs, and a log
start inside the batch."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.batch_search import (
    _UNIFORM,
    BLOCK,
    build_summary,
    first_record_at_or_after,
    offset_of_first_max,
    search_with_summary,
)
from storage.config import LogConfig
from storage.log import Log
from storage.primitives import read_uvarint_trusted as _uvarint
from storage.records import HEADER_SIZE, Record, build_batch, decode_batch, parse_header

T0 = 1_700_000_000_000


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, list[Record]]:
    n = draw(st.one_of(st.integers(1, 400), st.integers(500, 1500)))
    step = draw(st.sampled_from([0, 1, 3, 50, 200, 5000, 300_000]))
    jitter = draw(st.sampled_from([0, 0, 2, 100, 70_000]))
    value_sizes = draw(st.sampled_from([[20], [20, 21], [0, 5, 120], [100]]))
    base = T0 + draw(st.integers(-1000, 1000))
    seed = draw(st.integers(0, 2**16))
    import random

    rng = random.Random(seed)
    recs = []
    for i in range(n):
        ts = base + i * step + (rng.randint(-jitter, jitter) if jitter and rng.random() < 0.1 else 0)
        recs.append(Record(0, ts, None, b"v" * rng.choice(value_sizes), []))
    codec = draw(st.sampled_from([0, 0, 0, 1, 3, 4]))
    raw = build_batch(recs, compression=codec)
    return raw, decode_batch(raw)


@given(batch=batches(), data=st.data())
def test_first_record_at_or_after_matches_a_scan(batch: tuple[bytes, list[Record]],
                                                 data: st.DataObject) -> None:
    raw, recs = batch
    h = parse_header(raw)
    lo = min(r.timestamp for r in recs) - 2
    hi = max(r.timestamp for r in recs) + 2
    for _ in range(20):
        target = data.draw(st.one_of(st.integers(lo, hi), st.sampled_from([r.timestamp for r in recs])))
        min_offset = data.draw(st.sampled_from([0, 0, 0, len(recs) // 2, len(recs) - 1]))
        want = next(((r.timestamp, r.offset) for r in recs
                     if r.timestamp >= target and r.offset >= min_offset), None)
        assert first_record_at_or_after(raw, 0, h, target, min_offset) == want
        assert first_record_at_or_after(raw, 0, tuple(h), target, min_offset) == want


@given(batch=batches())
def test_offset_of_first_max_is_the_first_record_carrying_the_max(
        batch: tuple[bytes, list[Record]]) -> None:
    raw, recs = batch
    mx = max(r.timestamp for r in recs)
    assert offset_of_first_max(raw, 0, parse_header(raw)) == next(
        r.offset for r in recs if r.timestamp == mx)


@given(batch=batches(), data=st.data())
def test_block_summary_search_matches_a_scan(batch: tuple[bytes, list[Record]],
                                             data: st.DataObject) -> None:
    raw, recs = batch
    h = parse_header(raw)
    if h.attributes & 7:
        return  # summaries are only built for uncompressed batches
    summary = build_summary(raw, 0, h)
    ts = [r.timestamp for r in recs]
    assert summary.prefix_max[-1] + summary.ts_base == max(ts)
    # Brute force: every record's position, size and timestamp delta, then what each
    # block must hold: its first record's position, the running max, and the uniform
    # flag only where the block's records have one size, one timestamp-varint width
    # and non-decreasing, non-negative deltas.
    layout = []
    p = HEADER_SIZE
    for _ in recs:
        u, q = _uvarint(raw, p)
        tu, r = _uvarint(raw, q + 1)
        layout.append((p, q - p + (u >> 1), r - q - 1, tu))
        p = q + (u >> 1)
    assert len(summary.positions) == -(-len(recs) // BLOCK)
    for b, word in enumerate(summary.positions):
        block = layout[b * BLOCK:(b + 1) * BLOCK]
        assert word & ~_UNIFORM == block[0][0]
        assert summary.prefix_max[b] + summary.ts_base == max(ts[:(b + 1) * BLOCK])
        if word & _UNIFORM:
            assert len({(size, tw) for _, size, tw, _ in block}) == 1
            zz = [tu for *_, tu in block]
            assert all(z % 2 == 0 for z in zz) and zz == sorted(zz)
    for _ in range(20):
        target = data.draw(st.one_of(st.integers(min(ts) - 2, max(ts) + 2), st.sampled_from(ts)))
        want = next(((r.timestamp, r.offset) for r in recs if r.timestamp >= target), None)
        assert search_with_summary(raw, 0, h, summary, target) == want
        assert search_with_summary(raw, 0, tuple(h), summary, target) == want


@settings(max_examples=20)
@given(n=st.integers(500, 1200), step=st.sampled_from([5_000_000, 50_000_000]),
       seed=st.integers(0, 2**16), data=st.data())
def test_block_summary_of_a_batch_spanning_more_than_int32_ms(
        n: int, step: int, seed: int, data: st.DataObject) -> None:
    """Block maxima that do not fit 4-byte lanes relative to the base timestamp fall
    back to 8-byte absolute values; searches stay exact."""
    import random

    rng = random.Random(seed)
    ts = [T0 + i * step - (rng.randint(0, 3 * step) if rng.random() < 0.05 else 0)
          for i in range(n)]
    raw = build_batch([Record(0, t, None, b"w" * rng.choice([10, 10, 300]), []) for t in ts])
    h = parse_header(raw)
    summary = build_summary(raw, 0, h)
    assert summary.prefix_max.typecode == "q" and summary.ts_base == 0
    assert summary.prefix_max[-1] == max(ts)
    for _ in range(20):
        target = data.draw(st.one_of(st.integers(min(ts) - 2, max(ts) + 2), st.sampled_from(ts)))
        want = next(((t, o) for o, t in enumerate(ts) if t >= target), None)
        assert search_with_summary(raw, 0, h, summary, target) == want


@settings(max_examples=15)
@given(batch_list=st.lists(batches(), min_size=1, max_size=4), data=st.data())
def test_log_lookups_over_large_batches_match_a_scan_cold_and_warm(
        batch_list: list[tuple[bytes, list[Record]]], data: st.DataObject) -> None:
    """Every search path of Log: direct column search on the first touch of a batch,
    block summaries from the second, compressed batches, log start inside a batch."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Log(Path(tmp) / "t-0", LogConfig(segment_bytes=300_000, index_interval_bytes=1000))
        recs: list[tuple[int, int]] = []
        for raw, decoded in batch_list:
            base = log.append(raw, now_ms=T0 + 10**9).base_offset
            recs += [(base + i, r.timestamp) for i, r in enumerate(decoded)]
        lo = min(t for _, t in recs) - 2
        hi = max(t for _, t in recs) + 2
        targets = data.draw(st.lists(st.integers(lo, hi), min_size=1, max_size=8))
        for start in (0, data.draw(st.integers(0, len(recs)))):
            log.advance_log_start_offset(start)
            for target in targets * 3:
                want = next(((t, o) for o, t in recs if t >= target and o >= start), None)
                got = log.offset_for_timestamp(target)
                assert (got[:2] if got else None) == want
        log.close()


def test_background_summaries_resume_across_rolls_and_truncation(tmp_path: Path) -> None:
    """build_summaries(budget) does one batch per call at budget 0, resumes where it
    stopped (also after a roll and a truncation), and every lookup stays exact."""
    import random

    rng = random.Random(7)
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=40_000, index_interval_bytes=500))
    recs: list[tuple[int, int]] = []

    def add(n: int) -> None:
        base_ts = T0 + len(recs)
        tss = [base_ts + i + (rng.randint(-40, 40) if rng.random() < 0.02 else 0) for i in range(n)]
        raw = build_batch([Record(0, t, None, b"y" * rng.randint(0, 20), []) for t in tss])
        base = log.append(raw, now_ms=T0 + 10**9).base_offset
        recs.extend((base + i, t) for i, t in enumerate(tss))

    def check() -> None:
        for target in range(T0 - 50, T0 + len(recs) + 50, 37):
            want = next(((t, o) for o, t in recs if t >= target), None)
            got = log.offset_for_timestamp(target)
            assert (got[:2] if got else None) == want

    for _ in range(8):
        add(rng.randint(512, 1200))
    assert len(log.segments) >= 3
    calls = 0
    while not log.build_summaries(0.0):
        calls += 1
    assert calls >= 7  # one batch per call at a zero budget
    check()
    add(700)
    assert log.build_summaries(0.0) is False and log.build_summaries(0.0) is True
    check()
    log.truncate_to(recs[len(recs) // 2][0])
    recs = [r for r in recs if r[0] < log.log_end_offset]
    for _ in range(3):
        add(rng.randint(512, 900))
    while not log.build_summaries(1.0):
        pass
    check()
    log.close()


def test_background_summaries_yield_during_long_walks_over_small_batches(tmp_path: Path) -> None:
    """A log of many small batches has nothing to summarise, but walking it still
    yields back to the caller in slices instead of blocking for the whole log."""
    log = Log(tmp_path / "t-0", LogConfig())
    for i in range(600):
        log.append(build_batch([Record(0, T0 + i, None, b"s", [])]), now_ms=T0 + 10**9)
    assert log.build_summaries(0.0) is False  # stopped after a slice of headers
    calls = 1
    while not log.build_summaries(0.0):
        calls += 1
    assert calls >= 2
    got = log.offset_for_timestamp(T0 + 300)
    assert got is not None and got.offset == 300
    log.close()


def test_summaries_stop_at_the_process_budget_and_lookups_stay_exact(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """More large batches than the summary budget holds: the summaries that fit are
    kept (never evicted and rebuilt), the other batches are searched directly, the
    budget holds across segments, and every lookup is still exact."""
    import random

    import storage.batch_search as segment

    per_batch = -(-600 // segment.BLOCK)  # blocks of one 600-record batch
    room = 2 * per_batch + per_batch // 2  # two batches fit, not three
    monkeypatch.setattr(segment, "SUMMARY_MAX_BLOCKS", segment._summary_blocks_in_use + room)
    in_use_before = segment._summary_blocks_in_use
    rng = random.Random(7)
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=1 << 20, segment_bytes=50_000))
    recs: list[tuple[int, int]] = []
    ts = T0
    for _ in range(12):
        batch = []
        for _ in range(600):
            ts += rng.choice([0, 1, 5])
            batch.append(Record(0, ts - rng.choice([0, 0, 0, 40]), None, b"v" * 30, []))
        base = log.append(build_batch(batch), now_ms=T0 + 10**9).base_offset
        recs += [(base + i, r.timestamp) for i, r in enumerate(batch)]
    assert len(log.segments) > 2  # the budget is shared by several segments
    targets = [rng.randint(T0 - 5, ts + 5) for _ in range(60)]
    kept_after_first_rounds = None
    for round_ in range(4):  # first touch, summary build, summary use, again
        for target in targets:
            want = next(((t, o) for o, t in recs if t >= target), None)
            got = log.offset_for_timestamp(target)
            assert (got[:2] if got else None) == want
        kept = {(s.base_offset, pos) for s in log.segments for pos in s._summaries}
        assert segment._summary_blocks_in_use - in_use_before <= room
        if round_ == 2:
            kept_after_first_rounds = kept
        if round_ == 3:
            assert kept == kept_after_first_rounds  # nothing evicted or rebuilt
    assert len(kept) == 2
    log.close()
    assert segment._summary_blocks_in_use == in_use_before  # closing gives the budget back


def test_block_summary_of_a_torn_batch_has_lowest_maxima_past_its_records() -> None:
    """Blocks no record reaches (a header counting more records than its bytes hold)
    keep the previous running max, or the lowest value when there is none; searches
    over the records that are there stay exact."""
    recs = [Record(0, T0 + 3 * i, None, b"t" * 20, []) for i in range(600)]
    raw = build_batch(recs)
    h = parse_header(raw)
    more = build_summary(raw, 0, h._replace(records_count=700))
    assert len(more.positions) == -(-700 // BLOCK)
    for target in (T0 - 1, T0, T0 + 1, T0 + 900, T0 + 1797, T0 + 1798):
        want = next(((r.timestamp, i) for i, r in enumerate(recs) if r.timestamp >= target), None)
        assert search_with_summary(raw, 0, h._replace(records_count=700), more, target) == want
    empty = build_summary(raw, 0, h._replace(batch_length=HEADER_SIZE - 12))
    assert empty.prefix_max.typecode == "q" and empty.prefix_max[-1] == -(1 << 63)
    assert search_with_summary(raw, 0, h, empty, T0) is None
