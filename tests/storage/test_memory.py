"""The .log is read, never mapped: searches and summary building leave no .log page
in the process's RSS, and answers stay exact."""

from __future__ import annotations

import random
from pathlib import Path

from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

T0 = 1_700_000_000_000


def mappings_of(path: Path) -> int:
    """How many of this process's mappings are of ``path``, from /proc/self/maps."""
    return sum(1 for line in Path("/proc/self/maps").read_text().splitlines()
               if line.endswith(str(path)))


def test_lookups_and_summaries_map_no_log_page_and_stay_exact(tmp_path: Path) -> None:
    rng = random.Random(3)
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=4096))
    recs: list[tuple[int, int]] = []
    ts = T0
    for n in [50] * 300 + [600] * 20:  # small batches, then summarised ones
        batch = []
        for _ in range(n):
            ts += rng.choice([0, 1, 7])
            batch.append(Record(0, ts - rng.choice([0, 0, 30]), None, b"x" * 100, []))
        base = log.append(build_batch(batch), now_ms=T0 + 10**9).base_offset
        recs += [(base + i, r.timestamp) for i, r in enumerate(batch)]
    targets = [rng.randint(T0, ts) for _ in range(300)]

    def check() -> None:
        for target in targets:
            want = next(((t, o) for o, t in recs if t >= target), None)
            got = log.offset_for_timestamp(target)
            assert (got[:2] if got else None) == want

    check()  # unsummarised: first searches, then summaries built on the second
    check()
    while not log.build_summaries(50):
        pass
    check()
    assert all(mappings_of(seg.log_path) == 0 for seg in log.segments)
    log.close()
