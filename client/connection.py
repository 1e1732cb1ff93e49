"""One asyncio TCP connection to one broker, with pipelined requests.

Invariants:
- Requests are written in call order and each carries a fresh correlation id;
  the socket's protocol routes every response frame to the waiter with that id
  as it arrives, so many requests can be in flight on one socket (Kafka answers
  them in order).
- Every failure reaches the caller as :class:`protocol.errors.KafkaError` with a
  code: ``REQUEST_TIMED_OUT`` when no answer came in ``request_timeout`` seconds,
  ``NETWORK_EXCEPTION`` when the socket failed or the broker closed it (which is
  how Kafka rejects an unsupported request). After a network failure the
  connection is dead and every pending request fails at once; nothing hangs.
- A late answer to a timed-out request is read and dropped, keeping the stream in sync.
- TLS is run here, not by the event loop's SSL transport: ``protocol.tls.TlsSession`` (the
  broker's own record layer) over the plain socket, its plaintext fed to the same frame
  code. :meth:`BrokerConnection.open` returns once the handshake is done; a failed
  handshake (untrusted certificate, name mismatch, the broker's alert) raises
  NETWORK_EXCEPTION with OpenSSL's reason, and the broker's close_notify ends the
  connection as its TCP close does.
- Idle polling (``idle_poll_us``, as the broker's ``idle.poll.us``): while a small request
  (anything but Produce and Fetch) waits for its answer, the loop keeps polling the
  sockets with zero timeouts for up to that long instead of sleeping, so the thread that
  reads the answer has not gone idle. Bounded: a request that takes longer costs at most
  the window in CPU, then the loop sleeps as before; 0 turns it off. Produce and Fetch
  never poll (a pipeline of them keeps the loop busy anyway, and a long poll would spin).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any

import protocol.api as api
from protocol.errors import ErrorCode, KafkaError
from protocol.tls import TlsSession

__all__ = ["IDLE_POLL_US", "BrokerConnection", "parse_bootstrap", "poll_window"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
#: How long a waiting small request keeps the loop polling, by default (µs). Measured
#: here: one time lookup at a time, p50 94 -> 47 µs on PLAINTEXT and 116 -> 56 µs on
#: SASL_SSL (docs/client.md); a thread woken from idle runs its first tens of µs cold.
IDLE_POLL_US = 200
# Throughput APIs (Produce, Fetch): answers are not polled for.
_UNPOLLED = frozenset({0, 1})
_perf = time.perf_counter


def poll_window(idle_poll_us: int) -> float:
    """``idle_poll_us`` in seconds; a negative window is refused (ValueError)."""
    if idle_poll_us < 0:
        raise ValueError(f"idle_poll_us must be >= 0, not {idle_poll_us}")
    return idle_poll_us / 1e6

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


class _Channel(asyncio.Protocol):
    """The socket side of a :class:`BrokerConnection`: frames in, futures resolved.

    Response frames are cut and decoded in ``data_received`` and handed to their
    waiters directly, with no reader task between the socket and the caller: one
    event-loop wake-up per answer instead of three (the reader's two
    ``readexactly`` steps and the caller's future).
    """

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        # What a request frame goes out through: the transport's own write on plaintext
        # (bound once, no extra call per request), encryption first on TLS.
        self.write: Callable[[bytes], None] = _not_connected
        # A frame in pieces (a Produce request's batches uncopied): the transport's
        # writelines on plaintext, one join and ``write`` otherwise.
        self.write_parts: Callable[[list[Any]], None] = self._write_joined
        self._buf = bytearray()
        self._paused = False
        self._drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.write = self.transport.write  # type: ignore[union-attr]
        self.write_parts = self.transport.writelines  # type: ignore[union-attr]

    def _write_joined(self, parts: list[Any]) -> None:
        self.write(b"".join(parts))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        if not buf and len(data) >= 4:
            size = _SIZE.unpack_from(data)[0]
            if len(data) == size + 4 and 4 <= size <= MAX_RESPONSE_BYTES:
                self.conn._deliver(data, 4)  # the usual chunk: exactly one whole answer
                return
        buf += data
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < 4 or size > MAX_RESPONSE_BYTES:
                self.conn._fail(KafkaError(
                    ErrorCode.NETWORK_EXCEPTION,
                    f"{self.conn.host}:{self.conn.port}: invalid response frame size {size}"))
                return
            end = pos + 4 + size
            if end > n:
                break
            with memoryview(buf) as view:  # one copy of the frame, not two
                frame = bytes(view[pos + 4:end])
            self.conn._deliver(frame, 0)
            pos = end
            if self.conn.closed:
                return
        del buf[:pos]

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost reports it

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"connection lost: {exc}" if exc is not None else "connection closed by the broker"
        self.conn._fail(KafkaError(ErrorCode.NETWORK_EXCEPTION,
                                   f"{self.conn.host}:{self.conn.port}: {reason}"))
        self._wake_writers(exc or ConnectionResetError("connection closed"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writers(None)

    def _wake_writers(self, exc: BaseException | None) -> None:
        fut, self._drained = self._drained, None
        if fut is not None and not fut.done():
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)
                fut.exception()

    async def drained(self) -> None:
        """Return once the transport's write buffer is below its high-water mark."""
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("connection closed")
        if not self._paused:
            return
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drained)


def _not_connected(data: bytes) -> None:
    raise ConnectionResetError("not connected")


class _TlsChannel(_Channel):
    """A :class:`_Channel` over TLS: ciphertext from the socket goes through the session,
    its plaintext through the frame code above; frames are encrypted on the way out.
    ``handshake`` resolves when the session is up (or fails with the ``ssl.SSLError``)."""

    def __init__(self, context: ssl.SSLContext, server_hostname: str) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # bound by BrokerConnection
        self.session = TlsSession(context, server_side=False, server_hostname=server_hostname)
        self.handshake: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # One call per request: encrypt and write; handshake flights, alerts and
        # close_notify replies go to the socket from inside the session.
        self.write = self.session.attach(transport.write)  # type: ignore[attr-defined]
        try:
            self.session.start()  # the ClientHello, sent
        except ssl.SSLError as exc:
            self._broken(exc)

    def data_received(self, data: bytes) -> None:
        session = self.session
        try:
            plain = session.receive(data)
        except ssl.SSLError as exc:
            self._broken(exc)
            return
        if plain:
            _Channel.data_received(self, plain)  # (no super object per request)
        if session.closed:  # the broker's close_notify: as its TCP close
            if self.conn is not None:
                self.conn._fail(KafkaError(
                    ErrorCode.NETWORK_EXCEPTION,
                    f"{self.conn.host}:{self.conn.port}: connection closed by the broker "
                    "(TLS close_notify)"))
            else:
                self._broken(ConnectionResetError("connection closed during the TLS handshake"))
        elif self.conn is None and session.handshaken and not self.handshake.done():
            self.handshake.set_result(None)

    def _broken(self, exc: Exception) -> None:
        """The handshake or the record layer failed: the alert (if any) went out already,
        the waiter learns why, and the socket closes."""
        if self.transport is not None:
            self.transport.close()
        if not self.handshake.done():
            self.handshake.set_exception(exc)
            self.handshake.exception()  # open() may have stopped waiting (its timeout)
        elif self.conn is not None:
            self.conn._fail(KafkaError(ErrorCode.NETWORK_EXCEPTION,
                                       f"{self.conn.host}:{self.conn.port}: TLS failed: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(
                exc or ConnectionResetError("connection closed during the TLS handshake"))
            self.handshake.exception()
        if self.conn is not None:
            super().connection_lost(exc)

    def close(self) -> None:
        transport = self.transport
        if transport is None:
            return
        if not transport.is_closing():
            alert = self.session.close_notify()
            if alert:
                transport.write(alert)
        transport.close()


class BrokerConnection:
    """A pipelined request/response channel to one broker; see the module docstring."""

    def __init__(
        self,
        host: str,
        port: int,
        channel: _Channel,
        client_id: str,
        request_timeout: float,
        idle_poll_us: int = IDLE_POLL_US,
    ) -> None:
        self.idle_poll_s = poll_window(idle_poll_us)
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._polling = False  # a waiter is polling the loop (see wait)
        self._channel = channel
        self._next_id = 0
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._closed: KafkaError | None = None
        channel.conn = self

    @classmethod
    async def open(
        cls, host: str, port: int, *, client_id: str, request_timeout: float,
        ssl: Any = None, idle_poll_us: int = IDLE_POLL_US,
    ) -> BrokerConnection:
        """Connect (over TLS with ``ssl``, an ``ssl.SSLContext``; SASL is
        ``client.security``'s job once connected)."""
        poll_window(idle_poll_us)  # refused before a socket is opened
        loop = asyncio.get_running_loop()
        holder: list[_Channel] = []

        def factory() -> _Channel:
            ch = (_Channel(None) if ssl is None  # type: ignore[arg-type]  # bound below
                  else _TlsChannel(ssl, host))
            holder.append(ch)
            return ch

        async def connect() -> None:
            transport, _ = await loop.create_connection(factory, host, port)
            sock = transport.get_extra_info("socket")
            if sock is not None:
                try:  # one small request, one answer: never wait for Nagle
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass
            if isinstance(holder[0], _TlsChannel):
                await holder[0].handshake

        try:
            await asyncio.wait_for(connect(), request_timeout)
        except (OSError, TimeoutError) as e:  # ssl.SSLError is an OSError
            if holder and holder[0].transport is not None:
                holder[0].transport.abort()
            raise KafkaError(
                ErrorCode.NETWORK_EXCEPTION, f"cannot connect to {host}:{port}: {str(e) or 'timed out'}"
            ) from None
        return cls(host, port, holder[0], client_id, request_timeout, idle_poll_us)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port}, pending={len(self._pending)})"

    def send(
        self, api_key: int, api_version: int, body: Any, *, expect_response: bool = True
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
        frame = api.encode_request_parts(api_key, api_version, correlation_id, self.client_id, body)
        if expect_response:
            self._pending[correlation_id] = (api_key, api_version, fut)
        else:
            fut.set_result(None)
        if len(frame) == 1:
            self._channel.write(frame[0])
        else:
            self._channel.write_parts(frame)
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
        """Send a request and wait for its decoded response body (a dict); the loop
        polls for the answer of anything but Produce and Fetch (see ``idle_poll_us``)."""
        fut = self.send(api_key, api_version, body, expect_response=expect_response)
        await self.drain()
        return await self.wait(fut, timeout, poll=api_key not in _UNPOLLED)

    async def wait(self, fut: asyncio.Future[Any], timeout: float | None = None, *,
                   poll: bool = False) -> Any:
        """Wait for a future from :meth:`send`, failing it with REQUEST_TIMED_OUT after ``timeout``;
        with ``poll``, keep the loop polling for the answer for up to ``idle_poll_us`` first.

        A timer on the loop (rather than ``asyncio.wait_for``) keeps the per-request
        cost to one scheduled callback, which matters for small lookups.
        """
        if fut.done():
            return fut.result()
        limit = self.request_timeout if timeout is None else timeout
        delay = limit
        window = self.idle_poll_s
        if poll and window and not self._polling:
            # Each sleep(0) is one pass of the loop with a zero-timeout poll of the sockets.
            # One waiter per connection polls; the others (pipelined lookups) just wait,
            # their answers arrive in the same reads as its own.
            self._polling = True
            started = _perf()
            try:
                while True:
                    await asyncio.sleep(0)
                    if fut.done():
                        return fut.result()
                    waited = _perf() - started
                    if waited >= window:
                        break
            except asyncio.CancelledError:
                fut.cancel()  # as a cancelled ``await fut`` would
                raise
            finally:
                self._polling = False
            delay = max(limit - waited, 0.0)
        timer = asyncio.get_running_loop().call_later(delay, self._expire, fut, limit)
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
        """Wait while the socket's write buffer is full (flow control)."""
        if self._closed is not None:
            raise self._closed
        try:
            await self._channel.drained()
        except (OSError, RuntimeError) as e:
            err = self._closed or KafkaError(
                ErrorCode.NETWORK_EXCEPTION, f"write to {self.host}:{self.port} failed: {e}"
            )
            self._fail(err)
            raise err from None

    def _deliver(self, data: bytes | bytearray, start: int) -> None:
        """Hand one response frame (``data[start:]``) to the request waiting for it."""
        payload = data[start:] if start else data
        (cid,) = _CORRELATION.unpack_from(payload, 0)
        entry = self._pending.pop(cid, None)
        if entry is None:
            log.debug("dropping response to abandoned request %d", cid)
            return
        api_key, api_version, fut = entry
        if fut.done():
            return
        try:
            _, body = api.decode_response(api_key, api_version, payload)
        except Exception as e:  # a broker bug must not hang the caller
            fut.set_exception(
                KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"cannot decode response to api {api_key} v{api_version}: {e}",
                )
            )
            return
        fut.set_result(body)

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
        self._channel.close()

    async def close(self) -> None:
        if self._closed is None:
            self._fail(KafkaError(ErrorCode.NETWORK_EXCEPTION, "connection closed by the client"))
        await asyncio.sleep(0)  # let the transport finish closing
