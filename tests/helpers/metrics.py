"""The broker's Prometheus endpoint (``metrics.listener``), read as a test would."""

from __future__ import annotations

import time
import urllib.request


def bytes_out(metrics: str, wait_s: float = 30.0) -> int:
    """The broker's Kafka-protocol response bytes so far; ``metrics`` is HOST:PORT of its
    metrics listener (retried while it is not up yet)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5).read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return next(int(float(line.split()[-1])) for line in text.splitlines()
                if line.startswith("chronolog_bytes_out_total "))
