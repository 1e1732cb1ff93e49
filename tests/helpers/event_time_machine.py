"""The event-time state machine (zone maps, disorder stats, planned windows) and its
brute-force oracles, shared by the storage tests of event-time reads and counts.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from storage import records as R
from storage import segment as S
from storage.cleaner import CleanerSettings, clean_log
from storage.config import LogConfig
from storage.log import HAVE_NUMPY, Log
from storage.planner import plan_blocks
from storage.records import Record, build_batch, iter_batches
from storage.zonemap import NO_MAX, NO_MIN, ZoneMap, count_late

T0 = 1_700_000_000_000
NOW = T0 + 10_000_000


def data_records(log: Log) -> Iterator[tuple[R.BatchHeader, Record]]:
    """(batch header, record) of every data record in [log start, high watermark), decoded
    batch by batch from the segments' files (control batches left out)."""
    for seg in log.segments:
        size = max(seg.size, 0)
        if size == 0:
            continue
        buf = seg.pread(0, size)
        for pos, h in iter_batches(buf):
            if h.attributes & R.CONTROL_MASK:
                continue
            for r in R.decode_batch(buf, pos):
                if log.log_start_offset <= r.offset < log.high_watermark:
                    yield h, r


def log_records(log: Log) -> list[tuple[int, int]]:
    """(offset, timestamp) of every data record in [log start, high watermark)."""
    return [(r.offset, r.timestamp) for _, r in data_records(log)]


def oracle_disorder(recs: list[tuple[int, int]]) -> tuple[int, int, int]:
    late, worst = count_late([t for _, t in recs], -(1 << 63))
    return late, worst, len(recs)


def check_plan(log: Log, recs: list[tuple[int, int]], t1: int, t2: int,
               max_offset: int | None = None) -> None:
    plan = log.plan_time_window(t1, t2, max_offset=max_offset)
    if HAVE_NUMPY:
        assert [tuple(r) for r in plan] == oracle_plan(log, t1, t2, max_offset), (t1, t2)
    end = log.high_watermark if max_offset is None else min(max_offset, log.high_watermark)
    for a, b in zip(plan, plan[1:], strict=False):
        assert a.end_offset < b.start_offset, plan
    for r in plan:
        assert log.log_start_offset <= r.start_offset < r.end_offset <= end, (r, plan)
        assert r.bytes > 0
    starts = [r.start_offset for r in plan]
    import bisect
    for o, t in recs:
        if t1 <= t < t2 and o < end:
            i = bisect.bisect_right(starts, o) - 1
            assert i >= 0 and plan[i].start_offset <= o < plan[i].end_offset, (o, t, t1, t2, plan)


def oracle_plan(log: Log, t1: int, t2: int, max_offset: int | None = None) -> list[tuple[int, int, int]]:
    """The plan as plan_blocks makes it from zone maps in which each block a segment's
    sorted-timestamp index covers, and whose records (decoded from the .log) hold none
    in [t1, t2), holds no data record at all (one block per ``add``: interval 0)."""
    end = log.high_watermark if max_offset is None else min(max_offset, log.high_watermark)
    last = len(log.segments) - 1
    maps = []
    for j, seg in enumerate(log.segments):
        zm = seg.zone_map()
        tsi = seg.ts_index(zm, sealed=j < last)
        nb = tsi.nblocks if tsi is not None else 0
        copy = ZoneMap(seg.base_offset, 0)
        for i in range(len(zm)):
            e_off, e_pos = zm.block_end(i)
            mn, mx = zm.min[i], zm.max[i]
            if i < nb and not any(t1 <= t < t2 for _, t in block_records(seg, zm, i)):
                mn, mx = NO_MIN, NO_MAX
            copy.add(zm.pos[i], e_pos - zm.pos[i], zm.first[i], e_off - 1, zm.records[i],
                     mn, mx, 0, 0)
        copy.sync()
        maps.append(copy)
    return [tuple(r) for r in plan_blocks(maps, t1, t2, log.log_start_offset, end)]


def block_records(seg: S.LogSegment, zm: ZoneMap, i: int) -> list[tuple[int, int]]:
    """(offset, timestamp) of the data records in block i of ``zm``, from the .log."""
    end = zm.block_end(i)[1]
    buf = seg.pread(zm.pos[i], end - zm.pos[i])
    return [(r.offset, r.timestamp) for pos, h in iter_batches(buf)
            if not h.attributes & R.CONTROL_MASK for r in R.decode_batch(buf, pos)]


def check_zone_maps(log: Log) -> None:
    for seg in log.segments:
        zm = seg.zone_map()
        fresh = ZoneMap(seg.base_offset, log.config.index_interval_bytes)
        seg._zone_walk(fresh, 0)
        fresh.sync()
        assert zm.covered == fresh.covered == max(seg.size, 0)
        assert zm.next_offset == fresh.next_offset or not len(fresh)
        for name in ("first", "pos", "min", "max", "records"):
            assert list(getattr(zm, name)) == list(getattr(fresh, name)), (name, seg.base_offset)
        # Every block's disorder was counted exactly when it was written (nothing is left
        # for a later pass to read): its records against the running max it stored.
        for i in range(len(zm)):
            tss = [t for _, t in block_records(seg, zm, i)]
            assert (zm.late[i], zm.worst[i]) == count_late(tss, zm.p_at[i]), (seg.base_offset, i)


def _run(shape: str, k: int, lo: int, rng: random.Random) -> list[int]:
    """k timestamp offsets from ``lo`` in one of the shapes a run of records takes."""
    if shape == "sorted":
        return sorted(lo + rng.randint(0, 3000) for _ in range(k))
    if shape == "ties":
        return [lo] * k
    if shape == "descending":
        return sorted((lo + rng.randint(0, 3000) for _ in range(k)), reverse=True)
    if shape == "one_swap":
        ts = sorted(lo + rng.randint(0, 3000) for _ in range(k))
        i = rng.randrange(k)
        ts[i], ts[-1] = ts[-1], ts[i]
        return ts
    return [lo + rng.randint(0, 3000) for _ in range(k)]


RUN_SHAPES = ["sorted", "ties", "descending", "one_swap", "shuffled"]


class EventTimeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="chronolog-evt-"))
        self.clock = T0
        self.pid_seq = 0
        self.open_txn = False
        self.window = S._ZONE_WINDOW
        S._ZONE_WINDOW = 256  # rebuilds stop between small windows: partial maps happen

    def teardown(self) -> None:
        S._ZONE_WINDOW = self.window
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize(
        segment_bytes=st.integers(400, 4000),
        interval=st.sampled_from([0, 100, 300, 4096]),
        log_append_time=st.booleans(),
        compact=st.booleans(),
    )
    def start(self, segment_bytes: int, interval: int, log_append_time: bool,
              compact: bool) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes, index_interval_bytes=interval,
            message_timestamp_type="LogAppendTime" if log_append_time else "CreateTime",
            max_message_bytes=segment_bytes,
            cleanup_policy="compact" if compact else "delete",
        )
        self.log = Log(self.tmp / "t-0", self.config)

    def _now(self) -> int:
        self.clock += 7
        return self.clock

    @rule(data=st.data(), codec=st.sampled_from([0, 0, 1, 4]),
          shape=st.sampled_from(["in_order", "shuffled", "late_batch", "ties", "straddle"]))
    def append(self, data: st.DataObject, codec: int, shape: str) -> None:
        n = data.draw(st.integers(1, 8))
        base = T0 + data.draw(st.integers(0, 5000))
        if shape == "in_order":
            ts = sorted(base + data.draw(st.integers(0, 50)) for _ in range(n))
        elif shape == "ties":
            ts = [base] * n
        elif shape == "late_batch":
            ts = [T0 + data.draw(st.integers(0, 20)) for _ in range(n)]
        elif shape == "straddle":
            ts = [base - 3000 if i % 2 else base + 3000 for i in range(n)]
        else:
            ts = [base + data.draw(st.integers(-2000, 2000)) for _ in range(n)]
        keys = [b"k%d" % data.draw(st.integers(0, 3)) for _ in range(n)]
        txn = data.draw(st.booleans()) and not self.config.compact
        kwargs = {}
        if txn:
            kwargs = dict(producer_id=7, producer_epoch=0, base_sequence=self.pid_seq,
                          is_transactional=True)
            self.pid_seq += n
            self.open_txn = True
        batch = build_batch([Record(0, t, k, b"v" * (i % 5)) for i, (t, k) in
                             enumerate(zip(ts, keys, strict=True))], compression=codec, **kwargs)
        self.log.append(batch, now_ms=self._now())

    @rule(data=st.data(), codec=st.sampled_from([0, 1, 4]),
          shapes=st.lists(st.sampled_from(RUN_SHAPES), min_size=1, max_size=3),
          lo=st.sampled_from([0, 2_000, 5_000]))
    def append_runs(self, data: st.DataObject, codec: int, shapes: list[str], lo: int) -> None:
        """A batch of long runs of same-size records (the validation walk's column-wise
        path): sorted, tied, descending or shuffled, below, across or above what came
        before."""
        rng = random.Random(data.draw(st.integers(0, 1 << 16)))
        room = max(1, (self.config.segment_bytes - 120) // (11 * len(shapes)))
        ts: list[int] = []
        for shape in shapes:
            k = min(data.draw(st.integers(40, 120)), room)
            ts += [T0 + t for t in _run(shape, k, lo, rng)]
        keys = [b"k%d" % (i % 4) for i in range(len(ts))]  # compaction needs keys
        batch = build_batch([Record(0, t, k, b"") for t, k in zip(ts, keys, strict=True)],
                            compression=codec)
        if len(batch) <= self.config.segment_bytes:
            self.log.append(batch, now_ms=self._now())

    @rule(commit=st.booleans())
    def end_txn(self, commit: bool) -> None:
        if self.open_txn:
            self.log.append_control(commit, producer_id=7, producer_epoch=0,
                                    coordinator_epoch=0, now_ms=self._now())
            self.open_txn = False

    @rule(how=st.sampled_from(["clean", "kill", "kill_no_sidecars", "kill_torn", "clean_torn"]),
          data=st.data())
    def restart(self, how: str, data: st.DataObject) -> None:
        if how.startswith("clean"):
            self.log.close()
        else:
            for seg in self.log.segments:  # kill -9: nothing closed or written
                seg.release()
        sidecars = sorted((self.tmp / "t-0").glob("*.zonemap"))
        if how == "kill_no_sidecars":
            for p in sidecars:
                p.unlink()
        elif how.endswith("torn") and sidecars:
            p = data.draw(st.sampled_from(sidecars))
            raw = p.read_bytes()
            cut = data.draw(st.integers(0, max(0, len(raw) - 1)))
            if data.draw(st.booleans()):
                p.write_bytes(raw[:cut])
            else:
                flipped = bytearray(raw)
                flipped[cut] ^= 0x40
                p.write_bytes(bytes(flipped))
        self.log = Log(self.tmp / "t-0", self.config, clean_shutdown=how.startswith("clean"),
                       recovery_point=0)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        leo = self.log.log_end_offset
        if leo > self.log.log_start_offset:
            self.log.truncate_to(data.draw(st.integers(self.log.log_start_offset, leo)))
            self.open_txn = False

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        hw = self.log.high_watermark
        self.log.advance_log_start_offset(data.draw(st.integers(self.log.log_start_offset, hw)))
        self.log.delete_segments_below_log_start()

    @rule()
    def retention(self) -> None:
        import dataclasses
        cfg = self.log.config
        self.log.update_config(dataclasses.replace(cfg, retention_bytes=max(1, self.log.size_in_bytes() // 2)))
        self.log.delete_old_segments(NOW)
        self.log.update_config(cfg)

    @rule(data=st.data(), slices=st.integers(0, 3))
    def kill_then_partial_build_then_append(self, data: st.DataObject, slices: int) -> None:
        """A crash without sidecars, then the broker's background slices with no time
        left (one 256-byte window each: maps left partial), then appends."""
        self.restart("kill_no_sidecars", data)
        for _ in range(slices):
            self.log.build_zone_maps(0.0)
        self.append(data, 0, data.draw(st.sampled_from(["in_order", "shuffled", "late_batch"])))
        self.append(data, 0, "straddle")

    @rule(slices=st.integers(0, 3))
    def build_sorted_timestamp_indexes(self, slices: int) -> None:
        """The broker's background step: a few slices with no time left (indexes left
        covering some blocks), or to the end (0)."""
        if slices == 0:
            self.log.build_zone_maps(60_000)
            self.log.build_ts_indexes(60_000)
        for _ in range(slices):
            self.log.build_zone_maps(0.0)
            self.log.build_ts_indexes(0.0)

    @rule()
    def compact(self) -> None:
        if self.config.compact and len(self.log.segments) > 2:
            clean_log(self.log, None, NOW, CleanerSettings(), force=True)

    @invariant()
    def plans_cover_and_disorder_is_exact(self) -> None:
        recs = log_records(self.log)
        assert tuple(self.log.disorder_stats()) == oracle_disorder(recs)
        rng = random.Random(len(recs))
        tss = sorted(t for _, t in recs)
        windows = [(T0 - 100, T0 - 1), (T0 + 1_000_000, T0 + 2_000_000), (T0, T0),
                   (T0 - 1, NOW + 10**9)]
        for _ in range(4):
            a = rng.randint(T0 - 10, self.clock + 10)
            windows.append((a, a + rng.choice([1, 10, 500, 3000])))
        if tss:
            t = rng.choice(tss)
            windows += [(t, t + 1), (t - 5, t), (tss[0], tss[-1] + 1)]
        for t1, t2 in windows:
            check_plan(self.log, recs, t1, t2)
        if recs:
            mid = recs[len(recs) // 2][0]
            check_plan(self.log, recs, windows[-1][0], windows[-1][1], max_offset=mid)
        check_zone_maps(self.log)
