"""The web console's latency: timeline and record pages of a 12-partition, 10M-record topic.

Against a real broker subprocess and a real ``chronolog console`` subprocess, over HTTP:
- the timeline (200 buckets over the whole topic, all 12 partitions): the server's
  own time (its ``Server-Timing`` header: 201 ListOffsets requests pipelined plus one
  for the high watermarks) and the full HTML page as a browser would fetch it;
- a page of 100 records: one partition from a random offset, and all partitions
  merged by timestamp from a random time;
- for comparison, the same 200-bucket counts computed by scanning every record's
  timestamp with the client's ``consume_chunks`` (what a console without exact time
  lookups would have to do), checked equal to the timeline's counts.

The topic is written straight into the data directory with the storage layer
(setup, not measured), timestamps spread over 7 days. ``CHRONOLOG_BENCH_SCALE`` (< 1)
shrinks the topic for a quick run.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import urllib.request
from pathlib import Path

from bench.bench_broker import T0, wait_until_idle, write_big_topic
from bench.harness import (
    SCALE,
    cpu_seconds,
    free_port,
    start_broker,
    start_console,
    stop_broker,
    stop_console,
)
from bench.report import Report, percentile

PARTITIONS = 12
N = int(10_000_000 * SCALE)
SPAN_MS = 7 * 86_400_000
BUCKETS = 200
RUNS = 30
SECTION = "console"
TOPIC = "bench-console"


def _get(url: str) -> tuple[float, float, bytes]:
    """(wall ms, server ms from Server-Timing, body) of one GET."""
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
        timing = r.headers.get("Server-Timing", "")
    wall = (time.perf_counter() - t) * 1000
    server = float(timing.split("dur=")[1]) if "dur=" in timing else float("nan")
    return wall, server, body


async def _scan_counts(bootstrap: str, bounds: list[int]) -> tuple[list[int], float]:
    """Bucket counts from every record's timestamp (a full read), and the seconds it took.

    Timestamps here increase with offsets, so a record's bucket by timestamp is
    exactly the bucket the ListOffsets rule puts it in.
    """
    import bisect

    from client.aio import Client

    counts = [0] * (len(bounds) - 1)
    t = time.perf_counter()
    async with await Client.connect(bootstrap) as c:
        for p in range(PARTITIONS):
            async for chunk in c.consume_chunks(TOPIC, p, 0, None):
                for r in chunk:
                    i = bisect.bisect_right(bounds, r.timestamp) - 1
                    if 0 <= i < len(counts):
                        counts[i] += 1
    return counts, time.perf_counter() - t


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    per_part = N // PARTITIONS
    step = max(1, SPAN_MS // per_part)
    started = time.perf_counter()
    for p in range(PARTITIONS):
        write_big_topic(data, TOPIC, per_part, partition=p, ts_step=step)
    print(f"  (setup: wrote {per_part * PARTITIONS:,} records in {PARTITIONS} partitions "
          f"in {time.perf_counter() - started:.1f} s)", flush=True)
    broker, port = start_broker(root, data, {"log.retention.ms": "-1"}, timeout=300)
    bootstrap = f"127.0.0.1:{port}"
    console, url = start_console(["--bootstrap-server", bootstrap, "--port", str(free_port())],
                                 root / "console.log")
    try:
        end = T0 + per_part * step
        q = f"from={T0}&to={end}&buckets={BUCKETS}"
        # The broker's start-up work (lookup summaries of every batch) is not the console's.
        wait_until_idle(broker.pid)
        _get(f"{url}/api/topics/{TOPIC}/timeline?{q}")  # warm: metadata, connections
        walls, servers = [], []
        cpu0 = cpu_seconds(console.pid), cpu_seconds(broker.pid)
        for _ in range(RUNS):
            wall, server, _ = _get(f"{url}/topics/{TOPIC}?{q}")
            walls.append(wall)
            servers.append(server)
        cpu = [(cpu_seconds(pr.pid) - c) * 1000 / RUNS for pr, c in zip((console, broker), cpu0, strict=True)]
        load = os.getloadavg()[0]
        note = (f"{PARTITIONS} partitions, {per_part * PARTITIONS / 1e6:g}M records, {BUCKETS} buckets; "
                f"load average {load:.1f} on {os.cpu_count()} cores")
        timeline_p50 = percentile(servers, 50)
        report.add(SECTION, "timeline, server time p50", timeline_p50, "ms", "<= 150", note=note)
        report.add(SECTION, "timeline, server time p99", percentile(servers, 99), "ms")
        report.add(SECTION, "timeline, CPU per page: console + broker", cpu[0] + cpu[1], "ms",
                   note=f"console {cpu[0]:.0f} ms + broker {cpu[1]:.0f} ms (independent of machine load)")
        report.add(SECTION, "timeline HTML page over HTTP p50", percentile(walls, 50), "ms",
                   note="server time + rendering + loopback HTTP")
        _, _, body = _get(f"{url}/api/topics/{TOPIC}/timeline?{q}")
        tl = json.loads(body)

        rng = random.Random(7)
        for name, make in (
            ("one partition from an offset",
             lambda: f"partition={rng.randrange(PARTITIONS)}&offset={rng.randrange(per_part - 100)}"),
            (f"{PARTITIONS} partitions merged from a time",
             lambda: f"time={T0 + rng.randrange(per_part * step - 100 * step)}"),
        ):
            servers = []
            cpu0 = cpu_seconds(console.pid), cpu_seconds(broker.pid)
            for _ in range(RUNS):
                _, server, _ = _get(f"{url}/topics/{TOPIC}/records?{make()}&limit=100")
                servers.append(server)
            cpu = [(cpu_seconds(pr.pid) - c) * 1000 / RUNS
                   for pr, c in zip((console, broker), cpu0, strict=True)]
            report.add(SECTION, f"page of 100 records, {name}, server time p50",
                       percentile(servers, 50), "ms", "<= 100",
                       note=f"CPU per page: console {cpu[0]:.0f} ms + broker {cpu[1]:.0f} ms")

        counts, scan_s = asyncio.run(_scan_counts(bootstrap, tl["bounds"]))
        if counts != tl["counts"]:
            raise AssertionError("the scan and the timeline disagree")
        report.add(SECTION, "same timeline by scanning every record", scan_s * 1000, "ms",
                   note=f"consume_chunks of all records; {scan_s * 1000 / timeline_p50:.0f}x "
                        "the ListOffsets timeline; counts equal")
    finally:
        stop_console(console)
        stop_broker(broker, 60)
