"""Idle polling in the bundled client (``idle_poll_us``): while a small request waits, the
loop polls instead of sleeping, for at most the window, and never for Produce or Fetch.

Whether the loop polled or slept shows in the waiting thread's CPU time while the real
broker is stopped (SIGSTOP) with a request outstanding: polling burns it, sleeping does
not. The windows here are long (100 ms) so that the difference dwarfs scheduling noise.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from client_oracle import Produced, first_at_or_after, unique_topic

from client import Client, KafkaError, ProducerRecord
from client.connection import BrokerConnection
from protocol.errors import ErrorCode

WINDOW_US = 100_000
STOPPED_S = 0.5
T0 = 1_700_000_000_000


async def _cpu_while_stopped(broker: Any, call: Callable[[], Awaitable[Any]]) -> float:
    """This thread's CPU seconds over STOPPED_S during which ``call`` waits on a stopped
    broker; the broker is continued afterwards and the call's answer awaited."""
    broker.proc.send_signal(signal.SIGSTOP)
    try:
        task = asyncio.ensure_future(call())
        await asyncio.sleep(0)  # the request is written
        cpu = time.thread_time()
        await asyncio.sleep(STOPPED_S)
        cpu = time.thread_time() - cpu
    finally:
        broker.proc.send_signal(signal.SIGCONT)
    await task
    return cpu


async def test_a_time_lookup_polls_for_the_window_and_then_sleeps(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("poll")
    async with await Client.connect(broker.bootstrap, idle_poll_us=WINDOW_US) as c:
        await c.create_topic(topic)
        await c.produce(topic, [ProducerRecord(value=b"v", timestamp=T0)], partition=0)
        polled = await _cpu_while_stopped(broker, lambda: c.offsets_for_times(topic, T0, [0]))
        answered = await c.offsets_for_times(topic, T0, [0])
    async with await Client.connect(broker.bootstrap, idle_poll_us=0) as c:
        slept = await _cpu_while_stopped(broker, lambda: c.offsets_for_times(topic, T0, [0]))
    assert answered == {0: (0, T0)}
    # Polling spends about the window, not the whole stop; polling off spends ~nothing.
    assert 0.3 * WINDOW_US / 1e6 <= polled <= WINDOW_US / 1e6 + 0.15 < STOPPED_S, polled
    assert slept < 0.03, slept


async def test_produce_and_fetch_never_poll(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("nopoll")
    async with await Client.connect(broker.bootstrap, idle_poll_us=WINDOW_US) as c:
        await c.create_topic(topic)
        # Metadata and the connection to the leader first (small requests: they poll).
        await c.produce(topic, [ProducerRecord(value=b"v")], partition=0)
        await c.fetch_raw(topic, 0, 0)
        produced = await _cpu_while_stopped(
            broker, lambda: c.produce(topic, [ProducerRecord(value=b"v")], partition=0))
        fetched = await _cpu_while_stopped(broker, lambda: c.fetch_raw(topic, 0, 0))
        assert await c.latest(topic) == {0: 2}
    assert produced < 0.03, produced
    assert fetched < 0.03, fetched


async def test_the_poll_counts_against_the_request_timeout(broker) -> None:  # type: ignore[no-untyped-def]
    async with await Client.connect(broker.bootstrap, request_timeout=0.4,
                                    idle_poll_us=200_000) as c:
        conn = await c._any_conn()
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(KafkaError) as ei:
                await conn.request(18, 0, {})  # ApiVersions v0
            elapsed = time.monotonic() - started
        finally:
            broker.proc.send_signal(signal.SIGCONT)
    assert ei.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert "within 0.4s" in str(ei.value)
    assert 0.38 <= elapsed < 0.4 + 0.15, elapsed  # not the window on top of the timeout


async def test_a_lookup_cancelled_while_polling_leaves_the_connection_usable(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("pollcancel")
    async with await Client.connect(broker.bootstrap, idle_poll_us=WINDOW_US) as c:
        await c.create_topic(topic)
        await c.produce(topic, [ProducerRecord(value=b"v", timestamp=T0 + i) for i in range(3)],
                        partition=0)
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            task = asyncio.ensure_future(c.offsets_for_times(topic, T0 + 1, [0]))
            await asyncio.sleep(0.02)  # inside the window: polling
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        # The cancelled lookup's late answer is dropped; the next ones get their own.
        assert await c.offsets_for_times(topic, T0 + 2, [0]) == {0: (2, T0 + 2)}
        assert await c.offsets_for_times(topic, T0, [0]) == {0: (0, T0)}


async def test_pipelined_lookups_all_get_their_oracle_answers(broker) -> None:  # type: ignore[no-untyped-def]
    """One waiter per connection polls; the others wait, and every answer is still right."""
    topic = unique_topic("pollpipe")
    rng = random.Random(7)
    stamps = [T0 + rng.randrange(10_000) for _ in range(2000)]
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic)
        await c.produce(topic, [ProducerRecord(value=b"v", timestamp=ts) for ts in stamps],
                        partition=0)
        log = [Produced(0, i, ts, None, b"v") for i, ts in enumerate(stamps)]
        targets = [T0 - 1, T0 + 10_001] + [T0 + rng.randrange(10_000) for _ in range(98)]
        answers = await asyncio.gather(*(c.offsets_for_times(topic, t, [0]) for t in targets))
    assert answers == [{0: first_at_or_after(log, t)} for t in targets]


@pytest.mark.parametrize("bad", [-1, -200])
async def test_a_negative_window_is_refused(broker, bad: int) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="idle_poll_us"):
        await Client.connect(broker.bootstrap, idle_poll_us=bad)
    with pytest.raises(ValueError, match="idle_poll_us"):
        BrokerConnection("127.0.0.1", broker.port, None, "t", 1.0, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="idle_poll_us"):  # before any socket is opened
        await BrokerConnection.open("127.0.0.1", broker.port, client_id="t",
                                    request_timeout=1.0, idle_poll_us=bad)
