"""Quick measurements behind docs/storage.md's zone-map choices (not part of make bench).

    python -m bench.zonemap_measure startup [records [per batch]]  # sidecar vs rebuild
    python -m bench.zonemap_measure ab                  # Log.append with/without, one process
    python -m bench.zonemap_measure append              # Log.append CPU per record
    python -m bench.zonemap_measure broker MAIN THIS    # produce via a real broker, A/B

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


def startup(n_records: int, per_batch: int = 500) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="zm-measure-"))
    cfg = LogConfig(segment_bytes=64 << 20, message_timestamp_after_max_ms=1 << 62)
    try:
        log = Log(tmp / "t-0", cfg)
        now = T0 + 400 * DAY
        t = time.process_time()
        for b in _batches(n_records, per_batch):
            log.append(b, now_ms=now)
        print(f"appending {n_records} records in {per_batch}-record batches: "
              f"{time.process_time() - t:.1f} s CPU")
        t = time.process_time()
        log.disorder_stats()  # what the broker's background slices do after appends
        print(f"counting what appends left open: {(time.process_time() - t) * 1000:.0f} ms CPU")
        log.close()
        d = tmp / "t-0"
        log_bytes = sum(p.stat().st_size for p in d.glob("*.log"))
        side_bytes = sum(p.stat().st_size for p in d.glob("*.zonemap"))
        blocks = sum((p.stat().st_size - 70) // 64 for p in d.glob("*.zonemap"))  # 66 + 4: head, CRC
        for label, drop in (("sidecars", False), ("rebuild from .log", True)):
            if drop:
                for p in d.glob("*.zonemap"):
                    p.unlink()
            log = Log(d, cfg)
            t, c = time.perf_counter(), time.process_time()
            log.zone_maps()
            maps = (time.perf_counter() - t, time.process_time() - c)
            t = time.perf_counter()
            log.plan_time_window(T0, T0 + DAY)
            plan = time.perf_counter() - t
            t = time.perf_counter()
            log.disorder_stats()
            stats = time.perf_counter() - t
            t = time.perf_counter()
            log.plan_time_window(T0 + 100 * DAY, T0 + 103 * DAY)
            warm = time.perf_counter() - t
            print(f"{label:18s}: maps ready {maps[0] * 1000:.0f} ms wall "
                  f"({maps[1] * 1000:.0f} ms CPU); then first plan {plan * 1000:.1f} ms, "
                  f"disorder counts {stats * 1000:.1f} ms, a warm plan {warm * 1000:.1f} ms")
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


def append_ab() -> None:
    """Log.append CPU with and without zone maps in one process, alternating chunks of
    500 batches between two logs (the same validation walk in both), so load from other
    processes hits both sides alike."""
    import storage.segment as seg_mod

    orig = seg_mod.LogSegment.create

    def without(*a: object, **k: object) -> seg_mod.LogSegment:
        s = orig(*a, **k)  # type: ignore[arg-type]
        s._zones = None
        return s

    now = T0 + 400 * DAY
    for per_batch, n in ((1, 30_000), (10, 100_000), (200, 200_000)):
        batches = _batches(n, per_batch, seed=2)
        tmp = Path(tempfile.mkdtemp(prefix="zm-ab-"))
        cfg = LogConfig(segment_bytes=64 << 20, message_timestamp_after_max_ms=1 << 62)
        logs = [Log(tmp / "with-0", cfg), Log(tmp / "without-0", cfg)]
        logs[1].active._zones = None
        spent = [0.0, 0.0]
        for rep in range(3):
            for i in range(0, len(batches), 500):
                order = (0, 1) if (i // 500 + rep) % 2 == 0 else (1, 0)
                for k in order:
                    seg_mod.LogSegment.create = without if k else orig  # type: ignore[method-assign]
                    c = time.process_time()
                    for b in batches[i:i + 500]:
                        logs[k].append(b, now_ms=now)
                    spent[k] += time.process_time() - c
                    seg_mod.LogSegment.create = orig  # type: ignore[method-assign]
            for k in (0, 1):
                seg_mod.LogSegment.create = without if k else orig  # type: ignore[method-assign]
                logs[k].truncate_fully_and_start_at(0)
                seg_mod.LogSegment.create = orig  # type: ignore[method-assign]
        recs = 3 * len(batches) * per_batch
        w, wo = spent[0] / recs * 1e6, spent[1] / recs * 1e6
        print(f"{per_batch:4d}-record batches: {w:.3f} us CPU/record with zone maps, "
              f"{wo:.3f} without: {(w - wo) / wo * 100:+.1f} % "
              f"({(spent[0] - spent[1]) / (3 * len(batches)) * 1e6:+.2f} us per batch)")
        for log in logs:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def broker_ab(tree: str, per_request: int, requests: int) -> tuple[float, float]:
    """(broker CPU µs per record, records/s) producing month-shuffled records through a
    real broker started from ``tree`` (PYTHONPATH), one partition, acks=1."""
    import socket
    import subprocess

    from client import ProducerRecord, SyncClient

    data = Path(tempfile.mkdtemp(prefix="zm-broker-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=tree)
    proc = subprocess.Popen([sys.executable, "-m", "broker", "--data-dir", str(data / "d"),
                             "--host", "127.0.0.1", "--port", str(port),
                             "--override", "log.message.timestamp.after.max.ms=9223372036854775807"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        rng = random.Random(7)
        tss = [T0 + rng.randrange(365 * DAY) for _ in range(requests)]  # shuffled
        with SyncClient(f"127.0.0.1:{port}") as c:
            c.create_topic("ab", 1)
            reqs = [[ProducerRecord(value=b"v" * 80, timestamp=tss[i] + j)
                     for j in range(per_request)] for i in range(requests)]
            c.produce("ab", reqs[0], partition=0)

            def cpu() -> float:
                with open(f"/proc/{proc.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            c0, t0 = cpu(), time.perf_counter()
            for r in reqs[1:]:
                c.produce("ab", r, partition=0)
            wall = time.perf_counter() - t0
            used = cpu() - c0
        n = per_request * (requests - 1)
        return used / n * 1e6, n / wall
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def broker_main(main_tree: str, this_tree: str) -> None:
    for per_request, requests in ((1, 6000), (100, 1500)):
        res: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
        for _ in range(3):
            res["without"].append(broker_ab(main_tree, per_request, requests))
            res["with"].append(broker_ab(this_tree, per_request, requests))
        for k, v in res.items():
            print(f"{per_request:4d} rec/request, {k:7s} zone maps: broker CPU "
                  f"{min(x[0] for x in v):.2f} us/record (best of 3), "
                  f"{max(x[1] for x in v):,.0f} records/s (best of 3)")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "startup"
    if what == "startup":
        startup(int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000,
                int(sys.argv[3]) if len(sys.argv) > 3 else 500)
    elif what == "broker":
        broker_main(sys.argv[2], sys.argv[3])
    elif what == "ab":
        append_ab()
    else:
        append()
    sys.stdout.flush()
    os._exit(0)
