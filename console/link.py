"""The console's connection to the cluster, waited for when the broker is not up yet.

A console started before its broker (``docker compose up``, a laptop after a reboot)
serves its pages at once and says on each one that the broker is not reachable yet;
it connects as soon as the broker answers.

Invariants:
- ``BrokerLink.client`` is the connected client, or raises :class:`BrokerUnreachable`
  naming the bootstrap address and the last cause; it never hands out a half-made client.
- Only an unreachable broker is retried (Kafka's NETWORK_EXCEPTION: refused, timed out,
  closed while connecting). What will not fix itself by waiting stops the console as
  it did before: a refused login, a certificate the CA did not sign (a TLS error that
  names a certificate), an unsupported version.
- Waiting is reported on the given stream: redrawn in place on one line only when that
  stream is a terminal; elsewhere (a pipe, a log file, journald) as plain lines, one
  when waiting starts, one a minute while it lasts and one when connected, so a log
  never fills with carriage returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TextIO

from client.aio import Client
from protocol.errors import ErrorCode, KafkaError

__all__ = ["BrokerLink", "BrokerUnreachable"]

#: Seconds between two attempts: quick at first (a broker starting beside the console),
#: then every RETRY_MAX_S.
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 2.0
#: On a stream that is not a terminal, how often a still-waiting line is written.
LOG_EVERY_S = 60.0


class BrokerUnreachable(Exception):
    """The console has no connection to its broker yet (it keeps trying)."""


def _retryable(e: KafkaError) -> bool:
    return e.code == ErrorCode.NETWORK_EXCEPTION and "certificate" not in str(e).lower()


def _cause(e: KafkaError) -> str:
    """``cannot connect to h:p: [Errno 111] ...``: the reason without the error code that
    ``Client.connect`` wraps it in twice (the code is always NETWORK_EXCEPTION here)."""
    text = e.message
    prefix = f"{e.code.name}: "
    while text.startswith(prefix):
        text = text[len(prefix):]
    return text


class BrokerLink:
    """Connects with ``connect`` (a ``Client.connect`` call) once, or until it succeeds."""

    def __init__(self, bootstrap: str, connect: Callable[[], Awaitable[Client]]) -> None:
        self.bootstrap = bootstrap
        self._connect = connect
        self._client: Client | None = None
        self.cause = ""
        self.attempts = 0

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def client(self) -> Client:
        if self._client is None:
            raise BrokerUnreachable(self.waiting_message())
        return self._client

    def waiting_message(self) -> str:
        return f"broker at {self.bootstrap} not reachable yet, retrying"

    async def try_connect(self) -> bool:
        """One attempt: True when connected, False when the broker is unreachable; anything
        waiting will not mend is raised."""
        self.attempts += 1
        try:
            self._client = await self._connect()
        except KafkaError as e:
            if not _retryable(e):
                raise
            self.cause = _cause(e)
            return False
        return True

    async def wait_until_connected(self, out: TextIO) -> None:
        """Retry until connected, reporting on ``out`` (see the module's invariants)."""
        tty = out.isatty()
        started = time.monotonic()
        logged = started
        delay = RETRY_FIRST_S
        if not tty:
            print(f"{self.waiting_message()} ({self.cause}); the pages say so until it answers",
                  file=out, flush=True)
        while True:
            if tty:
                waited = time.monotonic() - started
                out.write(f"\r{self.waiting_message()} (attempt {self.attempts}, {waited:.0f} s)\x1b[K")
                out.flush()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
            if await self.try_connect():
                break
            now = time.monotonic()
            if not tty and now - logged >= LOG_EVERY_S:
                logged = now
                print(f"still waiting for the broker at {self.bootstrap} after {now - started:.0f} s"
                      f" ({self.cause})", file=out, flush=True)
        done = f"connected to the broker at {self.bootstrap} after {time.monotonic() - started:.0f} s"
        if tty:
            out.write(f"\r{done}\x1b[K\n")
            out.flush()
        else:
            print(done, file=out, flush=True)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
