"""Idle polling (idle.poll.us): the broker keeps polling its sockets for a short
window after each request, then sleeps. Shown on a real broker subprocess by the
CPU time Linux charges to it: busy while requests keep coming, back to ~0 once they
stop, and never spinning when the setting is 0."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.broker.test_core_server import Raw

API_VERSIONS_BODY = {"client_software_name": "t", "client_software_version": "1"}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_share(pid: int, seconds: float = 1.0) -> float:
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


@pytest.mark.parametrize("window_us", ["0", "200", "20000"])
def test_polling_stops_when_requests_stop(broker_factory: Any, window_us: str) -> None:
    b = broker_factory(overrides={"idle.poll.us": window_us})
    assert b.proc is not None
    raw = Raw(b.port)
    for _ in range(2000):  # requests one after another: the poller has work in each gap
        cid, frame = raw.frame(18, 3, API_VERSIONS_BODY)
        raw.send(frame)
        assert raw.read()[0] == cid
    # No request for a second: whatever the window, the broker is asleep again
    # (a spinning event loop would be charged about one whole CPU second here).
    assert idle_cpu_share(b.proc.pid) < 0.1


def test_a_long_window_spins_while_it_lasts_and_then_sleeps(broker_factory: Any) -> None:
    """With a 0.5 s window one request keeps the loop polling for about 0.5 s of CPU:
    the window is honoured, and bounded."""
    b = broker_factory(overrides={"idle.poll.us": "500000"})
    assert b.proc is not None
    time.sleep(0.6)
    raw = Raw(b.port)
    start = cpu_seconds(b.proc.pid)
    cid, frame = raw.frame(18, 3, API_VERSIONS_BODY)
    raw.send(frame)
    assert raw.read()[0] == cid
    time.sleep(1.5)
    spent = cpu_seconds(b.proc.pid) - start
    assert 0.25 < spent < 1.0, spent
    assert idle_cpu_share(b.proc.pid) < 0.1
