"""The remote tier as a state machine, against a brute-force oracle (#26).

Hypothesis produces batches with out-of-order timestamps and transactions (data batch
plus COMMIT/ABORT marker), rolls, bumps the leader epoch, copies to a ``file://``
bucket up to a random last stable offset, runs local retention (local.retention.bytes
= 0: every copied segment may go), remote (total) retention, DeleteRecords, stops a
copy or a delete after any of its steps and reopens the partition from disk and
bucket (what a kill -9 leaves: the segment files stay in the page cache, nothing else
runs), and restarts cleanly. After every step, against the list of every record
appended (offset, timestamp, data or marker) and a twin log that keeps everything
locally:

- EARLIEST, LATEST, EARLIEST_LOCAL (-4), LATEST_TIERED (-5), MAX_TIMESTAMP and "first
  offset with timestamp >= T" for random and boundary T equal the oracle's;
- reading from every offset in [log start, LEO) returns whole batches starting with
  the one holding it, byte-identical to the twin's batch;
- the event-time plan and window counts equal the twin's (as if the data were local)
  and cover every data record in the window;
- nothing at or above the log start is ever lost; no segment that is not copied leaves
  the local disk; the bucket holds exactly the files of the manifest's segments.

150 examples of up to 30 steps in ``make test`` (about 5-15 s); ``TIER_EXAMPLES=1000`` for a long run.
Checked to fail when the read boundary (``offset < first local base``), the remote
segment filter (``end_offset >= log start``) or the local-retention copy guard is off
by one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError
from storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    HAVE_NUMPY,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
)
from storage.records import Record, build_batch, iter_batches
from storage.remote import manifest as mf
from storage.remote.index_cache import RemoteIndexCache
from storage.remote.manifest import SegmentState
from storage.remote.store import ObjectStore
from storage.remote.tier import RemoteTier

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=600, index_interval_bytes=120, segment_index_bytes=240,
                message_timestamp_after_max_ms=1 << 62, retention_ms=-1,
                remote_storage_enable=True, local_retention_bytes=0)
# DeleteRecords-free twin: everything local, same segments.
TWIN_CFG = LogConfig(segment_bytes=600, index_interval_bytes=120, segment_index_bytes=240,
                     message_timestamp_after_max_ms=1 << 62, retention_ms=-1)
PID = 7
COPY_STEPS = 2 + len(mf.FILE_SUFFIXES)
DELETE_STEPS = 2 + len(mf.FILE_SUFFIXES)

stamps_st = st.lists(st.integers(0, 4_000), min_size=1, max_size=5)


class TierMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="chronolog-tier-sm-"))
        self.store = ObjectStore(f"file://{self.tmp}/bucket")
        self.twin = Log(self.tmp / "twin-0", TWIN_CFG)
        self.records: list[tuple[int, int, bool]] = []  # offset, timestamp, is data
        self.epochs: dict[int, int] = {}  # offset -> leader epoch of its batch
        self.log_start = 0
        self.checkpoint_start = 0  # what the broker's log-start checkpoint holds
        self.epoch = 0
        self.copied: list[tuple[int, int]] = []  # (base, end) of the segments in the tier
        self.cfg = CFG
        self._open(clean=True)

    def _open(self, *, clean: bool) -> None:
        self.log = Log(self.tmp / "t-0", self.cfg, log_start_offset=self.checkpoint_start,
                       clean_shutdown=clean, recovery_point=0 if not clean else None)
        self.cache = RemoteIndexCache(self.tmp / "remote-log-index-cache", 600)
        self.tier = RemoteTier(self.log, self.store, "t", 0, topic_id="00" * 16, partitions=1,
                               cache=self.cache)

    def _crash(self) -> None:
        """kill -9: nothing closes, nothing more is written; reopen from disk + bucket."""
        for seg in self.log.segments:
            seg.release()
        self._open(clean=False)

    def teardown(self) -> None:
        for seg in self.log.segments:
            seg.release()
        for seg in self.twin.segments:
            seg.release()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- writes ------------------------------------------------------------------------
    def _append(self, stamps: list[int], **kw: object) -> None:
        batch = build_batch([Record(0, T0 + s, None, b"v" * 30) for s in stamps], **kw)  # type: ignore[arg-type]
        r = self.log.append(batch, now_ms=T0, leader_epoch=self.epoch)
        r2 = self.twin.append(batch, now_ms=T0, leader_epoch=self.epoch)
        assert r.base_offset == r2.base_offset
        self.records += [(r.base_offset + i, T0 + s, True) for i, s in enumerate(stamps)]
        self.epochs.update((r.base_offset + i, self.epoch) for i in range(len(stamps)))

    @rule(stamps=stamps_st)
    def produce(self, stamps: list[int]) -> None:
        self._append(stamps)

    @rule(stamps=stamps_st, commit=st.booleans(), marker=st.integers(0, 4_000))
    def produce_transaction(self, stamps: list[int], commit: bool, marker: int) -> None:
        self._append(stamps, producer_id=PID, producer_epoch=0, base_sequence=0,
                     is_transactional=True)
        for log in (self.log, self.twin):
            r = log.append_control(commit, producer_id=PID, producer_epoch=0,
                                   coordinator_epoch=0, now_ms=T0 + marker,
                                   leader_epoch=self.epoch)
        self.records.append((r.base_offset, T0 + marker, False))
        self.epochs[r.base_offset] = self.epoch

    @rule()
    def bump_leader_epoch(self) -> None:
        self.epoch += 1

    @rule()
    def roll(self) -> None:
        self.log.roll(T0)
        self.twin.roll(T0)

    # -- the tier ------------------------------------------------------------------------
    @property
    def uploaded(self) -> int:
        return max((end for _, end in self.copied), default=-1)

    def _expect_upload(self, lso: int) -> None:
        """Kafka's copy rule over the segment layout: every sealed segment whose next
        base <= lso, from the one holding max(highest copied + 1, log start)."""
        segs = self.log.segments
        start = max(self.uploaded + 1, self.log_start)
        for seg, nxt in zip(segs, segs[1:], strict=False):
            if nxt.base_offset <= lso and nxt.base_offset > start and seg.size > 0:
                self.copied.append((seg.base_offset, nxt.base_offset - 1))

    def _expire_copied(self) -> None:
        self.copied = [(b, e) for b, e in self.copied if e >= self.log_start]

    @rule(where=st.floats(0, 1))
    def upload(self, where: float) -> None:
        hw = self.log.high_watermark
        lso = self.log_start + int(where * (hw - self.log_start))
        self._expect_upload(lso)
        self.tier.copy(lso)
        assert [(s.base_offset, s.end_offset) for s in self.tier.finished()] == self.copied

    @rule(by_time=st.booleans())
    def local_retention(self, by_time: bool) -> None:
        """local.retention.bytes=0, or local.retention.ms=0: every local segment is due,
        but only copied ones may go."""
        self._twin_sync()
        if by_time:
            self.log.update_config(LogConfig.from_kafka(
                {"local.retention.bytes": "-2", "local.retention.ms": "0"}, CFG))
        self.log.delete_old_segments(T0 + 10_000)
        self.log.update_config(CFG)
        self.twin.delete_segments_below_log_start()  # the same log-start rule, all local
        # nothing that is not copied left the local disk
        assert self.log.segments[0].base_offset <= max(self.uploaded + 1, self.log_start)

    def _expire_remote_under(self, retention: dict[str, str], now: int) -> None:
        """Run remote expiration at ``now`` under a passing topic retention setting,
        follow the log start it leaves in the model, and go back to CFG."""
        self.cfg = LogConfig.from_kafka(retention, CFG)
        self.log.update_config(self.cfg)
        self.tier.expire(now)
        self.log_start = self.log.log_start_offset
        self._expire_copied()
        self.checkpoint_start = self.log_start
        self.cfg = CFG
        self.log.update_config(CFG)

    @rule(keep=st.integers(0, 3_000))
    def remote_retention_by_bytes(self, keep: int) -> None:
        self._expire_remote_under({"retention.bytes": str(keep)}, T0 + 10_000)

    @rule(age=st.integers(0, 4_000))
    def remote_retention_by_time(self, age: int) -> None:
        now = T0 + 4_000
        expected = self.log_start
        for rs in self.tier.finished():  # oldest first, stopping at the first segment to keep
            if rs.end_offset < self.log_start or now - rs.max_timestamp > age:
                expected = max(expected, rs.next_offset)
            else:
                break
        self._expire_remote_under({"retention.ms": str(age)}, now)
        assert self.log_start == min(expected, self.log.log_end_offset)

    @rule(where=st.floats(0, 1))
    def delete_records(self, where: float) -> None:
        hw = self.log.high_watermark
        self.delete_records_to(self.log_start + int(where * (hw - self.log_start)))

    def delete_records_to(self, cut: int) -> None:
        self.log.advance_log_start_offset(cut)
        self.twin.advance_log_start_offset(cut)
        self.tier.persist_log_start()
        self.log_start = cut
        self.checkpoint_start = cut
        self.log.delete_segments_below_log_start()
        self.twin.delete_segments_below_log_start()

    @rule(i=st.integers(0, 20), edge=st.sampled_from([-1, 0, 1]))
    def delete_records_at_a_segment_boundary(self, i: int, edge: int) -> None:
        """DeleteRecords to a copied segment's last offset, or one either side of it:
        the boundary cases of "which remote segment still holds the log start"."""
        ends = [e for _, e in self.copied if e + edge >= self.log_start]
        if ends:
            self.delete_records_to(min(ends[i % len(ends)] + edge, self.log.high_watermark))

    @rule()
    def remote_delete_below_log_start(self) -> None:
        """The expiration task after a DeleteRecords: segments wholly below the start go."""
        self.tier.expire(T0)
        self._expire_copied()
        assert self.log.log_start_offset == self.log_start

    @precondition(lambda self: len(self.log.segments) > 1)
    @rule(stop_after=st.integers(1, COPY_STEPS))
    def crash_during_copy(self, stop_after: int) -> None:
        candidates = self.tier.copy_candidates(self.log.high_watermark)
        if not candidates:
            return
        seg = candidates[0]
        nxt = self.log.segments[self.log.segments.index(seg) + 1].base_offset
        steps = self.tier.copy_steps(seg)
        for _ in range(stop_after):
            next(steps)
        steps.close()  # the process is gone: nothing after this step ran
        if stop_after == COPY_STEPS:
            self.copied.append((seg.base_offset, nxt - 1))
        self._crash()
        assert self.tier.highest_offset == self.uploaded

    @rule(stop_after=st.integers(1, DELETE_STEPS), keep=st.integers(0, 2_000))
    def crash_during_delete(self, stop_after: int, keep: int) -> None:
        self.log.update_config(LogConfig.from_kafka({"retention.bytes": str(keep)}, CFG))
        victims = self.tier.expired(T0)
        if not victims:
            self.log.update_config(CFG)
            return
        steps = self.tier.delete_steps(victims[0])
        for _ in range(stop_after):
            next(steps)
        steps.close()
        self.log_start = max(self.log_start, victims[0].next_offset)
        # from DELETE_SEGMENT_STARTED on, the next open finishes the delete
        self.copied = [c for c in self.copied if c[0] != victims[0].base_offset]
        self.log.update_config(CFG)
        self._crash()  # the checkpoint is older: the manifest carries the new start
        assert self.log.log_start_offset == self.log_start

    @rule()
    def restart(self) -> None:
        self.log.close()
        self._open(clean=True)

    # -- what every step must leave --------------------------------------------------------
    def _twin_sync(self) -> None:
        if self.twin.log_start_offset < self.log_start:
            self.twin.advance_log_start_offset(self.log_start)

    @invariant()
    def list_offsets_match_the_oracle(self) -> None:
        self._twin_sync()
        log = self.log
        hw = log.high_watermark
        assert hw == (self.records[-1][0] + 1 if self.records else 0)
        assert log.log_start_offset == self.log_start
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == self.log_start  # type: ignore[union-attr]
        assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == hw  # type: ignore[union-attr]
        local = log.offset_for_timestamp(EARLIEST_LOCAL_TIMESTAMP)
        assert local is not None
        assert local.offset == max(self.log_start, log.segments[0].base_offset)
        # everything between the log start and the local start is in the tier
        assert local.offset == self.log_start or self.uploaded >= local.offset - 1
        tiered = log.offset_for_timestamp(LATEST_TIERED_TIMESTAMP)
        assert tiered is not None and tiered.offset == self.uploaded
        if self.uploaded >= 0:  # the leader epoch of the batch holding it, as the twin has it
            assert tiered.leader_epoch == self._epoch(self.uploaded)
        # KIP-1023 (Kafka's UnifiedLog.fetchEarliestPendingUploadOffset)
        pending = log.offset_for_timestamp(EARLIEST_PENDING_UPLOAD_TIMESTAMP)
        if self.uploaded >= 0:
            want = max(self.uploaded + 1, self.log_start)
        else:
            want = self.log_start if local.offset == self.log_start else -1
        assert pending is not None and pending.offset == want
        if 0 <= want < hw:
            assert pending.leader_epoch == self._epoch(want)
        if self.log_start < hw:
            assert tuple(log.offset_for_timestamp(EARLIEST_TIMESTAMP)) == tuple(  # type: ignore[arg-type]
                self.twin.offset_for_timestamp(EARLIEST_TIMESTAMP))  # type: ignore[arg-type]
        assert [(s.base_offset, s.end_offset) for s in self.tier.finished()] == self.copied
        live = [r for r in self.records if r[0] >= self.log_start]
        probes = {T0 - 1, T0, T0 + 4_001, *(t for _, t, _d in live)}
        probes |= {t + 1 for _, t, _d in live}
        for t in sorted(probes):
            hit = log.offset_for_timestamp(t)
            want = next(((o, ts) for o, ts, _d in live if ts >= t), None)
            assert (None if hit is None else (hit.offset, hit.timestamp)) == want, t
            if hit is not None:
                twin = self.twin.offset_for_timestamp(t)
                assert twin is not None and tuple(twin) == tuple(hit), t
        # MAX_TIMESTAMP: every record still in a segment (Kafka does not filter by log start)
        bases = [rs.base_offset for rs in self.tier.readable()] + [log.segments[0].base_offset]
        kept = [r for r in self.records if r[0] >= min(bases)]
        got = log.offset_for_timestamp(MAX_TIMESTAMP)
        if not kept or self.log_start == hw:
            assert got is None
        else:
            mx = max(t for _, t, _d in kept)
            off = next(o for o, t, _d in kept if t == mx)
            assert got is not None and tuple(got) == (mx, off, self._epoch(off))

    def _epoch(self, offset: int) -> int:
        return self.epochs[offset]

    @invariant()
    def every_offset_reads_its_batch(self) -> None:
        log = self.log
        if self.log_start > 0:
            try:
                log.read(self.log_start - 1, 1 << 16)
            except OffsetOutOfRangeError:
                pass
            else:
                raise AssertionError("read below the log start must be out of range")
        for off in range(self.log_start, log.high_watermark):
            data = log.read(off, 200)
            twin = self.twin.read(off, 1)
            batches = list(iter_batches(data))
            (_, th), *_ = list(iter_batches(twin))
            pos, h = batches[0]
            assert pos == 0 and h.base_offset <= off <= h.last_offset, off
            assert data[:h.size] == twin[:th.size], off
            if log.is_remote_offset(off):  # whole batches only, at least one
                assert sum(x.size for _, x in batches) == len(data)
                assert len(data) <= 200 or len(batches) == 1
            # a read_committed reader's bound (the LSO): nothing at or past it
            bounded = log.read(off, 1 << 16, max_offset=off + 1)
            want = self.twin.read(off, 1 << 16, max_offset=off + 1)
            assert bounded[:h.size] == want[:h.size]
            assert all(x.base_offset <= off for _, x in iter_batches(bounded))

    @invariant()
    def event_time_plans_and_counts_match(self) -> None:
        self._twin_sync()
        live = [(o, t) for o, t, d in self.records if d and o >= self.log_start]
        for t1, t2 in ((T0, T0 + 1_000), (T0 + 500, T0 + 3_000), (T0 + 3_999, T0 + 4_001)):
            plan = self.log.plan_time_window(t1, t2)
            assert plan == self.twin.plan_time_window(t1, t2), (t1, t2)
            for o, t in live:
                if t1 <= t < t2:
                    assert any(r.start_offset <= o < r.end_offset for r in plan), (o, t)
        if HAVE_NUMPY:
            bounds = [T0, T0 + 1_000, T0 + 2_000, T0 + 4_001]
            want = [sum(1 for _, t in live if a <= t < b) for a, b in zip(bounds, bounds[1:],
                                                                        strict=False)]
            assert self.log.count_time_windows(bounds) == want

    @invariant()
    def bucket_holds_exactly_the_manifest(self) -> None:
        m = self.tier.manifest
        assert m.log_start_offset <= self.log_start
        assert all(s.state == SegmentState.COPY_SEGMENT_FINISHED for s in m.segments)
        want = {mf.segment_key("t", 0, s, suffix) for s in m.segments
                for suffix in mf.FILE_SUFFIXES}
        have = {o.key for o in self.store.list("topics/t/0/")} - {mf.manifest_key("t", 0)}
        assert have == want
        assert self.cache.size_bytes <= self.cache.budget


TierMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("TIER_EXAMPLES", "150")), stateful_step_count=30, deadline=None, report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_tier_state_machine = TierMachine.TestCase
