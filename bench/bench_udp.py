"""UDP ingest: datagrams/s that land in the log, and the loss rate, at 50k/s and 100k/s.

Setup: one broker subprocess with ``udp.listeners`` set (format raw, one
partition), and ``chronolog udp-send`` in another process sending numbered
200-byte datagrams at a fixed rate. What landed is counted through the broker
itself: ListOffsets LATEST of the ``udp`` topic before and after (so a datagram
counts only once it is in the log and readable), cross-checked with the
broker's own ``chronolog_udp_datagrams_received_total`` from /metrics (so
kernel drops — socket buffer overflow — are told apart from drops inside the
broker). Target (issue 5): >= 100k/s with < 1% loss, and 0% loss at 50k/s.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bench.harness import cpu_seconds, free_port, start_broker, stop_broker
from bench.report import Report

RATES = (50_000, 100_000)
SECONDS = float(os.environ.get("CHRONOLOG_BENCH_UDP_SECONDS", "3"))
SIZE = 200


def _scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(chronolog_udp_\w+_total)(\{[^}]*\})? ([0-9.e+]+)$", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def _senders(rate: int) -> int:
    """Sender processes: one ("from another process"), or one per 50k/s with
    CHRONOLOG_BENCH_UDP_SPLIT=1 (on a busy 2-core machine extra senders take CPU
    from the broker, so they raise the offered rate but not what lands)."""
    if os.environ.get("CHRONOLOG_BENCH_UDP_SPLIT") == "1":
        return max(1, -(-rate // 50_000))
    return 1


def _send(sender: str, udp_port: int, rate: int, count: int) -> tuple[int, float]:
    """Run the senders at once, each with its share; (datagrams sent, longest send time)."""
    k = _senders(rate)
    procs = [subprocess.Popen(
        [sender, "udp-send", f"127.0.0.1:{udp_port}", "--rate", str(rate / k),
         "--count", str(count // k), "--size", str(SIZE), "--format", "raw"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(k)]
    sent, seconds = 0, 0.0
    for proc in procs:
        out, err = proc.communicate(timeout=SECONDS * 10 + 60)
        m = re.search(r"sent (\d+) datagrams in ([0-9.]+) s", out)
        if m is None:
            raise RuntimeError(f"udp-send failed: {out}{err}")
        sent += int(m.group(1))
        seconds = max(seconds, float(m.group(2)))
    return sent, seconds


def _dropped(metrics: dict[str, float]) -> float:
    return sum(v for k, v in metrics.items() if k.startswith("chronolog_udp_datagrams_dropped"))


def _latest(bootstrap: str) -> int:
    from client import SyncClient

    with SyncClient(bootstrap) as c:
        return sum(c.latest("udp").values())


def _settle(bootstrap: str, previous: int) -> int:
    """LATEST once it stopped moving (linger and the last flush are over)."""
    last = previous
    stable = 0
    while stable < 3:
        time.sleep(0.2)
        now = _latest(bootstrap)
        stable = stable + 1 if now == last else 0
        last = now
    return last


def run(report: Report, scratch: str) -> None:
    # The default receive buffer first (what a user gets), then 16 MiB at the top rate:
    # on a busy machine a bigger buffer absorbs the broker's scheduling stalls.
    _run_broker(report, Path(scratch) / "default", RATES, {}, "")
    _run_broker(report, Path(scratch) / "rcvbuf16m", RATES[-1:],
                {"udp.socket.receive.buffer.bytes": str(16 << 20)}, ", 16 MiB rcvbuf")


def _run_broker(report: Report, scratch: Path, rates: tuple[int, ...],
                overrides: dict[str, str], label: str) -> None:
    port, udp_port, metrics_port = free_port(), free_port(socket.SOCK_DGRAM), free_port()
    bootstrap = f"127.0.0.1:{port}"
    url = f"http://127.0.0.1:{metrics_port}/metrics"

    def serving() -> None:
        _scrape(url)
        _latest(bootstrap)

    broker, _ = start_broker(
        scratch, scratch / "data",
        {"udp.listeners": f"127.0.0.1:{udp_port}", "metrics.listener": f"127.0.0.1:{metrics_port}",
         "udp.format": "raw", "num.partitions": "1", **overrides},
        port=port, ready=serving)
    try:
        sender = str(Path(sys.executable).with_name("chronolog"))
        for rate in rates:
            count = int(rate * SECONDS)
            before = _latest(bootstrap)
            m_before = _scrape(url)
            cpu_before = cpu_seconds(broker.pid)
            sent, seconds = _send(sender, udp_port, rate, count)
            after = _settle(bootstrap, before)
            cpu = cpu_seconds(broker.pid) - cpu_before
            m_after = _scrape(url)
            landed = after - before
            received = (m_after.get("chronolog_udp_datagrams_received_total", 0)
                        - m_before.get("chronolog_udp_datagrams_received_total", 0))
            dropped = _dropped(m_after) - _dropped(m_before)
            loss = 100.0 * (sent - landed) / sent if sent else 0.0
            target_loss = "0%" if rate <= 50_000 else "< 1%"
            section = f"udp {rate // 1000}k/s x {SIZE} B{label}"
            report.add(section, "datagrams landed per second", landed / seconds, "datagrams/s",
                       target=">= 100k/s" if rate >= 100_000 else "",
                       note=f"{landed}/{sent} in the log after {seconds:.2f} s of sending")
            report.add(section, "loss", loss, "%", target=target_loss,
                       note=f"kernel/socket drops {sent - received:.0f}, broker drops "
                       f"{dropped:.0f}")
            achieved = sent / seconds
            report.add(section, "senders' achieved rate", achieved, "datagrams/s",
                       note=f"{_senders(rate)} udp-send process(es)"
                       + ("; below the asked rate: senders starved of CPU"
                          if achieved < 0.97 * rate else ""))
            report.add(section, "broker CPU per datagram", 1e6 * cpu / max(1, landed), "µs",
                       note=f"incl. ~1 s idle polling; load average "
                       f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        stop_broker(broker, 30)

if __name__ == "__main__":
    import tempfile

    r = Report()
    with tempfile.TemporaryDirectory() as tmp:
        run(r, tmp)
    print(r.table())
