"""Helpers shared by the operations tests (imported by name: conftest puts this dir on sys.path).

``BrokerProcess`` comes from the root tests/conftest.py (the same real broker
subprocess every area uses); it is loaded by path because conftest modules are
not importable by name under ``--import-mode=importlib``.
"""

from __future__ import annotations

import importlib.util
import re
import socket
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_chronolog_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
assert _spec is not None and _spec.loader is not None
_root = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _root
_spec.loader.exec_module(_root)
BrokerProcess = _root.BrokerProcess
free_port_number: Callable[[], int] = _root.free_port_number


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def udp_overrides(udp_port: int, metrics_port: int, **extra: str) -> dict[str, str]:
    """Broker settings for UDP ingest + metrics; ``extra`` keys use ``_`` for ``.``."""
    out = {
        "udp.listeners": f"127.0.0.1:{udp_port}",
        "metrics.listener": f"127.0.0.1:{metrics_port}",
        "udp.linger.ms": "2",
    }
    out.update({k.replace("_", "."): v for k, v in extra.items()})
    return out


def wait_until_serving(metrics_port: int, timeout: float = 15.0) -> None:
    """Wait for /healthz to answer 200: the metrics endpoint is up (it starts after UDP
    ingest is bound) and the broker's event loop responds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def scrape(url: str) -> dict[str, float]:
    """A Prometheus text page as {name{labels}: value}, labels sorted by name so a key
    does not depend on the order the exporter writes them in."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if m:
            labels = ",".join(sorted((m.group(2) or "").strip("{}").split(","))) if m.group(2) else ""
            out[m.group(1) + ("{" + labels + "}" if labels else "")] = float(m.group(3))
    return out
