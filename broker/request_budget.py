"""The broker-wide budget of requests read but not yet answered (Kafka's request queue,
``queued.max.requests`` and ``queued.max.request.bytes``), and the connections waiting for
it to ease.

Invariants:
- A request is counted (``take``) when its place in its connection's answer order is
  taken and it may still be served later (left to the pump, or a handler that
  suspended); it is given back (``give_back``) exactly once: when its answer is in
  place, or when it is dropped unserved. So the counts never go negative and are 0
  when nothing is outstanding.
- ``full`` while ``count >= queued.max.requests`` or, when ``queued.max.request.bytes``
  is >= 0, ``bytes >= queued.max.request.bytes``; a connection decodes no further
  request of its own while it is (broker/connection.py's back-pressure) and joins
  ``held``.
- Whenever a request is given back and the budget is no longer full, every held
  connection is asked, in a later pass of the loop, to serve what it holds.
"""

from __future__ import annotations

import asyncio
from typing import Any


class RequestBudget:
    __slots__ = ("count", "bytes", "max_requests", "max_bytes", "held", "loop")

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self.count = 0
        self.bytes = 0
        self.max_requests = max_requests
        self.max_bytes = max_bytes  # < 0: no byte limit
        self.held: set[Any] = set()  # connections with a ``release()`` to call
        self.loop: asyncio.AbstractEventLoop | None = None  # set when the broker starts

    @property
    def full(self) -> bool:
        return self.count >= self.max_requests or 0 <= self.max_bytes <= self.bytes

    def take(self, size: int) -> None:
        """Count one more outstanding request of ``size`` bytes."""
        self.count += 1
        self.bytes += size

    def give_back(self, size: int) -> None:
        """Stop counting one request of ``size`` bytes (answered, or dropped unserved)."""
        self.count -= 1
        self.bytes -= size
        if self.held:
            self.release_held()

    def release_held(self) -> None:
        """Back-pressure eased: let held connections serve what they buffered (next pass)."""
        if not self.full and self.loop is not None:
            for conn in list(self.held):
                self.loop.call_soon(conn.release)
