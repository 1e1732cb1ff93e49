"""Time lookups over a compacted log of large batches, where the search's caches
(block summaries, remembered walk starts, index key arrays) were built before the
clean: every lookup afterwards — before and after new summaries, with the log start
moved inside a compacted batch — is the first surviving offset with timestamp >= T,
as a brute-force scan of the surviving records says."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.cleaner import CleanerSettings, clean_log
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch, decode_batch

T0 = 1_700_000_000_000


def _records(log: Log) -> list[tuple[int, int]]:
    out = []
    for seg in log.segments:
        for info in seg.iter_batches(0):
            out.extend((r.offset, r.timestamp)
                       for r in decode_batch(seg.pread(info.position, info.size), 0))
    return out


def _check(log: Log, recs: list[tuple[int, int]], targets: list[int]) -> None:
    start = log.log_start_offset
    alive = [(o, t) for o, t in recs if o >= start]
    for t in targets:
        want = next(((ts, o) for o, ts in alive if ts >= t), None)
        hit = log.offset_for_timestamp(t)
        assert (None if hit is None else (hit.timestamp, hit.offset)) == want, t


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 1 << 30), keys=st.sampled_from([20, 300, 5000]),
       log_append_time=st.booleans(), shuffle=st.booleans())
def test_lookups_after_compaction_equal_the_oracle(tmp_path_factory, seed: int, keys: int,  # type: ignore[no-untyped-def]
                                                  log_append_time: bool, shuffle: bool) -> None:
    rng = random.Random(seed)
    d: Path = tmp_path_factory.mktemp("lookups")
    cfg = LogConfig.from_kafka({
        "cleanup.policy": "compact", "segment.bytes": "200000", "index.interval.bytes": "2000",
        "message.timestamp.type": "LogAppendTime" if log_append_time else "CreateTime",
        "message.timestamp.before.max.ms": str(1 << 50)})
    log = Log(d / "t-0", cfg)
    now = T0
    for b in range(12):
        n = rng.choice([600, 1000])
        stamps = [T0 + b * 1000 + i for i in range(n)]
        if shuffle:
            rng.shuffle(stamps)
        recs = [Record(i, stamps[i], b"key-%06d" % rng.randrange(keys), b"x" * 20, [])
                for i in range(n)]
        now = T0 + b * 1000 + 2000
        log.append(build_batch(recs), now_ms=now)
    log.roll(now)
    before = _records(log)
    targets = sorted({ts for _, ts in before[:: max(1, len(before) // 300)]} |
                     {T0 - 1, T0 + 50_000})
    targets += [t + 1 for t in targets]
    while not log.build_summaries(50):
        pass
    _check(log, before, targets)  # summaries, key arrays and walk starts now exist
    _check(log, before, targets)
    assert clean_log(log, None, now + 1, CleanerSettings(), force=True) is not None
    after = _records(log)
    assert len(after) < len(before)
    _check(log, after, targets)
    while not log.build_summaries(50):
        pass
    _check(log, after, targets)
    _check(log, after, targets)
    # The log start inside a compacted batch (DeleteRecords): offsets below it are
    # not answered, and a removed offset is never answered.
    log.advance_log_start_offset(after[len(after) // 2][0] - 1)
    _check(log, after, targets)
    log.close()
