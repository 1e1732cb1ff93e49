"""Quick measurements behind docs/storage.md's zone-map choices (not part of make bench).

    python -m bench.zonemap_measure startup [records]   # sidecar load vs rebuild from .log
    python -m bench.zonemap_measure append              # Log.append CPU per record

``append`` runs against whatever ``storage`` is importable, so running it with
PYTHONPATH set to a checkout without zone maps gives the A side of an A/B.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

T0 = 1_600_000_000_000
DAY = 86_400_000


def _batches(n_records: int, per_batch: int, seed: int = 1) -> list[bytes]:
    """Month-shuffled timestamps (whole months out of order, 2 % a few days late)."""
    rng = random.Random(seed)
    months = list(range(12))
    rng.shuffle(months)
    per_month = n_records // 12
    out = []
    for m in months:
        tss = sorted(T0 + m * 30 * DAY + rng.randrange(30 * DAY) for _ in range(per_month))
        for i in range(len(tss)):
            if rng.random() < 0.02:
                tss[i] -= rng.randrange(3 * DAY)
        for i in range(0, len(tss), per_batch):
            out.append(build_batch([Record(0, t, None, b"v" * 80) for t in tss[i:i + per_batch]]))
    return out


def startup(n_records: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="zm-measure-"))
    cfg = LogConfig(segment_bytes=64 << 20, message_timestamp_after_max_ms=1 << 62)
    try:
        log = Log(tmp / "t-0", cfg)
        now = T0 + 400 * DAY
        for b in _batches(n_records, 500):
            log.append(b, now_ms=now)
        log.close()
        d = tmp / "t-0"
        log_bytes = sum(p.stat().st_size for p in d.glob("*.log"))
        side_bytes = sum(p.stat().st_size for p in d.glob("*.zonemap"))
        blocks = sum((p.stat().st_size - 90) // 64 for p in d.glob("*.zonemap"))
        for label, drop in (("sidecars", False), ("rebuild from .log", True)):
            if drop:
                for p in d.glob("*.zonemap"):
                    p.unlink()
            t = time.perf_counter()
            c = time.process_time()
            log = Log(d, cfg)
            opened = time.perf_counter() - t
            log.plan_time_window(T0, T0 + DAY)
            log.disorder_stats()
            print(f"{label:18s}: open {opened * 1000:.0f} ms, open + first plan "
                  f"{(time.perf_counter() - t) * 1000:.0f} ms wall, "
                  f"{(time.process_time() - c) * 1000:.0f} ms CPU")
            t = time.perf_counter()
            log.plan_time_window(T0 + 100 * DAY, T0 + 103 * DAY)
            print(f"{'':18s}  a warm plan: {(time.perf_counter() - t) * 1000:.1f} ms")
            log.close()
        print(f"records {n_records}, .log {log_bytes / 1e6:.1f} MB in "
              f"{len(list(d.glob('*.log')))} segments, sidecars {side_bytes / 1e3:.1f} kB "
              f"({side_bytes / log_bytes * 100:.2f} % of the log), ~{blocks} blocks")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def append() -> None:
    now = T0 + 400 * DAY
    for per_batch, label in ((1, "1-record batches"), (10, "10-record batches"),
                             (200, "200-record batches")):
        n = 20_000 if per_batch == 1 else 100_000
        batches = _batches(n, per_batch, seed=2)
        best = float("inf")
        for _ in range(5):
            tmp = Path(tempfile.mkdtemp(prefix="zm-append-"))
            cfg = LogConfig(segment_bytes=8 << 20, message_timestamp_after_max_ms=1 << 62)
            log = Log(tmp / "t-0", cfg)
            c = time.process_time()
            for b in batches:
                log.append(b, now_ms=now)
            best = min(best, time.process_time() - c)
            log.close()
            shutil.rmtree(tmp, ignore_errors=True)
        recs = sum(1 for _ in range(len(batches))) * per_batch
        print(f"{label:20s}: {best / recs * 1e6:.3f} us CPU per record (best of 5)")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "startup"
    if what == "startup":
        startup(int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000)
    else:
        append()
    sys.stdout.flush()
    os._exit(0)
