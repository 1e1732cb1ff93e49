"""Zone maps, event-time plans and disorder counts against a brute-force scan.

A hypothesis state machine appends batches with random disorder (equal timestamps,
late records, whole late batches, every codec, transactions with COMMIT/ABORT
markers) to a log with tiny segments, interleaved with clean and kill -9 restarts
(sidecars kept, deleted or torn), truncation, retention, DeleteRecords and
compaction. After every step the oracle is the records the log actually holds in
[log start, high watermark), decoded batch by batch; it must agree with:

- ``plan_time_window``: every record with T1 <= ts < T2 lies in a planned range
  (a superset, never a miss), ranges sorted, disjoint, not adjacent, in bounds; and
  it is exactly the zone-map plan of the blocks that may match, where a block the
  sorted-timestamp index covers (built fully, partly or not at all) may match only
  when its records, decoded from the .log, hold one in the window;
- ``disorder_stats``: exactly the oracle's count and largest lateness;
- every segment's zone map: exactly the map rebuilt from its .log (blocks, min, max).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import records as R
from storage import segment as S
from storage.config import LogConfig
from storage.log import HAVE_NUMPY, Log
from storage.planner import plan_blocks
from storage.records import Record, build_batch, iter_batches
from storage.zonemap import NO_MAX, NO_MIN, ZoneMap, count_late
from tests.helpers.event_time_machine import (
    NOW,
    RUN_SHAPES,
    T0,
    EventTimeMachine,
    _run,
    check_zone_maps,
    log_records,
    oracle_disorder,
)

TestEventTimeMachine = EventTimeMachine.TestCase
TestEventTimeMachine.settings = settings(
    max_examples=int(os.environ.get("EVT_EXAMPLES", "80")), stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- the validation walk's disorder counts (records.py) --------------------------------

@given(tss=st.lists(st.integers(-5_000, 5_000), min_size=1, max_size=300),
       sort_mode=st.sampled_from(["none", "sorted", "mostly"]),
       running=st.one_of(st.none(), st.integers(-6_000, 6_000)))
@settings(max_examples=150, deadline=None)
def test_validation_walk_counts_late_records_like_the_oracle(
        tss: list[int], sort_mode: str, running: int | None) -> None:
    if sort_mode != "none":
        tss = sorted(tss)
        if sort_mode == "mostly" and len(tss) > 2:
            tss[len(tss) // 2], tss[-1] = tss[-1], tss[len(tss) // 2]
    batch = build_batch([Record(0, T0 + t, None, b"x" * 10) for t in tss])
    run = -(1 << 63) if running is None else T0 + running
    scan = R.validate_client_batch(batch, running=run)
    late, worst = count_late([T0 + t for t in tss], run)
    assert (scan.late, scan.max_lateness) == (late, worst)
    if sort_mode == "sorted" and running is None:
        assert scan.late == 0


@given(parts=st.lists(st.tuples(st.sampled_from(RUN_SHAPES), st.integers(1, 130),
                                st.integers(-40_000, 40_000), st.sampled_from([0, 1, 5, 200])),
                      min_size=1, max_size=5),
       running=st.one_of(st.none(), st.integers(-45_000, 45_000)),
       codec=st.sampled_from([0, 1, 2, 3, 4]), seed=st.integers(0, 1 << 16),
       width=st.sampled_from([1, 3, 1 << 22, 1 << 50]))
@settings(max_examples=200, deadline=None)
def test_validation_walk_counts_every_run_shape_exactly(
        parts: list[tuple[str, int, int, int]], running: int | None, codec: int, seed: int,
        width: int) -> None:
    """Runs of same-layout records (the column-wise walk: sorted above, across or below
    the running max, unsorted) between records of other sizes (the scalar walk), with
    timestamp deltas of 1 to 8 varint bytes, every codec: late records and the largest
    lateness are exactly the per-record count's, for the fast and the scalar walk."""
    rng = random.Random(seed)
    recs: list[Record] = []
    for shape, k, lo, vlen in parts:
        scale = max(1, width // 4000)
        recs += [Record(0, T0 + t * scale, None, b"v" * vlen) for t in _run(shape, k, lo, rng)]
    batch = build_batch(recs, compression=codec)
    run = -(1 << 63) if running is None else T0 + running * max(1, width // 4000)
    tss = [r.timestamp for r in recs]
    want = count_late(tss, run)
    for scan in (R.validate_client_batch(batch, running=run),
                 R.scan_timestamps(batch, running=run)):
        assert (scan.late, scan.max_lateness) == want
        assert (scan.min_timestamp, scan.max_timestamp) == (min(tss), max(tss))
        assert scan.offset_delta_of_max == tss.index(max(tss))
    plain = build_batch(recs)
    h = R.parse_header(plain)
    data, start, end = R._records_data(plain, 0, h)
    bts = h.base_timestamp
    delta = max(run - bts, -(1 << 63))
    fast = R._scan_disorder(data, start, end, len(recs), True, True, delta)
    slow = R._scan_disorder(data, start, end, len(recs), True, False, delta)
    assert fast == slow
    assert fast[3:] == want


def test_unsorted_runs_are_counted_without_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The base install has no numpy: the lanes are then counted in Python, equally."""
    rng = random.Random(5)
    tss = [T0 + rng.randint(0, 10_000) for _ in range(300)]
    batch = build_batch([Record(0, t, None, b"x") for t in tss])
    with_np = R.validate_client_batch(batch, running=T0 + 5_000)
    monkeypatch.setattr(R, "_np", None)
    assert R.validate_client_batch(batch, running=T0 + 5_000) == with_np
    assert (with_np.late, with_np.max_lateness) == count_late(tss, T0 + 5_000)


# -- sidecars --------------------------------------------------------------------------

def _fill(log: Log, n: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    for _ in range(n):
        ts = [T0 + rng.randint(0, 100_000) for _ in range(rng.randint(1, 20))]
        log.append(build_batch([Record(0, t, b"k", b"v" * 40) for t in ts]), now_ms=NOW)


def test_sidecars_are_written_after_seal_and_the_kafka_files_are_unchanged(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=4000, index_interval_bytes=500)
    a = Log(tmp_path / "a-0", cfg)
    _fill(a, 60)
    sealed = a.segments[:-1]
    assert sealed and not any(s.zone_map_path.exists() for s in sealed)  # not on the append path
    assert a.build_zone_maps(1000.0)  # the broker's background slice writes them
    assert all(s.zone_map_path.exists() for s in sealed)
    a.close()
    # the same appends without zone maps in memory give byte-identical Kafka files
    b_dir = tmp_path / "b-0"
    b = Log(b_dir, cfg)
    for seg in b.segments:
        seg._zones = None
    import storage.segment as S
    orig = S.LogSegment.create

    def create_without(*args: object, **kw: object) -> S.LogSegment:
        seg = orig(*args, **kw)  # type: ignore[arg-type]
        seg._zones = None
        return seg
    S.LogSegment.create = create_without  # type: ignore[method-assign]
    try:
        _fill(b, 60)
    finally:
        S.LogSegment.create = orig  # type: ignore[method-assign]
    b.close()
    for p in sorted((tmp_path / "a-0").iterdir()):
        if p.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            assert p.read_bytes() == (b_dir / p.name).read_bytes(), p.name


@pytest.mark.parametrize("damage", ["missing", "truncated", "flipped", "other_segment"])
def test_a_damaged_sidecar_is_rebuilt_from_the_log(tmp_path: Path, damage: str) -> None:
    cfg = LogConfig(segment_bytes=4000, index_interval_bytes=300)
    log = Log(tmp_path / "t-0", cfg)
    _fill(log, 50)
    want = [(b, list(zm.min), list(zm.max), list(zm.first)) for b, zm in log.zone_maps()]
    stats = log.disorder_stats()
    log.close()
    files = sorted((tmp_path / "t-0").glob("*.zonemap"))
    victim = files[1]
    if damage == "missing":
        victim.unlink()
    elif damage == "truncated":
        victim.write_bytes(victim.read_bytes()[:-9])
    elif damage == "flipped":
        raw = bytearray(victim.read_bytes())
        raw[70] ^= 1
        victim.write_bytes(bytes(raw))
    else:
        victim.write_bytes(files[2].read_bytes())
    log = Log(tmp_path / "t-0", cfg)
    assert [(b, list(zm.min), list(zm.max), list(zm.first)) for b, zm in log.zone_maps()] == want
    assert log.disorder_stats() == stats
    assert victim.exists()  # written back for the sealed segment
    log.close()


def test_a_killed_active_segment_keeps_its_sidecar_prefix_and_walks_the_tail(
        tmp_path: Path) -> None:
    cfg = LogConfig(index_interval_bytes=300)
    log = Log(tmp_path / "t-0", cfg)
    _fill(log, 30)
    log.close()
    log = Log(tmp_path / "t-0", cfg)
    _fill(log, 30, seed=4)
    recs = log_records(log)
    for seg in log.segments:
        seg.release()  # kill -9
    log = Log(tmp_path / "t-0", cfg, clean_shutdown=False, recovery_point=0)
    assert tuple(log.disorder_stats()) == oracle_disorder(recs)
    check_zone_maps(log)
    log.close()


# -- the plan is tight on month-shuffled data ------------------------------------------

DAY = 86_400_000


def month_shuffled(rng: random.Random, months: int, per_month: int, batch: int
                   ) -> list[list[int]]:
    """Batches of timestamps: whole months arrive out of order, each month's records in
    rough time order with a few days of late records mixed in."""
    order = list(range(months))
    rng.shuffle(order)
    out: list[list[int]] = []
    for m in order:
        start = T0 + m * 30 * DAY
        tss = sorted(start + rng.randrange(30 * DAY) for _ in range(per_month))
        for i in range(len(tss)):
            if rng.random() < 0.02:
                tss[i] -= rng.randrange(3 * DAY)
        out += [tss[i:i + batch] for i in range(0, len(tss), batch)]
    return out


def test_the_plan_is_tight_on_month_shuffled_data(tmp_path: Path) -> None:
    rng = random.Random(11)
    cfg = LogConfig(segment_bytes=256 << 10, message_timestamp_after_max_ms=1 << 62)
    log = Log(tmp_path / "t-0", cfg)
    for tss in month_shuffled(rng, 12, 4000, 100):
        log.append(build_batch([Record(0, t, None, b"v" * 30) for t in tss]), now_ms=NOW)
    assert len(log.segments) > 3
    span = 12 * 30 * DAY
    for _ in range(10):
        t1 = T0 + rng.randrange(span)
        t2 = t1 + span // 100  # ~1 % of the data
        plan = log.plan_time_window(t1, t2)
        holding = 0
        for seg in log.segments:
            buf = seg.pread(0, max(seg.size, 0))
            for pos, h in iter_batches(buf):
                if any(t1 <= t < t2 for t in R.record_timestamps(buf, pos)):
                    holding += h.size
        planned = sum(r.bytes for r in plan)
        assert holding > 0
        assert planned <= 1.5 * holding, (planned, holding)
    log.close()


def test_plan_blocks_merges_adjacent_blocks_and_clips_to_bounds() -> None:
    zm = ZoneMap(0, 0)
    for i, (mn, mx) in enumerate([(10, 20), (15, 30), (100, 200), (25, 26)]):
        zm.add(i * 100, 100, i * 10, i * 10 + 9, 10, mn, mx, 0, 0)
    zm.sync()
    assert list(zm.late) == [0, -1, 0, 10]  # straddling: counted later; wholly below: all late
    assert plan_blocks([zm], 18, 27, 0, 40) == [(0, 20, 200), (30, 40, 100)]
    assert plan_blocks([zm], 18, 27, 5, 35) == [(5, 20, 200), (30, 35, 100)]
    assert plan_blocks([zm], 300, 400, 0, 40) == []
    assert plan_blocks([zm], 20, 20, 0, 40) == []


def _random_map(rng: random.Random, base: int, blocks: int) -> ZoneMap:
    zm = ZoneMap(base, 0)
    off = base
    for i in range(blocks):
        n = rng.randint(1, 5)
        if rng.random() < 0.15:  # a block of control batches: no data record
            mn, mx, recs = NO_MIN, NO_MAX, 0
        else:
            mn = rng.randint(0, 100)
            mx, recs = mn + rng.randint(0, 40), n
        zm.add(i * 64, rng.randint(1, 64), off, off + n - 1, recs, mn, mx, 0, 0)
        off += n + (rng.random() < 0.2)  # compaction leaves offset gaps
    zm.sync()
    return zm


@pytest.mark.skipif(not HAVE_NUMPY, reason="plan_indexed needs numpy (the arrow extra); "
                    "without it the broker plans with plan_blocks")
@given(seed=st.integers(0, 2**32), t1=st.integers(-5, 150), width=st.integers(0, 60),
       bounds=st.tuples(st.integers(0, 60), st.integers(0, 80)))
@settings(max_examples=300, deadline=None)
def test_plan_indexed_without_indexes_equals_plan_blocks(seed: int, t1: int, width: int,
                                                        bounds: tuple[int, int]) -> None:
    from storage.tsindex import plan_indexed

    rng = random.Random(seed)
    maps, base = [], 0
    for _ in range(rng.randint(1, 4)):
        zm = _random_map(rng, base, rng.randint(0, 8))
        maps.append(zm)
        base = zm.next_offset if len(zm) else base
    start, end = bounds[0], bounds[0] + bounds[1]
    want = plan_blocks(maps, t1, t1 + width, start, end)
    assert plan_indexed([(zm, None) for zm in maps], t1, t1 + width, start, end) == want


def test_zone_map_sidecar_round_trips(tmp_path: Path) -> None:
    zm = ZoneMap(42, 4096)
    zm.add(0, 100, 42, 50, 9, 5, 9, 1, 2)
    zm.add(100, 5000, 51, 60, 10, -3, 4, 0, 0)
    raw = zm.encode(b"h" * 61)
    back = ZoneMap.decode(raw, 42, 4096)
    assert back is not None
    assert [list(a) for a in back._arrays()] == [list(a) for a in zm._arrays()]
    assert back.matches(b"h" * 61) and not back.matches(b"g" * 61)
    assert ZoneMap.decode(raw, 43, 4096) is None
    assert ZoneMap.decode(raw[:-1], 42, 4096) is None


@pytest.mark.parametrize("per_batch", [100])
def test_the_plan_is_tight_on_the_bench_dataset(tmp_path: Path, per_batch: int) -> None:
    """bench/datasets.py's year: months shuffled, days in random order, 3 % late by 1-10 days.
    (A 1 % window must span many batches for the ratio to mean anything: with 1000-record
    batches that takes more records than a unit test should write; 400k records gave
    1.00-1.24 there, measured by hand.)"""
    from bench.datasets import month_shuffled as bench_month_shuffled

    tss = bench_month_shuffled(200_000, seed=1).tolist()
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=4 << 20,
                                          message_timestamp_after_max_ms=1 << 62))
    for i in range(0, len(tss), per_batch):
        log.append(build_batch([Record(0, t, None, b"v" * 60) for t in tss[i:i + per_batch]]),
                   now_ms=max(tss) + 1)
    batches = []
    for seg in log.segments:
        buf = seg.pread(0, max(seg.size, 0))
        batches += [(h.size, R.record_timestamps(buf, pos)) for pos, h in iter_batches(buf)]
    lo, hi = min(tss), max(tss)
    rng = random.Random(per_batch)
    for _ in range(6):
        t1 = rng.randrange(lo, hi)
        t2 = t1 + (hi - lo) // 100
        planned = sum(r.bytes for r in log.plan_time_window(t1, t2))
        holding = sum(size for size, ts in batches if any(t1 <= t < t2 for t in ts))
        assert holding > 0
        assert planned <= 1.5 * holding, (planned, holding)
    log.close()
