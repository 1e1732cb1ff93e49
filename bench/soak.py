"""The soak: steady load for minutes, with rolls and retention, watching for drift.

``python -m bench.soak [--minutes 10] [--out docs]`` (``make soak``): one broker with
1 MiB segments and 8 MiB retention per partition (so segments roll and are deleted
all the time), 20 confluent-kafka producer connections (acks=all, 500 records/s
each), 20 consumer connections reading every partition from the end, and time
lookups ("first offset at or after T" for recent T) from one more client without
pause. Every 10 s it samples throughput, produce p99 (send to acknowledgement),
lookup p99 and the broker's RSS, then writes the table (``soak.md``) and a plot
(``soak.png``). It checks what the issue asks: RSS flat once steady (growth over the
last half of the run, at most the last 5 minutes, within 5 %) and lookup p99 ≤ 1 ms
in every window, and that the load held (the generators run under SCHED_IDLE, see
``bench/soak_worker.py``, so a slow broker would show as lost load: at least 95 % of
the offered produce rate must be acknowledged); the exit status says whether all held.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import start_broker, stop_broker

TOPIC = "soak"
PARTITIONS = 4
SAMPLE_S = 10.0


@dataclass
class Sample:
    t: float
    produced: float  # records/s acknowledged
    consumed: float
    produce_p99_ms: float
    lookups: float  # per s
    lookup_p99_ms: float
    rss_mib: float


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Worker:
    def __init__(self, role: str, bootstrap: str, n: int, rate: int, stop: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.soak_worker", role, bootstrap, TOPIC, str(PARTITIONS),
             str(n), str(rate), str(stop)], stdout=subprocess.PIPE, text=True)
        self.lines: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(json.loads(line))

    def take(self) -> list[dict[str, Any]]:
        with self.lock:
            out, self.lines = self.lines, []
        return out


def _p99(xs: list[float]) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def soak(minutes: float, producers: int, consumers: int, rate: int, scratch: Path) -> tuple[
        list[Sample], list[str]]:
    from client import SyncClient

    data = scratch / "data"
    proc, port = start_broker(scratch, data, {
        "log.segment.bytes": str(1 << 20), "log.retention.bytes": str(8 << 20),
        "log.retention.check.interval.ms": "5000", "log.retention.ms": "-1"})
    bootstrap = f"127.0.0.1:{port}"
    stop_file = scratch / "stop"
    errors: list[str] = []
    samples: list[Sample] = []
    try:
        with SyncClient(bootstrap) as c:
            c.create_topic(TOPIC, PARTITIONS)
        half_p, half_c = producers // 2, consumers // 2
        workers = [Worker("produce", bootstrap, n, rate, stop_file)
                   for n in (half_p, producers - half_p) if n]
        readers = [Worker("consume", bootstrap, n, 0, stop_file)
                   for n in (half_c, consumers - half_c) if n]
        looker = Worker("lookup", bootstrap, 0, 0, stop_file)
        started = time.monotonic()
        end = started + minutes * 60
        while time.monotonic() < end:
            time.sleep(SAMPLE_S)
            window = [ln for w in workers for ln in w.take()]
            reads = [ln for w in readers for ln in w.take()]
            lookups: list[float] = []
            for ln in looker.take():
                lookups += [us / 1000 for us in ln["lat_us"]]
                errors += ln["errors"]
            samples.append(Sample(
                t=time.monotonic() - started,
                produced=sum(ln["acked"] for ln in window) / SAMPLE_S,
                consumed=sum(ln["consumed"] for ln in reads) / SAMPLE_S,
                produce_p99_ms=max((ln["p99"] for ln in window), default=0.0),
                lookups=len(lookups) / SAMPLE_S,
                lookup_p99_ms=_p99(lookups),
                rss_mib=_rss_mib(proc.pid)))
            s = samples[-1]
            print(f"  t={s.t:5.0f}s produced {s.produced:8,.0f}/s consumed {s.consumed:8,.0f}/s "
                  f"produce p99 {s.produce_p99_ms:6.1f} ms lookups {s.lookups:6,.0f}/s "
                  f"p99 {s.lookup_p99_ms:6.2f} ms RSS {s.rss_mib:6.1f} MiB", flush=True)
    finally:
        stop_file.touch()
        for w in [*locals().get("workers", []), *locals().get("readers", []),
                  *([looker] if "looker" in locals() else [])]:
            try:
                w.proc.wait(30)
            except subprocess.TimeoutExpired:
                w.proc.kill()
        stop_broker(proc)
    return samples, errors


def verdict(samples: list[Sample], offered: float) -> tuple[float, float, float, bool]:
    """(RSS growth over the steady part, worst lookup p99, the share of the offered
    produce rate acknowledged after the first window, all within bounds). The load
    generators yield the CPU to the broker (SCHED_IDLE), so a slower broker would show
    as less load, not as latency: the run counts only if the load held (≥ 95 %)."""
    duration = samples[-1].t
    steady_from = max(duration / 2, duration - 300)
    steady = [s for s in samples if s.t >= steady_from]
    growth = (steady[-1].rss_mib - steady[0].rss_mib) / steady[0].rss_mib if steady else 0.0
    worst = max(s.lookup_p99_ms for s in samples)
    after_first = samples[1:] or samples
    held = sum(s.produced for s in after_first) / len(after_first) / offered
    return growth, worst, held, growth <= 0.05 and worst <= 1.0 and held >= 0.95


def write_report(samples: list[Sample], errors: list[str], out: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    growth, worst, held, ok = verdict(samples, args.producers * args.rate)
    t = [s.t / 60 for s in samples]
    fig, ax = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    ax[0].plot(t, [s.produced for s in samples], label="produced (acks)")
    ax[0].plot(t, [s.consumed for s in samples], label="consumed")
    ax[0].set_ylabel("records/s")
    ax[0].legend()
    ax[1].plot(t, [s.produce_p99_ms for s in samples], label="produce p99 (send→ack)")
    ax[1].plot(t, [s.lookup_p99_ms for s in samples], label="lookup p99")
    ax[1].axhline(1.0, color="grey", linestyle=":", label="lookup bound 1 ms")
    ax[1].set_yscale("log")
    ax[1].set_ylabel("ms")
    ax[1].legend()
    ax[2].plot(t, [s.rss_mib for s in samples], label="broker RSS")
    ax[2].set_ylabel("MiB")
    ax[2].set_xlabel("minutes")
    ax[2].set_ylim(bottom=0)
    ax[2].legend()
    fig.suptitle(f"Chronolog soak: {args.producers} producers, {args.consumers} consumers, "
                 f"lookups, rolls and retention")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "soak.png", dpi=80)
    rows = ["| t (s) | produced/s | consumed/s | produce p99 ms | lookups/s | lookup p99 ms | RSS MiB |",
            "|---|---|---|---|---|---|---|"]
    rows += [f"| {s.t:.0f} | {s.produced:,.0f} | {s.consumed:,.0f} | {s.produce_p99_ms:.1f} | "
             f"{s.lookups:,.0f} | {s.lookup_p99_ms:.2f} | {s.rss_mib:.1f} |" for s in samples]
    (out / "soak.md").write_text("\n".join([
        "# Soak run (`make soak`)", "",
        f"{args.minutes:g} minutes on this project's 2-core machine; produced by `bench/soak.py` "
        f"({time.strftime('%Y-%m-%d', time.gmtime())}). One broker with 1 MiB segments and "
        "8 MiB retention per partition (4 partitions), so segments roll and are deleted "
        f"throughout; {args.producers} confluent-kafka producer connections (acks=all, "
        f"{args.rate} records/s each, 100 B), {args.consumers} consumer connections reading "
        "from the end, and one client doing time lookups without pause.", "",
        f"- RSS growth over the steady part (last half, at most the last 5 minutes): "
        f"**{growth * 100:+.1f} %** (bound +5 %)",
        f"- worst lookup p99 of any 10 s window: **{worst:.2f} ms** (bound 1 ms)",
        f"- load held: **{held * 100:.1f} %** of the offered {args.producers * args.rate:,} "
        "records/s acknowledged on average after the first window (bound 95 %)",
        f"- failed lookups: {len(errors)}",
        f"- machine load average at the end (1/5/15 min): "
        f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())} on 2 cores (the load generators "
        "share them with the broker, under SCHED_IDLE: see bench/soak_worker.py)",
        f"- verdict: {'within both bounds' if ok else 'OUT OF BOUNDS'}", "",
        "![soak](soak.png)", "", *rows, ""]))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--producers", type=int, default=20)
    p.add_argument("--consumers", type=int, default=20)
    p.add_argument("--rate", type=int, default=500, help="records/s per producer")
    p.add_argument("--out", type=Path, default=Path("docs"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="chronolog-soak-") as scratch:
        samples, errors = soak(args.minutes, args.producers, args.consumers, args.rate,
                               Path(scratch))
    write_report(samples, errors, args.out, args)
    growth, worst, held, ok = verdict(samples, args.producers * args.rate)
    print(f"RSS growth over the steady part {growth * 100:+.1f} % (bound +5 %), worst lookup p99 "
          f"{worst:.2f} ms (bound 1 ms), load held {held * 100:.1f} % (bound 95 %), "
          f"failed lookups {len(errors)}: "
          f"{'OK' if ok and not errors else 'OUT OF BOUNDS'}; wrote {args.out}/soak.md and soak.png")
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
