"""Idle polling (idle.poll.us): the broker keeps polling its sockets for a short
window after each request, then sleeps. Shown on a real broker subprocess by what Linux
records for its event-loop thread (/proc/PID/task/PID/schedstat: time on a CPU, and
time waiting for one): busy while requests keep coming, asleep once they stop, and
never spinning when the setting is 0.

A spinning loop is *runnable* (on a CPU or waiting for one) the whole window, whatever
else the machine runs, while the CPU time it gets is only its share of a loaded machine
(on 2 busy cores CI measured 0.11 CPU-s for a 0.5 s spin). So the spin is measured as
runnable time. "Asleep" is both little CPU (< 0.1 of the time, as before) and runnable
well under half the time: a sleeping loop's few wake-ups wait longer for a CPU on a
loaded machine (0.23 of a second measured with 2 test runs and 3 busy loops on 2 cores),
but a spinning one is runnable all of it. The event loop runs on the process's main
thread (uvloop.run in broker.server)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kafka_socket import KafkaSocket

API_VERSIONS_BODY = {"client_software_name": "t", "client_software_version": "1"}


def sched_seconds(pid: int) -> tuple[float, float]:
    """(on a CPU, runnable = on a CPU or waiting for one) seconds of ``pid``'s main thread."""
    on_cpu_ns, waiting_ns, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    return int(on_cpu_ns) / 1e9, (int(on_cpu_ns) + int(waiting_ns)) / 1e9


def shares(pid: int, seconds: float = 1.0) -> tuple[float, float]:
    """The (CPU, runnable) shares of ``pid``'s main thread over the next ``seconds``."""
    (cpu0, run0), t0 = sched_seconds(pid), time.monotonic()
    time.sleep(seconds)
    (cpu1, run1), t1 = sched_seconds(pid), time.monotonic()
    return (cpu1 - cpu0) / (t1 - t0), (run1 - run0) / (t1 - t0)


def asleep(cpu_share: float, runnable_share: float) -> bool:
    return cpu_share < 0.1 and runnable_share < 0.5


@pytest.mark.parametrize("window_us", ["0", "200", "20000"])
def test_polling_stops_when_requests_stop(broker_factory: Any, window_us: str) -> None:
    b = broker_factory(overrides={"idle.poll.us": window_us})
    assert b.proc is not None
    raw = KafkaSocket(b.port)
    for _ in range(2000):  # requests one after another: the poller has work in each gap
        cid, frame = raw.frame(18, 3, API_VERSIONS_BODY)
        raw.send(frame)
        assert raw.read()[0] == cid
    # No request for a second: whatever the window, the broker is asleep again
    # (a spinning event loop would be runnable for about the whole second here).
    measured = shares(b.proc.pid)
    assert asleep(*measured), measured


def test_a_long_window_spins_while_it_lasts_and_then_sleeps(broker_factory: Any) -> None:
    """With a 0.5 s window one request keeps the loop polling (runnable) for about
    0.5 s: the window is honoured, and bounded."""
    b = broker_factory(overrides={"idle.poll.us": "500000"})
    assert b.proc is not None
    # Start measuring once startup work is over (it takes longer on a loaded machine).
    deadline = time.monotonic() + 30
    while not asleep(*(idle := shares(b.proc.pid, 0.5))):
        assert time.monotonic() < deadline, f"the broker never went idle after starting: {idle}"
    raw = KafkaSocket(b.port)
    _, start = sched_seconds(b.proc.pid)
    cid, frame = raw.frame(18, 3, API_VERSIONS_BODY)
    raw.send(frame)
    assert raw.read()[0] == cid
    time.sleep(1.5)
    spent = sched_seconds(b.proc.pid)[1] - start
    # About the 0.5 s window, plus what idling costs anyway on this machine (wake-ups
    # waiting for a CPU: idle[1] of each second, measured just before).
    assert 0.4 < spent < 1.0 + 1.5 * idle[1], (spent, idle)
    measured = shares(b.proc.pid)
    assert asleep(*measured), measured  # the spin ended
