"""Every lookup of a partition log against a brute-force scan of the same records.

A hypothesis state machine appends random batches (timestamps in and out of order,
duplicates, every codec, random leader epochs), interleaved with clean and unclean
restarts, truncation, retention and log-start moves, over random segment sizes,
index intervals and index sizes; after each step the oracle (a plain list of every
batch) must agree with offset_for_timestamp, offset_range_for_times, the special
timestamps and read.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from storage.config import LogConfig
from storage.errors import InvalidTimestampError, OffsetOutOfRangeError
from storage.log import Log
from storage.records import Record, build_batch, decode_batch, iter_batches

T0 = 1_700_000_000_000
NOW = T0 + 100_000


@dataclasses.dataclass
class ModelBatch:
    base: int
    timestamps: list[int]  # effective record timestamps
    epoch: int
    log_append_time: bool

    @property
    def last(self) -> int:
        return self.base + len(self.timestamps) - 1


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="chronolog-prop-"))
        self.batches: list[ModelBatch] = []
        self.log_start = 0
        self.leo = 0
        self.last_append_time = -1

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize(
        segment_bytes=st.one_of(st.integers(300, 6000), st.integers(9000, 20000)),
        interval=st.sampled_from([0, 1, 50, 200, 1000, 4096]),
        index_entries=st.integers(2, 40),
        log_append_time=st.booleans(),
    )
    def start(self, segment_bytes: int, interval: int, index_entries: int,
              log_append_time: bool) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            segment_index_bytes=index_entries * 12,
            message_timestamp_type="LogAppendTime" if log_append_time else "CreateTime",
            max_message_bytes=segment_bytes,
        )
        self.log = Log(self.tmp / "topic-0", self.config)

    # -- oracle ------------------------------------------------------------------------
    def records(self) -> list[tuple[int, int, int, ModelBatch]]:
        out = []
        for b in self.batches:
            for i, ts in enumerate(b.timestamps):
                out.append((b.base + i, ts, b.epoch, b))
        return out

    def oracle(self, target: int) -> tuple[int, int, int] | None:
        for off, ts, epoch, _b in self.records():
            if off >= self.log_start and ts >= target:
                return ts, off, epoch
        return None

    # -- rules -------------------------------------------------------------------------
    @rule(
        deltas=st.lists(st.integers(0, 60), min_size=1, max_size=12),
        shift=st.integers(0, 400),
        codec=st.sampled_from([0, 0, 0, 1, 2, 3, 4]),
        epoch=st.integers(0, 3),
        now_delta=st.integers(-50, 50),
        value_size=st.integers(0, 40),
    )
    def append(self, deltas: list[int], shift: int, codec: int, epoch: int, now_delta: int,
               value_size: int) -> None:
        ts_list = [T0 + shift + d for d in deltas]
        recs = [Record(0, ts, b"k%d" % i, b"v" * value_size, []) for i, ts in enumerate(ts_list)]
        raw = build_batch(recs, compression=codec)
        if len(raw) > self.config.max_message_bytes:
            return
        now = NOW + now_delta
        result = self.log.append(raw, now_ms=now, leader_epoch=epoch)
        base = self.leo
        assert result.base_offset == base
        assert result.last_offset == base + len(ts_list) - 1
        if self.config.log_append_time:
            stamp = max(self.last_append_time, now)
            self.last_append_time = stamp
            assert result.log_append_time_ms == stamp
            eff = [stamp] * len(ts_list)
        else:
            assert result.log_append_time_ms == -1
            eff = ts_list
        assert result.max_timestamp == max(eff)
        self.batches.append(ModelBatch(base, eff, epoch, self.config.log_append_time))
        self.leo = base + len(eff)

    @rule(
        n=st.one_of(st.integers(48, 300), st.integers(512, 900)),
        shift=st.integers(0, 400),
        spread=st.sampled_from([1, 3, 10, 50]),
        seed=st.integers(0, 1000),
        codec=st.sampled_from([0, 0, 0, 1]),
        now_delta=st.integers(-50, 50),
    )
    def append_large(self, n: int, shift: int, spread: int, seed: int, codec: int,
                     now_delta: int) -> None:
        """Batches long enough for the column search and block summaries."""
        import random

        rng = random.Random(seed)
        ts_list = [T0 + shift + (i * 60) // n // spread * spread
                   + (rng.randint(-30, 30) if rng.random() < 0.05 else 0) for i in range(n)]
        ts_list = [max(T0, t) for t in ts_list]
        raw = build_batch([Record(0, t, None, None, []) for t in ts_list], compression=codec)
        if len(raw) > self.config.max_message_bytes:
            return
        now = NOW + now_delta
        result = self.log.append(raw, now_ms=now, leader_epoch=1)
        assert result.base_offset == self.leo
        if self.config.log_append_time:
            stamp = max(self.last_append_time, now)
            self.last_append_time = stamp
            eff = [stamp] * n
        else:
            eff = ts_list
        self.batches.append(ModelBatch(self.leo, eff, 1, self.config.log_append_time))
        self.leo += n

    @precondition(lambda self: not self.config.log_append_time)
    @rule(delta=st.integers(3_600_001, 10**9))
    def append_future_timestamp_is_rejected_whole(self, delta: int) -> None:
        raw = build_batch([Record(0, NOW, None, b"ok", []), Record(0, NOW + delta, None, b"x", [])])
        leo = self.log.log_end_offset
        try:
            self.log.append(raw, now_ms=NOW)
        except InvalidTimestampError as exc:
            assert [i for i, _ in exc.record_errors] == [1]
        else:
            raise AssertionError("a record beyond message.timestamp.after.max.ms was accepted")
        assert self.log.log_end_offset == leo

    @rule(ts=st.integers(T0 - 5, T0 + 470))
    def lookup_matches_oracle(self, ts: int) -> None:
        want = self.oracle(ts)
        for _ in range(3):  # cold search, then the block summary is built, then used
            got = self.log.offset_for_timestamp(ts)
            assert (tuple(got) if got else None) == want, (ts, got, want)

    @rule(data=st.data())
    def lookup_near_a_stored_timestamp_matches_oracle(self, data: st.DataObject) -> None:
        """Targets drawn from the records' own timestamps (+-2), so LogAppendTime
        stamps (around NOW, far above the fixed range) are searched inside their range."""
        stamps = [ts for _off, ts, _e, _b in self.records()]
        if not stamps:
            return
        ts = data.draw(st.sampled_from(stamps)) + data.draw(st.integers(-2, 2))
        want = self.oracle(ts)
        for _ in range(3):
            got = self.log.offset_for_timestamp(ts)
            assert (tuple(got) if got else None) == want, (ts, got, want)

    @rule(t1=st.integers(T0 - 5, T0 + 470), width=st.integers(0, 200))
    def range_matches_oracle(self, t1: int, width: int) -> None:
        t2 = t1 + width
        a = self.oracle(t1)
        b = self.oracle(t2)
        start = a[1] if a else self.leo
        end = b[1] if b else self.leo
        assert self.log.offset_range_for_times(t1, t2) == (start, max(start, end))

    @rule(budget=st.sampled_from([0.0, 0.0, 1.0, 1000.0]))
    def summarise_in_the_background(self, budget: float) -> None:
        """Background summary building resumes across appends, rolls, truncation and
        retention; lookups stay exact (checked by the lookup rules)."""
        self.log.build_summaries(budget)

    @rule()
    def special_timestamps(self) -> None:
        log = self.log
        assert log.log_start_offset == self.log_start
        assert log.log_end_offset == self.leo == log.high_watermark
        latest = log.offset_for_timestamp(-1)
        assert latest is not None and latest.offset == self.leo and latest.timestamp == -1
        if self.batches:
            assert latest.leader_epoch == self.batches[-1].epoch
        earliest = log.offset_for_timestamp(-2)
        assert earliest is not None and earliest.offset == self.log_start
        assert log.offset_for_timestamp(-4) == earliest
        assert tuple(log.offset_for_timestamp(-5) or ()) == (-1, -1, -1)
        # MAX_TIMESTAMP covers every record still in a segment (Kafka does not filter
        # by log start), first record carrying the max; base offset under LogAppendTime.
        first_base = log.segments[0].base_offset
        recs = [r for r in self.records() if r[0] >= first_base]
        got = log.offset_for_timestamp(-3)
        if not recs or self.log_start == self.leo:
            assert got is None
        else:
            mx = max(r[1] for r in recs)
            off, _ts, epoch, batch = next(r for r in recs if r[1] == mx)
            if batch.log_append_time:
                off = batch.base
            assert got is not None and tuple(got) == (mx, off, epoch)

    @precondition(lambda self: self.batches)
    @rule(data=st.data(), max_bytes=st.integers(1, 3000))
    def read_starts_at_the_batch_holding_the_offset(self, data: st.DataObject,
                                                      max_bytes: int) -> None:
        if self.log_start >= self.leo:
            return
        offset = data.draw(st.integers(self.log_start, self.leo - 1))
        raw = self.log.read(offset, max_bytes)
        batches = list(iter_batches(raw))
        assert batches, "read must return at least one whole batch"
        pos, h = batches[0]
        assert h.base_offset <= offset <= h.last_offset
        model = next(b for b in self.batches if b.base <= offset <= b.last)
        recs = decode_batch(raw, pos)
        assert [r.offset for r in recs] == list(range(model.base, model.last + 1))
        assert [r.timestamp for r in recs] == model.timestamps
        assert len(raw) <= max(max_bytes, h.size)
        assert self.log.read(self.leo, max_bytes) == b""
        for bad in (self.log_start - 1, self.leo + 1):
            if bad >= 0:
                try:
                    self.log.read(bad, max_bytes)
                except OffsetOutOfRangeError:
                    pass
                else:
                    raise AssertionError(f"read({bad}) outside the log did not raise")

    def _reset_append_clock(self) -> None:
        # The LogAppendTime floor is rebuilt from the records the log still holds.
        stamps = [ts for b in self.batches for ts in b.timestamps]
        self.last_append_time = max(stamps, default=-1)

    @rule()
    def restart_clean(self) -> None:
        self._reset_append_clock()
        start = self.log.log_start_offset
        self.log.close()
        self.log = Log(self.tmp / "topic-0", self.config, log_start_offset=start,
                       clean_shutdown=True)

    @rule(data=st.data())
    def restart_unclean(self, data: st.DataObject) -> None:
        self._reset_append_clock()
        start = self.log.log_start_offset
        rp = data.draw(st.integers(0, self.log.recovery_point))
        for seg in self.log.segments:
            seg.release()  # a crash: nothing trimmed, no final time entries
        self.log = Log(self.tmp / "topic-0", self.config, log_start_offset=start,
                       recovery_point=rp, clean_shutdown=False)
        assert self.log.recovered_bytes_cut == 0

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def crash_tearing_the_last_batch(self, data: st.DataObject) -> None:
        """SIGKILL mid-write: the last batch is only partly on disk; unclean recovery
        must cut exactly it and keep everything before."""
        active = self.log.active
        last = self.batches[-1]
        if active.size <= 0 or last.base < active.base_offset:
            return
        raw = active.log_path.read_bytes()
        pos, h = list(iter_batches(raw))[-1]
        assert h.base_offset == last.base
        cut = data.draw(st.integers(1, h.size - 1))
        start = self.log.log_start_offset
        rp = data.draw(st.integers(0, self.log.recovery_point))
        for seg in self.log.segments:
            seg.release()
        os.truncate(active.log_path, len(raw) - cut)
        self.log = Log(self.tmp / "topic-0", self.config, log_start_offset=start,
                       recovery_point=rp, clean_shutdown=False)
        assert self.log.recovered_bytes_cut == h.size - cut
        self.batches.pop()
        self.leo = last.base
        self.log_start = min(self.log_start, self.leo)
        self._reset_append_clock()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        first_base = self.log.segments[0].base_offset
        target = data.draw(st.integers(first_base, self.leo))
        self.log.truncate_to(target)
        if target < self.leo:
            # Batch granularity: a batch holding the target goes entirely.
            self.batches = [b for b in self.batches if b.last < target]
            self.leo = self.batches[-1].last + 1 if self.batches else first_base
            self._reset_append_clock()
        self.log_start = min(self.log_start, self.leo)

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def advance_log_start(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start, self.leo))
        self.log.advance_log_start_offset(target)
        self.log_start = target

    @rule(age=st.integers(0, 600), use_bytes=st.booleans(), keep=st.integers(0, 4000))
    def retention(self, age: int, use_bytes: bool, keep: int) -> None:
        cfg = dataclasses.replace(
            self.config,
            retention_ms=age if not use_bytes else -1,
            retention_bytes=keep if use_bytes else -1,
        )
        self.log.update_config(cfg)
        now = T0 + 400 + age if not self.config.log_append_time else NOW + 100 + age
        old_start = self.log_start
        self.log.delete_old_segments(now)
        self.log.update_config(self.config)
        new_start = self.log.log_start_offset
        assert new_start >= old_start
        assert new_start == max(old_start, self.log.segments[0].base_offset)
        if not use_bytes:
            gone = [r for r in self.records() if old_start <= r[0] < new_start]
            assert all(now - ts > age for _o, ts, _e, _b in gone)
        self.log_start = new_start
        self.batches = [b for b in self.batches if b.last >= self.log.segments[0].base_offset]

    @invariant()
    def ends_agree(self) -> None:
        if hasattr(self, "log"):
            assert self.log.log_end_offset == self.leo
            assert self.log.log_start_offset == self.log_start


_PROFILE = settings.default
LogMachine.TestCase.settings = settings(
    # the project profile's example count (60, or CHRONOLOG_HYPOTHESIS_EXAMPLES)
    max_examples=_PROFILE.max_examples if _PROFILE is not None else 60,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogAgainstOracle = LogMachine.TestCase
