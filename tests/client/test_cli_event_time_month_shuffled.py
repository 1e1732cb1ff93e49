"""A year of events arriving months out of order (``bench.datasets.month_shuffled``), loaded
with ``chronolog produce --input-format jsonl`` and read back with ``chronolog consume``
over a one-day, a three-day (across the year end) and a one-week window.

With ``--event-time`` each window is exactly a scan of the produced records; the
positional window (Kafka's offsetsForTimes rule, the default) is not, and says so on
stderr naming ``--event-time`` and the late count. ``describe`` and ``topics describe``
report the late records and the largest lateness a scan of the produced timestamps finds.
The event-time reads fetch only the planned ranges: what the broker sends for one
(its /metrics bytes out) is within the plan's bytes, not the topic's.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.datasets import DAY_MS, SAMPLE_WINDOWS, day_ms, month_shuffled
from client import SyncClient
from tests.helpers.metrics import bytes_out

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
N = 20_000
PARTITIONS = 3


def cli(bootstrap: str, *args: str, stdin: bytes | None = None
        ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CHRONOLOG, *args, "--bootstrap-server", bootstrap], input=stdin,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, f"chronolog {' '.join(args)}:\n{proc.stderr.decode()}"
    return subprocess.CompletedProcess(proc.args, 0, proc.stdout.decode(), proc.stderr.decode())


def test_month_shuffled_windows_through_the_cli(broker_factory: Callable[..., Any]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        mport = sock.getsockname()[1]
    broker = broker_factory(overrides={"metrics.listener": f"127.0.0.1:{mport}"})
    metrics = f"127.0.0.1:{mport}"
    bs = broker.bootstrap
    topic = "flights"
    cli(bs, "topics", "create", topic, "--partitions", str(PARTITIONS),
        "--config", "retention.ms=-1", "--config", "segment.bytes=262144")
    stamps = [int(t) for t in month_shuffled(N, year=2024, seed=7)]
    lines = b"".join(json.dumps({"flight": f"F{i % 97}", "at": t, "n": i}).encode() + b"\n"
                     for i, t in enumerate(stamps))
    out = cli(bs, "produce", topic, "--input-format", "jsonl", "--key-field", "flight",
              "--timestamp-field", "at", "--timestamp-format", "epoch-ms", "--print-offsets",
              "--no-progress", stdin=lines)
    placed = [tuple(map(int, line.split("\t"))) for line in out.stdout.splitlines()]
    assert len(placed) == N
    rows = sorted((p, o, t, i) for i, ((p, o), t) in enumerate(zip(placed, stamps, strict=True)))

    # Disorder, by scanning each partition in offset order.
    want: dict[int, tuple[int, int]] = {}
    for part in range(PARTITIONS):
        running, late, worst = -1, 0, 0
        for _, _, t, _ in (r for r in rows if r[0] == part):
            if t < running:
                late, worst = late + 1, max(worst, running - t)
            running = max(running, t)
        want[part] = (late, worst)
    assert all(late > 1000 and worst > 30 * DAY_MS for late, worst in want.values())
    described = json.loads(cli(bs, "describe", topic, "--json").stdout)["partitions"]
    assert {d["partition"]: (d["late_records"], d["max_lateness_ms"]) for d in described} == want
    table = json.loads(cli(bs, "topics", "describe", topic, "--format", "json").stdout)
    assert {d["partition"]: (d["late_records"], d["max_lateness_ms"])
            for d in table["partitions"]} == want
    # Offline, from the running broker's files, by reading every record.
    offline = json.loads(subprocess.run(
        [CHRONOLOG, "describe", topic, "--json", "--data-dir", str(broker.data_dir)],
        capture_output=True, check=True, timeout=300).stdout)["partitions"]
    assert {d["partition"]: (d["late_records"], d["max_lateness_ms"]) for d in offline} == want
    total_late = sum(late for late, _ in want.values())
    topic_bytes = sum(f.stat().st_size for f in broker.data_dir.glob(f"{topic}-*/*.log"))

    # One day, the year's last three days, one week.
    for first, last in SAMPLE_WINDOWS.values():
        t1, t2 = day_ms(first), day_ms(last)
        exact = [(p, o, t, i) for p, o, t, i in rows if t1 <= t < t2]
        assert exact, (first, last)
        args = ["consume", topic, "--from-time", f"{first}T00:00:00Z",
                "--until", f"{last}T00:00:00Z", "--format", "json"]
        with SyncClient(bs) as c:
            planned = sum(p.bytes for p in c.plan_time_window(topic, t1, t2).values())
        before = bytes_out(metrics)
        event = cli(bs, *args, "--event-time")
        sent = bytes_out(metrics) - before
        # Metadata, ApiVersions and the plan itself are a few kB. (How tight the plan is
        # belongs to the broker's tests: here a batch of ~400 records that straddles two
        # shuffled months spans both, so a day's plan is several such batches.)
        assert sent <= 1.5 * planned + 16_384, (first, last, sent, planned)
        assert planned < topic_bytes, (first, last, planned, topic_bytes)
        got = [json.loads(line) for line in event.stdout.splitlines()]
        assert [(r["partition"], r["offset"], r["timestamp"], json.loads(r["value"])["n"])
                for r in got] == exact, (first, last)
        assert "warning" not in event.stderr

        positional = cli(bs, *args)
        pos = [json.loads(line) for line in positional.stdout.splitlines()]
        assert [(r["partition"], r["offset"]) for r in pos] != [(p, o) for p, o, _, _ in exact]
        warnings = [ln for ln in positional.stderr.splitlines() if ln.startswith("warning:")]
        assert len(warnings) == 1, positional.stderr
        assert f"{topic} has {total_late} late record(s)" in warnings[0]
        assert "--event-time" in warnings[0]
