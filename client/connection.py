"""One asyncio TCP connection to one broker, with pipelined requests.

Invariants:
- Requests are written in call order and each carries a fresh correlation id; a
  single reader task routes every response frame to the waiter with that id, so
  many requests can be in flight on one socket (Kafka answers them in order).
- Every failure reaches the caller as :class:`protocol.errors.KafkaError` with a
  code: ``REQUEST_TIMED_OUT`` when no answer came in ``request_timeout`` seconds,
  ``NETWORK_EXCEPTION`` when the socket failed or the broker closed it (which is
  how Kafka rejects an unsupported request). After a network failure the
  connection is dead and every pending request fails at once; nothing hangs.
- A late answer to a timed-out request is read and dropped, keeping the stream in sync.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

import protocol.api as api
from protocol.errors import ErrorCode, KafkaError

__all__ = ["BrokerConnection", "parse_bootstrap"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
#: Refuse response frames larger than this (a desynchronised stream reads garbage sizes).
MAX_RESPONSE_BYTES = 512 * 1024 * 1024


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` → ``[("h1", 9092), ("h2", 9093)]``; a missing port means 9092."""
    out: list[tuple[str, int]] = []
    for part in bootstrap.split(","):
        part = part.strip()
        if not part:
            continue
        if part.startswith("["):  # [::1]:9092
            host, _, rest = part[1:].partition("]")
            port = rest.lstrip(":") or "9092"
        elif part.count(":") == 1:
            host, port = part.split(":")
        else:
            host, port = part, "9092"
        try:
            port_no = int(port)
        except ValueError:
            raise ValueError(f"bad port in bootstrap server {part!r}") from None
        if not host or not 0 < port_no < 65536:
            raise ValueError(f"bad bootstrap server {part!r}; expected host:port")
        out.append((host, port_no))
    if not out:
        raise ValueError(f"no bootstrap server in {bootstrap!r}; expected host:port")
    return out


class BrokerConnection:
    """A pipelined request/response channel to one broker; see the module docstring."""

    def __init__(
        self,
        host: str,
        port: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        request_timeout: float,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._reader = reader
        self._writer = writer
        self._next_id = 0
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._closed: KafkaError | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(
        cls, host: str, port: int, *, client_id: str, request_timeout: float
    ) -> BrokerConnection:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=1 << 20), request_timeout
            )
        except (OSError, TimeoutError) as e:
            raise KafkaError(
                ErrorCode.NETWORK_EXCEPTION, f"cannot connect to {host}:{port}: {e or 'timed out'}"
            ) from None
        return cls(host, port, reader, writer, client_id, request_timeout)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port}, pending={len(self._pending)})"

    def send(
        self, api_key: int, api_version: int, body: dict[str, Any], *, expect_response: bool = True
    ) -> asyncio.Future[Any]:
        """Write one request now and return a future for its decoded body.

        Writing happens synchronously, so requests issued in order are on the wire
        in order (callers may pipeline by creating several futures before awaiting).
        With ``expect_response=False`` (Produce with acks=0) the future is already done.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if self._closed is not None:
            fut.set_exception(self._closed)
            fut.exception()  # the caller awaits it or has already raised
            return fut
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        frame = api.encode_request(api_key, api_version, correlation_id, self.client_id, body)
        if expect_response:
            self._pending[correlation_id] = (api_key, api_version, fut)
        else:
            fut.set_result(None)
        self._writer.write(frame)
        return fut

    async def request(
        self,
        api_key: int,
        api_version: int,
        body: dict[str, Any],
        *,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Any:
        """Send a request and wait for its decoded response body (a dict)."""
        fut = self.send(api_key, api_version, body, expect_response=expect_response)
        await self.drain()
        return await self.wait(fut, timeout)

    async def wait(self, fut: asyncio.Future[Any], timeout: float | None = None) -> Any:
        """Wait for a future from :meth:`send`, failing it with REQUEST_TIMED_OUT after ``timeout``.

        A timer on the loop (rather than ``asyncio.wait_for``) keeps the per-request
        cost to one scheduled callback, which matters for small lookups.
        """
        if fut.done():
            return fut.result()
        limit = self.request_timeout if timeout is None else timeout
        timer = asyncio.get_running_loop().call_later(limit, self._expire, fut, limit)
        try:
            return await fut
        finally:
            timer.cancel()

    def _expire(self, fut: asyncio.Future[Any], limit: float) -> None:
        if fut.done():
            return
        for cid, (_, _, f) in list(self._pending.items()):
            if f is fut:
                del self._pending[cid]
        fut.set_exception(
            KafkaError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"no response from {self.host}:{self.port} within {limit:g}s",
            )
        )

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            err = KafkaError(
                ErrorCode.NETWORK_EXCEPTION, f"write to {self.host}:{self.port} failed: {e}"
            )
            self._fail(err)
            raise err from None

    async def _read_loop(self) -> None:
        reason = "connection closed by the broker"
        try:
            while True:
                head = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if size < 4 or size > MAX_RESPONSE_BYTES:
                    reason = f"invalid response frame size {size}"
                    break
                payload = await self._reader.readexactly(size)
                (cid,) = _CORRELATION.unpack_from(payload, 0)
                entry = self._pending.pop(cid, None)
                if entry is None:
                    log.debug("dropping response to abandoned request %d", cid)
                    continue
                api_key, api_version, fut = entry
                if fut.done():
                    continue
                try:
                    _, body = api.decode_response(api_key, api_version, payload)
                except Exception as e:  # a broker bug must not hang the caller
                    fut.set_exception(
                        KafkaError(
                            ErrorCode.CORRUPT_MESSAGE,
                            f"cannot decode response to api {api_key} v{api_version}: {e}",
                        )
                    )
                    continue
                fut.set_result(body)
        except asyncio.IncompleteReadError:
            pass
        except (OSError, asyncio.CancelledError) as e:
            reason = f"connection lost: {e}" if not isinstance(e, asyncio.CancelledError) else "connection closed"
        self._fail(
            KafkaError(ErrorCode.NETWORK_EXCEPTION, f"{self.host}:{self.port}: {reason}")
        )

    def _fail(self, err: KafkaError) -> None:
        if self._closed is None:
            self._closed = err
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
                # A caller whose write failed raises err itself and never awaits
                # this future; don't let asyncio log it as "never retrieved".
                fut.exception()
        self._writer.close()

    async def close(self) -> None:
        if self._closed is None:
            self._fail(KafkaError(ErrorCode.NETWORK_EXCEPTION, "connection closed by the client"))
        self._read_task.cancel()
        try:
            await self._read_task
        except asyncio.CancelledError:
            pass
        try:
            await self._writer.wait_closed()
        except (OSError, RuntimeError):
            pass
