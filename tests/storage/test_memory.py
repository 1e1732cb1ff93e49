"""Mapped .log pages are returned to the page cache on request, and nothing changes."""

from __future__ import annotations

import random
from pathlib import Path

from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

T0 = 1_700_000_000_000


def resident_kib_of(path: Path) -> int:
    """Rss of this process's mappings of ``path``, from /proc/self/smaps."""
    total = 0
    current = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
            current = line.endswith(str(path))
        elif current and line.startswith("Rss:"):
            total += int(head[1])
    return total


def test_release_pages_drops_resident_log_pages_and_lookups_stay_exact(tmp_path: Path) -> None:
    rng = random.Random(3)
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=4096))
    recs: list[tuple[int, int]] = []
    ts = T0
    for _ in range(400):
        batch = []
        for _ in range(50):
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

    check()
    log_file = log.segments[-1].log_path
    before = resident_kib_of(log_file)
    assert before > 500  # the searches touched a good part of the ~2.3 MB log
    log.release_pages()
    assert resident_kib_of(log_file) < before / 10
    check()  # pages come back on demand, answers unchanged
    log.close()
