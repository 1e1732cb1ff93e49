"""Event-time windows (issue 24) on a month-shuffled topic, against real broker subprocesses.

One run, side by side:
- first plan: the topic's first event-time request (a PlanTimeWindow of the window
  below), answered from the zone maps alone, and the broker CPU of the sorted-timestamp
  indexes it starts in the background (the broker builds them only for partitions
  asked in event time); every row after it runs once the broker is idle again;
- window: an event-time read (``read_time_range_arrow(..., event_time=True)``) of a
  window holding 1 % of a 10M-record topic of ``bench/datasets.py``'s
  ``month_shuffled`` timestamps (4 partitions, produced with ``produce_arrow``). Bytes
  the broker sent for it (its ``chronolog_bytes_out`` counter) over the bytes of the
  batches that hold the window's records (every batch of the partitions' ``.log``
  files walked with storage's ``iter_batches``; a batch counts when a record produced
  into it has a timestamp in the window: the oracle is the produced timestamps and
  the offsets ``produce_arrow`` returned), and the plan's bytes over the same (the
  planner's share of the first). Its time over an event-time read of the
  whole topic, taking turns with it (median of the pairs' ratios). The positional read
  of the same window (``time_range_offsets``): how many of the window's records it
  misses and how many it would return from outside the window;
- plan: PlanTimeWindow p50/p99 for random 1 % windows of one partition, each right
  after a ListOffsets by time of the same partition on the same connection (the raw
  blocking client of bench_broker);
- zone maps A/B: the same ``produce_arrow`` of month-shuffled records into a new topic
  on three brokers running at once, taking turns: this checkout; an export of the
  commit before zone maps (``CHRONOLOG_BENCH_ZONEMAP_BASE``, default the main commit
  event-time last merged; it differs in every change merged since, too); and this
  checkout with the zone maps' work switched off (bench/zonemap_off.py: the broker has
  no setting for it); records/s and broker CPU per record (until the broker is idle again, so the
  maps' background work is charged), the median of the pairs' ratios (nobody asks
  these topics in event time: no sorted-timestamp index is built for them). Then the
  first CountTimeWindows of one of them, which waits for its index;
- console: the exact event-time timeline of the whole topic through ``chronolog
  console``'s JSON API, server time (``Server-Timing``): the first chart (cold: it
  reads every timestamp) and the next ones (warm), counts checked against the oracle.

``CHRONOLOG_BENCH_SCALE`` (< 1) shrinks every size for a quick run; ``CHRONOLOG_BENCH_AB_PAIRS``
sets the A/B's pairs (default 4), ``CHRONOLOG_BENCH_AB_IDLE_POLL_US`` its brokers'
``idle.poll.us`` (default the broker's: they spin that long after each request, CPU
that depends on the client's timing, not on zone maps). Each row's note
carries the load average: the machine is shared, so trust the ratios.
"""

from __future__ import annotations

import asyncio
import json
import mmap
import os
import random
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.bench_broker import RawClient, _list_offsets_body, wait_until_idle
from bench.datasets import month_shuffled
from bench.harness import (
    SCALE,
    cpu_seconds,
    free_port,
    start_broker,
    start_console,
    stop_broker,
    stop_console,
)
from bench.report import Report, median, percentile
from storage.records import iter_batches

N = int(10_000_000 * SCALE)
PARTITIONS = 4
VALUE = 100
WINDOW_SHARE = 0.01
READ_PAIRS = 3
PLAN_CALLS = max(300, int(2000 * min(SCALE * 10, 1)))
AB_RECORDS = max(50_000, int(1_000_000 * SCALE))
AB_PAIRS = int(os.environ.get("CHRONOLOG_BENCH_AB_PAIRS", "4"))
# The A/B brokers' idle.poll.us when set (0: no spinning between requests, so the CPU
# figures count work only); else the broker's default.
AB_IDLE_POLL_US = os.environ.get("CHRONOLOG_BENCH_AB_IDLE_POLL_US")
AB_BASE = os.environ.get("CHRONOLOG_BENCH_ZONEMAP_BASE", "ea9de5b")
CONSOLE_WARM_RUNS = 20
BUCKETS = 200
TOPIC = "shuffled"
SECTION = "event time"
REPO = Path(__file__).resolve().parent.parent
# Timestamps of 2024: the brokers must accept a year-old CreateTime.
OVERRIDES = {"log.retention.ms": "-1", "log.message.timestamp.before.max.ms": "9223372036854775807"}
AB_OVERRIDES = OVERRIDES | ({} if AB_IDLE_POLL_US is None else {"idle.poll.us": AB_IDLE_POLL_US})


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def _table(ts: np.ndarray) -> pa.Table:
    """``len(ts)`` records of 100-byte values, record i in partition i % PARTITIONS: each
    partition gets every PARTITIONS-th arrival, so each is month-shuffled itself."""
    n = len(ts)
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * VALUE).tobytes())
    values = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(bytes(n * VALUE))])
    parts = np.arange(n, dtype=np.int32) % PARTITIONS
    return pa.table({"value": values, "timestamp": pa.array(ts), "partition": pa.array(parts)})


async def _produce(bootstrap: str, topic: str, table: pa.Table, chunk: int = 1_000_000) -> Any:
    """Create ``topic`` and produce ``table`` with the client's fastest path; returns
    (partitions, offsets) per row and the seconds the produce took."""
    from client.aio import Client

    async with await Client.connect(bootstrap) as c:
        await c.create_topic(topic, PARTITIONS)
        parts, offs = [], []
        t = time.perf_counter()
        for i in range(0, table.num_rows, chunk):
            placed = await c.produce_arrow(topic, table.slice(i, chunk))
            parts.append(placed.partitions)
            offs.append(placed.offsets)
        return np.concatenate(parts), np.concatenate(offs), time.perf_counter() - t


def _batches(data: Path, topic: str, partition: int) -> tuple[np.ndarray, np.ndarray]:
    """(base offsets, sizes) of every batch in the partition's .log files, in order."""
    bases: list[int] = []
    sizes: list[int] = []
    for path in sorted((data / f"{topic}-{partition}").glob("*.log")):
        if path.stat().st_size == 0:
            continue
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            for _pos, h in iter_batches(m):
                bases.append(h.base_offset)
                sizes.append(h.size)
    return np.array(bases, dtype=np.int64), np.array(sizes, dtype=np.int64)


def _bytes_out(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("chronolog_bytes_out") and not line.startswith("#"):
                return float(line.split()[-1])
    raise RuntimeError("the broker's metrics have no chronolog_bytes_out")


async def _read(bootstrap: str, t1: int, t2: int, *, event_time: bool = True
                ) -> tuple[float, int, np.ndarray]:
    """(seconds, rows, timestamps) of one read of [t1, t2) through the Arrow path."""
    from client.aio import Client

    async with await Client.connect(bootstrap) as c:
        await c.partitions_for(TOPIC)  # metadata outside the clock
        rows = 0
        stamps = []
        t = time.perf_counter()
        async for _p, batch in c.read_time_range_arrow(TOPIC, t1, t2, event_time=event_time):
            rows += batch.num_rows
            stamps.append(batch.column("timestamp").to_numpy())
        elapsed = time.perf_counter() - t
    return elapsed, rows, np.concatenate(stamps) if stamps else np.empty(0, np.int64)


def bench_window(report: Report, bootstrap: str, metrics_url: str, data: Path, ts: np.ndarray,
                 parts: np.ndarray, offs: np.ndarray, broker_pid: int) -> tuple[int, int]:
    order = np.sort(ts)
    k = len(ts) // 2
    t1, t2 = int(order[k]), int(order[k + int(len(ts) * WINDOW_SHARE)])
    inside = (ts >= t1) & (ts < t2)
    want = int(inside.sum())

    window_bytes = topic_bytes = batches = window_batches = 0
    for p in range(PARTITIONS):
        bases, sizes = _batches(data, TOPIC, p)
        topic_bytes += int(sizes.sum())
        batches += len(bases)
        hit = np.unique(np.searchsorted(bases, offs[inside & (parts == p)], "right") - 1)
        window_bytes += int(sizes[hit].sum())
        window_batches += len(hit)
    segments = sum(len(list((data / f"{TOPIC}-{p}").glob("*.log"))) for p in range(PARTITIONS))

    from client import SyncClient

    # The topic's first event-time request: no partition has a sorted-timestamp index
    # yet (the broker builds one only for partitions asked in event time), so the
    # plan comes from the zone maps alone and the request starts the background build.
    with SyncClient(bootstrap) as c:
        c.partitions_for(TOPIC)
        cpu0 = cpu_seconds(broker_pid)
        t = time.perf_counter()
        first = sum(plan.bytes for plan in c.plan_time_window(TOPIC, t1, t2).values())
        first_ms = (time.perf_counter() - t) * 1000
    waited = wait_until_idle(broker_pid, timeout=300, window=1.5)
    build = cpu_seconds(broker_pid) - cpu0
    report.add(SECTION, "1 % window, first plan (no sorted index yet): plan bytes / bytes "
               "of the batches holding its records", first / window_bytes, "ratio",
               note=f"{first_ms:.0f} ms, from the zone maps alone; it starts the partitions' "
                    f"sorted-timestamp indexes in the background: broker CPU {build:.1f} s "
                    f"({build / len(ts) * 1e6:.2f} µs/record) until idle, {waited:.0f} s later; "
                    f"every row below runs after that; {_load()}")

    with SyncClient(bootstrap) as c:
        planned = sum(plan.bytes for plan in c.plan_time_window(TOPIC, t1, t2).values())
    before = _bytes_out(metrics_url)
    _, rows, stamps = asyncio.run(_read(bootstrap, t1, t2))
    fetched = _bytes_out(metrics_url) - before
    if rows != want or not ((stamps >= t1) & (stamps < t2)).all():
        raise AssertionError(f"event-time window read {rows} records, the oracle has {want}")
    report.add(SECTION, "1 % window, bytes sent / bytes of the batches holding its records",
               fetched / window_bytes, "ratio", "<= 1.5",
               note=f"{fetched:,.0f} / {window_bytes:,} B (the plan's ranges: {planned:,} B; "
                    f"whole topic {topic_bytes:,} B); {window_batches:,} of {batches:,} batches "
                    f"({segments:,} segments) hold window records; "
                    f"{want:,} of {len(ts):,} records, {PARTITIONS} partitions; "
                    f"bytes from the broker's chronolog_bytes_out; {_load()}")
    report.add(SECTION, "1 % window, bytes of the plan's ranges / bytes of those batches",
               planned / window_bytes, "ratio",
               note=f"the planner's share of the row above; the rest "
                    f"({fetched / planned:.2f}x) is what the read fetched beyond its plan")

    lo, hi = int(order[0]), int(order[-1]) + 1
    pairs = []
    for _ in range(READ_PAIRS):
        w, rows_w, _ = asyncio.run(_read(bootstrap, t1, t2))
        a, rows_a, _ = asyncio.run(_read(bootstrap, lo, hi))
        assert rows_w == want and rows_a == len(ts), (rows_w, rows_a)
        pairs.append((w, a))
    ratios = [w / a for w, a in pairs]
    report.add(SECTION, "1 % window, time / event-time read of the whole topic",
               median(ratios), "ratio", "<= 0.05",
               note=f"median of {READ_PAIRS} pairs taking turns ({', '.join(f'{r:.3f}' for r in ratios)}); "
                    f"window {median([w for w, _ in pairs]) * 1000:.0f} ms, whole "
                    f"{median([a for _, a in pairs]):.2f} s (read_time_range_arrow, event_time=True); "
                    f"{_load()}")

    with SyncClient(bootstrap) as c:
        spans = c.time_range_offsets(TOPIC, t1, t2)
    missed = returned = outside = 0
    for p, (s, e) in spans.items():
        mine = parts == p
        in_span = mine & (offs >= s) & (offs < e)
        missed += int((inside & mine & ~in_span).sum())
        returned += int(in_span.sum())
        outside += int((in_span & ~inside).sum())
    report.add(SECTION, "1 % window read positionally: window records it misses", missed,
               "records", note=f"of {want:,} ({missed / want:.0%}); it returns {returned:,} "
                               f"records, {outside:,} of them outside the window "
                               f"(time_range_offsets, Kafka's offsetsForTimes rule)")
    return lo, hi


def bench_plan(report: Report, port: int, lo: int, hi: int) -> None:
    width = int((hi - lo) * WINDOW_SHARE)
    rng = random.Random(24)
    c = RawClient(port)

    def plan(t1: int) -> Any:
        return c.call(10000, 0, {"isolation_level": 0, "start_timestamp": t1,
                                 "end_timestamp": t1 + width,
                                 "topics": [{"name": TOPIC, "partitions": [0]}]})

    starts = [lo + rng.randrange(hi - lo - width) for _ in range(PLAN_CALLS)]
    for t in starts[:200]:  # warm: connection, codecs, maps loaded
        plan(t)
        c.call(2, 7, _list_offsets_body(TOPIC, t))
    plans: list[float] = []
    lookups: list[float] = []
    ranges = 0
    clock = time.perf_counter_ns
    for t in starts:
        t0 = clock()
        c.call(2, 7, _list_offsets_body(TOPIC, t))
        t1 = clock()
        resp = plan(t)
        plans.append((clock() - t1) / 1000.0)
        lookups.append((t1 - t0) / 1000.0)
        ranges += len(resp.topics[0].partitions[0].ranges)
    c.close()
    note = (f"one partition of {PARTITIONS}, random 1 % windows, {PLAN_CALLS:,} each, taking "
            f"turns on one connection; {_load()}")
    report.add(SECTION, "PlanTimeWindow p50, 1 % window", percentile(plans, 50), "µs",
               note=f"{ranges / len(starts):.1f} ranges a plan; " + note)
    report.add(SECTION, "PlanTimeWindow p99, 1 % window", percentile(plans, 99), "µs")
    report.add(SECTION, "ListOffsets by time p50 (beside it)", percentile(lookups, 50), "µs")
    report.add(SECTION, "ListOffsets by time p99 (beside it)", percentile(lookups, 99), "µs")


def _export(commit: str, into: Path) -> str:
    """The tree of ``commit`` in ``into`` (git archive: no worktree to clean up); returns
    its short hash."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", commit], check=True,
                          capture_output=True, text=True).stdout.strip()


def _head() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "broker",
                            "storage", "protocol"], capture_output=True, text=True).stdout
    return head + ("+changes" if dirty.strip() else "")


def bench_zone_map_ab(report: Report, root: Path) -> None:
    base = _export(AB_BASE, root / "base-tree")
    table = _table(month_shuffled(AB_RECORDS, seed=1))
    sides = {}
    names = ("without", "off", "with")
    try:
        for name, tree, module in (("without", root / "base-tree", "broker"),
                                   ("off", None, "bench.zonemap_off"), ("with", None, "broker")):
            proc, port = start_broker(root, root / f"data-{name}", AB_OVERRIDES, tree=tree,
                                      log_name=f"broker-{name}.log", timeout=120, module=module)
            sides[name] = (proc, f"127.0.0.1:{port}")
        results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
        loads = []
        for i in range(AB_PAIRS):
            order = names[i % 3:] + names[:i % 3]  # each side first, middle and last in turn
            for name in order if i % 2 == 0 else order[::-1]:
                proc, bootstrap = sides[name]
                wait_until_idle(proc.pid)
                cpu0 = cpu_seconds(proc.pid)
                _, _, elapsed = asyncio.run(_produce(bootstrap, f"ab-{i}", table))
                during = cpu_seconds(proc.pid) - cpu0
                wait_until_idle(proc.pid, window=1.5)  # the maps' background work counts
                cpu = cpu_seconds(proc.pid) - cpu0
                results[name].append((AB_RECORDS / elapsed, cpu / AB_RECORDS * 1e6,
                                      during / AB_RECORDS * 1e6))
                loads.append(os.getloadavg()[0])
        w = results["with"]
        where = (f"{AB_PAIRS} rounds of {AB_RECORDS:,}-record produce_arrow runs taking turns, "
                 f"this checkout ({_head()}) vs {base} and vs itself with the zone maps' work "
                 f"off; idle.poll.us {AB_IDLE_POLL_US or 'default'}; load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
        for other, label in (("without", f"without ({base}, before zone maps)"),
                             ("off", "this checkout with the zone maps' work off")):
            wo = results[other]
            rates = [a[0] / b[0] for a, b in zip(w, wo, strict=True)]
            cpus = [a[1] / b[1] for a, b in zip(w, wo, strict=True)]
            durings = [a[2] / b[2] for a, b in zip(w, wo, strict=True)]
            report.add(SECTION, f"produce records/s, with zone maps / {label}", median(rates),
                       "ratio", ">= 0.97",
                       note=f"pairs {', '.join(f'{r:.3f}' for r in rates)}; with "
                            f"{median([x[0] for x in w]):,.0f}, {other} "
                            f"{median([x[0] for x in wo]):,.0f} rec/s; {where}")
            report.add(SECTION, f"broker CPU per produced record, with zone maps / {label}",
                       median(cpus), "ratio", "<= 1.03",
                       note=f"pairs {', '.join(f'{r:.3f}' for r in cpus)}; with "
                            f"{median([x[1] for x in w]):.3f}, {other} "
                            f"{median([x[1] for x in wo]):.3f} µs/record, from the first request "
                            f"until the broker is idle again (background work included)")
            report.add(SECTION, f"broker CPU per produced record while producing, with zone "
                       f"maps / {label}", median(durings), "ratio", "<= 1.03",
                       note=f"pairs {', '.join(f'{r:.3f}' for r in durings)}; with "
                            f"{median([x[2] for x in w]):.3f}, {other} "
                            f"{median([x[2] for x in wo]):.3f} µs/record, until the last answer")
        bench_first_count(report, sides["with"][0].pid, sides["with"][1], table.num_rows)
    finally:
        for proc, _ in sides.values():
            stop_broker(proc, 60)


def bench_first_count(report: Report, pid: int, bootstrap: str, records: int) -> None:
    """The first CountTimeWindows of a topic nobody asked in event time (the A/B's
    first topic): it waits while the broker builds the sorted-timestamp indexes of
    every partition, in slices with the event loop free between them."""
    from client import SyncClient

    with SyncClient(bootstrap) as c:
        c.partitions_for("ab-0")
        wait_until_idle(pid)
        cpu0 = cpu_seconds(pid)
        t = time.perf_counter()
        counts = c.count_time_windows("ab-0", [0, 1 << 62])
        took = time.perf_counter() - t
        cpu = cpu_seconds(pid) - cpu0
    got = sum(n for part in counts.values() for n in part)
    if got != records:
        raise AssertionError(f"counted {got} records, {records} were produced")
    report.add(SECTION, "first event-time count of a topic never asked before", took * 1000, "ms",
               note=f"{records:,} records, {PARTITIONS} partitions: the sorted-timestamp index "
                    f"built on demand, broker CPU {cpu:.2f} s ({cpu / records * 1e6:.2f} "
                    f"µs/record); the next counts answer from it; {_load()}")


def _timeline(url: str) -> tuple[float, dict[str, Any]]:
    with urllib.request.urlopen(url, timeout=900) as r:
        body = json.loads(r.read())
        timing = r.headers.get("Server-Timing", "")
    return float(timing.split("dur=")[1]), body


def bench_console(report: Report, root: Path, bootstrap: str, broker_pid: int, ts: np.ndarray,
                  lo: int, hi: int) -> None:
    console, url = start_console(["--bootstrap-server", bootstrap, "--port", str(free_port())],
                                 root / "console.log")
    try:
        q = f"{url}/api/topics/{TOPIC}/timeline?from={lo}&to={hi}&buckets={BUCKETS}&by=event"
        cpu0 = cpu_seconds(console.pid), cpu_seconds(broker_pid)
        cold, tl = _timeline(q)
        cold_cpu = cpu_seconds(console.pid) - cpu0[0], cpu_seconds(broker_pid) - cpu0[1]
        if tl["by"] != "event":
            raise AssertionError(f"the console answered by {tl['by']}")
        want = np.histogram(ts, bins=np.array(tl["bounds"], dtype=np.int64))[0].tolist()
        if tl["counts"] != want:
            raise AssertionError("the console's event-time counts differ from the oracle")
        load = _load()
        servers = []
        cpu0 = cpu_seconds(console.pid), cpu_seconds(broker_pid)
        for _ in range(CONSOLE_WARM_RUNS):
            server, tl = _timeline(q)
            servers.append(server)
        cpu = [(cpu_seconds(pr) - c) * 1000 / CONSOLE_WARM_RUNS
               for pr, c in zip((console.pid, broker_pid), cpu0, strict=True)]
        assert tl["counts"] == want
        what = f"{len(ts) / 1e6:g}M records, {PARTITIONS} partitions, {len(want)} buckets"
        report.add(SECTION, "console event-time timeline, first chart (cold), server time",
                   cold, "ms", "<= 150",
                   note=f"{what}; reads every timestamp; CPU console {cold_cpu[0]:.1f} s + broker "
                        f"{cold_cpu[1]:.1f} s; counts equal the oracle; {load}")
        report.add(SECTION, "console event-time timeline, next charts (warm), server time p50",
                   percentile(servers, 50), "ms", "<= 150",
                   note=f"{CONSOLE_WARM_RUNS} charts; p99 {percentile(servers, 99):.1f} ms; CPU "
                        f"per chart console {cpu[0]:.1f} + broker {cpu[1]:.1f} ms; {_load()}")
    finally:
        stop_console(console)


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    data = root / "data"
    ts = month_shuffled(N)
    table = _table(ts)
    metrics_port = free_port()
    broker, port = start_broker(root, data, OVERRIDES | {
        "metrics.listener": f"127.0.0.1:{metrics_port}"}, timeout=120)
    bootstrap = f"127.0.0.1:{port}"
    try:
        cpu0 = cpu_seconds(broker.pid)
        parts, offs, elapsed = asyncio.run(_produce(bootstrap, TOPIC, table))
        del table
        waited = wait_until_idle(broker.pid, timeout=300, window=1.5)
        print(f"  (setup: produced {N:,} month-shuffled records in {elapsed:.1f} s, "
              f"{N / elapsed:,.0f} rec/s; broker CPU {cpu_seconds(broker.pid) - cpu0:.1f} s; "
              f"idle after {waited:.1f} s more; {_load()})", flush=True)
        lo, hi = bench_window(report, bootstrap, f"http://127.0.0.1:{metrics_port}/metrics",
                              data, ts, parts, offs, broker.pid)
        bench_plan(report, port, lo, hi)
        bench_console(report, root, bootstrap, broker.pid, ts, lo, hi)
    finally:
        stop_broker(broker, 60)
    bench_zone_map_ab(report, root)
