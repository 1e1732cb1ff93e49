"""Waiting on a condition instead of sleeping a guessed time: the test goes on as soon as
the condition holds, and fails with what it waited for when it does not in ``timeout``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy and return that; AssertionError
    naming ``what`` (and the last value seen) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; last saw {got!r}")
        time.sleep(interval)


async def wait_until_async(predicate: Callable[[], Awaitable[T]], timeout: float, what: str,
                           interval: float = 0.05) -> T:
    """``wait_until`` for a coroutine predicate, polling without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while True:
        got = await predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; last saw {got!r}")
        await asyncio.sleep(interval)
