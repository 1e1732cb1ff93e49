"""Idle polling (idle.poll.us): the broker keeps polling its sockets for a short
window after each request, then sleeps. Shown on a real broker subprocess by the time
Linux counts its event-loop thread as runnable: busy while requests keep coming, back
to ~0 once they stop, and never spinning when the setting is 0.

Runnable time (/proc/PID/task/PID/schedstat: time on a CPU plus time waiting for one)
rather than CPU time: a spinning loop is runnable for the whole window whatever else
the machine runs, while the CPU time it gets is only its share of a loaded machine
(on 2 busy cores CI measured 0.11 CPU-s for a 0.5 s spin). The event loop runs on the
process's main thread (uvloop.run in broker.server)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.broker.test_core_server import Raw

API_VERSIONS_BODY = {"client_software_name": "t", "client_software_version": "1"}


def runnable_seconds(pid: int) -> float:
    """Seconds the main thread of ``pid`` has been running or waiting to run."""
    on_cpu_ns, waiting_ns, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    return (int(on_cpu_ns) + int(waiting_ns)) / 1e9


def idle_runnable_share(pid: int, seconds: float = 1.0) -> float:
    before_runnable, before = runnable_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (runnable_seconds(pid) - before_runnable) / (time.monotonic() - before)


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
    # (a spinning event loop would be runnable for about the whole second here).
    assert idle_runnable_share(b.proc.pid) < 0.1


def test_a_long_window_spins_while_it_lasts_and_then_sleeps(broker_factory: Any) -> None:
    """With a 0.5 s window one request keeps the loop polling (runnable) for about
    0.5 s: the window is honoured, and bounded."""
    b = broker_factory(overrides={"idle.poll.us": "500000"})
    assert b.proc is not None
    # Start measuring once startup work is over (it takes longer on a loaded machine).
    deadline = time.monotonic() + 30
    while idle_runnable_share(b.proc.pid, 0.3) >= 0.1:
        assert time.monotonic() < deadline, "the broker never went idle after starting"
    raw = Raw(b.port)
    start = runnable_seconds(b.proc.pid)
    cid, frame = raw.frame(18, 3, API_VERSIONS_BODY)
    raw.send(frame)
    assert raw.read()[0] == cid
    time.sleep(1.5)
    spent = runnable_seconds(b.proc.pid) - start
    assert 0.4 < spent < 1.0, spent
    assert idle_runnable_share(b.proc.pid) < 0.1
