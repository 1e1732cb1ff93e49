"""One client connection: frames in, ordered answers out (the asyncio Protocol every
listener's server creates; TLS listeners use :class:`broker.tls_connection.TlsConnection`).

Invariants:
- Responses leave in request order. Handlers of pipelined requests run concurrently (a
  Fetch long-poll does not hold up the decoding of what follows), but each response
  waits in its slot until every earlier one has been written. acks=0 Produce fills its
  slot with nothing. Produce and Fetch frames (and any frame behind one) are served by
  the broker's pump (broker/pump.py), their place in the order taken when read.
- Back-pressure: a connection's requests are decoded only while its answers are being
  read (the transport is below its write high-water mark), it is not muted by a quota
  (KIP-219), it has fewer than MAX_IN_FLIGHT requests waiting, and the broker serves
  fewer than ``queued.max.requests`` (and ``queued.max.request.bytes``) waiting requests
  in all (``broker.request_budget``, which each request left to the pump or to a
  suspended handler counts against until it is answered or dropped); otherwise the rest
  of what it sent stays unparsed in its buffer and the socket is not read, so a client
  that never reads costs one answer's worth of memory, not one per request it pipelined.
- A bad frame (negative or larger than the frame limit, unknown API key or version,
  undecodable header/body) closes that one connection after the responses already due,
  with one log line saying why. An unsupported ApiVersions version is answered with
  error 35 in a v0 body instead, as Kafka does. What a handler's failure is answered with
  is broker/answers.py's. Nothing a client sends can stop the server.
- A peer that closes is closed gracefully: every request already read from it (waiting
  for the pump, or held unparsed by back-pressure) is still served, its answer dropped;
  only Fetch is not. When the broker closes a connection for a reason, nothing read
  after the request that closed it is served.
- Authentication: on a SASL listener every frame passes the connection's SaslGate
  (broker/security/sasl.py) until it authenticates, with frames capped at
  ``sasl.server.max.receive.size`` meanwhile; a failed authentication is answered and
  closed only after the gate's delay, reading nothing more. Without KIP-368
  re-authentication the gate leaves the request path once passed. A request's context
  carries the listener name and the principal (``User:ANONYMOUS``, the TLS certificate's
  DN, or the SASL user).
- Limits: ``max.connections`` and ``max.connections.per.ip`` are checked when a
  connection is made (over them it is closed at once, with a log line); the per-IP count
  is given back exactly once, when it is lost.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import struct
import time
import types
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from broker.answers import API_VERSIONS_KEY, FETCH_KEY, error_answer, respond
from broker.dispatch import RequestContext, Route
from broker.metrics import METRICS
from broker.security.listeners import Listener
from broker.security.sasl import Outcome, SaslGate
from broker.security.tls import ANONYMOUS
from protocol import api as papi
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.server import Broker

log = logging.getLogger("chronolog.broker")

_HEADER = struct.Struct(">hhi")
_perf = time.perf_counter
_SIZE = struct.Struct(">i")
# Stop reading a connection with this many requests in flight (Kafka mutes a
# channel with one); resume when half of them are answered.
MAX_IN_FLIGHT = 64
# The second byte of the API keys served through the pump (Produce 0, Fetch 1; the
# first byte of both is 0).
_THROUGHPUT_KEYS = (b"\0", b"\1")
# Answers served inline are gathered and written once per chunk read, or as soon as
# they hold this many bytes, so that the transport can push back (pause_writing).
OUT_CHUNK = 256 * 1024


class _Slot:
    """One request's place in its connection's response order."""

    __slots__ = ("done", "data", "close_reason", "size")

    def __init__(self, size: int = 0) -> None:
        self.done = False
        self.data: bytes | None = None
        self.close_reason: str | None = None
        self.size = size  # the request's bytes, while it counts against queued.max.*


class Connection(asyncio.Protocol):
    """One client connection: frames in, ordered responses out."""

    def __init__(self, broker: Broker, listener: Listener | None = None) -> None:
        self.broker = broker
        self.listener = listener.name if listener is not None else "PLAINTEXT"
        self.principal = ANONYMOUS
        self._logins = 0
        self.gate: SaslGate | None = (
            broker.sasl_gate(listener.name) if listener is not None and listener.sasl else None)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._buf = bytearray()
        self._pending: collections.deque[_Slot] = collections.deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        # We closed it for a reason (a bad request, a failed handshake): requests read
        # after that one are not served. Otherwise the peer closed and they all are.
        self._refused = False
        self._reading_paused = False
        self._writing_paused = False
        self._corked = False
        self._out: list[bytes] = []
        self._out_size = 0
        # Whole frames left unparsed in _buf by back-pressure, and the guard that keeps
        # their processing from starting again inside itself.
        self._held = False
        self._processing = False
        # Produce and Fetch frames waiting for the broker's pump (broker/pump.py), each
        # with its place in the response order already taken, and the place of the one
        # being served now.
        self._deferred: collections.deque[tuple[_Slot, bytes]] = collections.deque()
        self._reserved: _Slot | None = None
        self._ip: str | None = None
        # KIP-219: a connection over a client quota is muted (not read) until then.
        self._throttled = False
        self._throttled_until = 0.0
        self._unmute: asyncio.TimerHandle | None = None
        self.last_active = time.monotonic()
        self._max_frame = broker.config.socket_request_max_bytes
        if self.gate is not None:  # before authentication: SASL's own, smaller limit
            self._max_frame = min(self._max_frame, broker.config.sasl_server_max_receive_size)

    # ------------------------------------------------------------ lifecycle

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        transport: asyncio.Transport = base  # type: ignore[assignment]
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        broker = self.broker
        if broker.stopping:
            transport.abort()
            return
        if len(broker.connections) >= broker.config.max_connections:
            log.warning("closing connection from %s: max.connections (%d) reached",
                        self.peer, broker.config.max_connections)
            self._closing = True
            transport.close()
            return
        ip = peer[0] if isinstance(peer, tuple) else str(peer)
        count = broker.per_ip.get(ip, 0)
        if count >= broker.config.max_connections_per_ip:
            log.warning("closing connection from %s: max.connections.per.ip (%d) reached",
                        self.peer, broker.config.max_connections_per_ip)
            self._closing = True
            transport.close()
            return
        broker.per_ip[ip] = count + 1
        self._ip = ip
        broker.connections.add(self)
        METRICS.connection_opened()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        broker = self.broker
        broker.requests.held.discard(self)
        if self._refused:
            self._drop_deferred()
        else:  # the peer left (EOF, reset, close_notify): what it sent is still served
            self._serve_after_close()
        self._buf = bytearray()
        if self._ip is not None:
            left = broker.per_ip.get(self._ip, 1) - 1
            if left > 0:
                broker.per_ip[self._ip] = left
            else:
                broker.per_ip.pop(self._ip, None)
            self._ip = None
        if self in broker.connections:
            broker.connections.discard(self)
            METRICS.connection_closed()
        for task in list(self._tasks):
            if task.get_name() == "fetch":
                task.cancel()
        if self._unmute is not None:
            self._unmute.cancel()
            self._unmute = None

    def _serve_after_close(self) -> None:
        """Kafka closes a connection its peer closed gracefully: every request already
        received is served (its answer dropped). Deferred frames stay with the pump;
        whole frames still unparsed in ``_buf`` (held by back-pressure) join them in
        order. Fetch frames are dropped: a read that nobody receives changes nothing."""
        buf = self._buf
        pos, n = 0, len(buf)
        while n - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            end = pos + 4 + size
            if size < 0 or size > self._max_frame or end > n:
                break
            self._defer(bytes(buf[pos + 4 : end]))
            pos = end
        kept: collections.deque[tuple[_Slot, bytes]] = collections.deque()
        for slot, frame in self._deferred:
            if frame[:2] == b"\0\1":
                slot.done = True
                self._uncount(slot)
            else:
                kept.append((slot, frame))
        self._deferred = kept
        if self._deferred:
            log.info("%s closed with %d request(s) not yet served: serving them",
                     self.peer, len(self._deferred))

    def _uncount(self, slot: _Slot) -> None:
        """Stop counting a request that will not be served against queued.max.*."""
        self.broker.requests.give_back(slot.size)

    def _drop_deferred(self) -> None:
        while self._deferred:
            self._uncount(self._deferred.popleft()[0])

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()
        self.release()

    def close(self, reason: str) -> None:
        """Close this connection after the responses already written; log why once.
        Requests read after the one that closes it are not served, even when the peer
        has already gone and the pump is still serving what it sent."""
        if self._deferred:  # always behind the request that closes the connection
            log.warning("not serving %d request(s) from %s read after the one that closes "
                        "the connection", len(self._deferred), self.peer)
            self._drop_deferred()
        if self._closing:
            return
        self._write_out()  # answers already due go out before the close
        self._closing = True
        self._refused = True
        log.warning("closing connection from %s: %s", self.peer, reason)
        if self.transport is not None:
            self.transport.close()

    @property
    def idle(self) -> bool:
        return not self._pending and not self._buf

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------ reading

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self.last_active = time.monotonic()
        broker = self.broker
        broker.last_request = _perf()
        wake = broker.poll_wake
        if wake is not None:
            broker.poll_wake = None
            if not wake.done():  # cancelled when the broker stops
                wake.set_result(None)
        n = len(data)
        METRICS.bytes_in(n)
        buf = self._buf
        if (not buf and n >= 4 and _SIZE.unpack_from(data)[0] == n - 4 <= self._max_frame
                and not self._held and not self._blocked()):
            # The usual chunk (one client waiting on one answer): exactly one whole frame.
            self._corked = True
            try:
                self._on_frame(data[4:])
            finally:
                self._corked = False
                self._write_out()
            return
        view: bytes | bytearray
        if buf:
            buf += data
            view = buf
        else:
            view = data
        n = len(view)
        if n >= 4 and view is buf:
            # Fast reject: still waiting for a large frame's body.
            size = _SIZE.unpack_from(view, 0)[0]
            if 0 <= size <= self._max_frame and n - 4 < size:
                return
        if self._held:  # back-pressure: keep it for when the answers are read
            if view is not buf:
                self._buf = bytearray(view)
            return
        self._process(view)

    def _blocked(self) -> bool:
        """Back-pressure: stop decoding this connection's requests for now."""
        requests = self.broker.requests
        return (self._writing_paused or self._throttled or len(self._pending) >= MAX_IN_FLIGHT
                or requests.count >= requests.max_requests
                or 0 <= requests.max_bytes <= requests.bytes)

    def release(self) -> None:
        """Serve frames that back-pressure held, once it has eased."""
        if not self._held or self._processing or self._closing or self._blocked():
            return
        self._held = False
        self.broker.requests.held.discard(self)
        self._process(self._buf)
        self._update_reading()

    def _process(self, view: bytes | bytearray) -> None:
        """Serve the whole frames at the start of ``view`` and keep the rest in ``_buf``,
        stopping early (and holding the rest) while :meth:`_blocked`."""
        n = len(view)
        buf = self._buf
        # Answers produced while this chunk is parsed (pipelined requests served inline)
        # are gathered and written with one call at the end, or when OUT_CHUNK is reached.
        self._corked = True
        self._processing = True
        # Slices of a memoryview copy once; slicing the bytearray itself and then
        # calling bytes() copied every large frame twice. Released before returning
        # so the bytearray can grow again on the next chunk.
        mv = memoryview(view)
        try:
            pos = 0
            while n - pos >= 4:
                if self._blocked():
                    self._held = True
                    self.broker.requests.held.add(self)
                    break
                size = _SIZE.unpack_from(view, pos)[0]
                if size < 0 or size > self._max_frame:
                    self.close(
                        f"request size {size} outside 0..{self._max_frame} "
                        f"(socket.request.max.bytes)"
                    )
                    self._buf = bytearray()
                    return
                end = pos + 4 + size
                if end > n:
                    break
                frame = bytes(mv[pos + 4 : end])
                pos = end
                self._on_frame(frame)
                if self._closing:
                    self._buf = bytearray()
                    return
                if self._out_size >= OUT_CHUNK:
                    self._write_out()  # may pause writing: the next frame then waits
            if pos == n:
                self._buf = bytearray()
            elif pos or view is not buf:
                self._buf = bytearray(mv[pos:])
        finally:
            mv.release()
            self._corked = False
            self._processing = False
            self._write_out()
        if self._held:
            self._update_reading()

    def _write_out(self) -> None:
        out = self._out
        if out and self.transport is not None:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            self._out_size = 0
            self.transport.write(data)
            METRICS.bytes_out(len(data))

    def _on_frame(self, frame: bytes) -> None:
        if self._reserved is None and (
                self._deferred or (frame[:1] == b"\0" and frame[1:2] in _THROUGHPUT_KEYS)):
            self._defer(frame)
            return
        if self.gate is not None:
            outcome = self.gate.on_frame(frame)
            if outcome is not None:
                self._gate_outcome(outcome)
                return
        if len(frame) < 8:
            self.close(f"request of {len(frame)} bytes is too short for a request header")
            return
        api_key, api_version, correlation_id = _HEADER.unpack_from(frame)
        served = self.broker.served.get(api_key)
        if served is None:
            self.close(f"unsupported API key {api_key} (version {api_version})")
            return
        route, lo, hi = served
        if not lo <= api_version <= hi:
            if api_key == API_VERSIONS_KEY:
                self._answer_unsupported_api_versions(api_version, correlation_id)
                return
            self.close(
                f"unsupported version {api_version} of API {route.name} (key {api_key}; "
                f"we serve {lo}..{hi})"
            )
            return
        try:
            request = papi.decode_request(frame)
        except (papi.MalformedRequestError, papi.UnsupportedVersionError) as exc:
            self.close(
                f"cannot decode {route.name} v{api_version} request "
                f"(correlation id {correlation_id}): {exc}"
            )
            return
        except Exception as exc:  # a decoder bug: this connection only, with a traceback
            log.error("decoding %s v%d from %s failed unexpectedly", route.name, api_version,
                      self.peer, exc_info=exc)
            self.close(f"cannot decode {route.name} v{api_version} request: "
                       f"{type(exc).__name__}: {exc}")
            return
        broker = self.broker
        ctx = RequestContext(broker, broker.config, broker.partitions, self.peer, api_key,
                             api_version, correlation_id, request.client_id,
                             principal=self.principal, listener=self.listener)
        started = _perf()
        # Run the handler eagerly: most requests (ListOffsets, ApiVersions, Produce,
        # Metadata) never suspend, and answering them inline costs no task, no slot and
        # no extra pass over the response queue. Only a handler that really waits (a
        # Fetch long-poll) becomes a task, resumed exactly where it suspended, and
        # holds its place in the response order with a slot.
        coro: Any = route.handle(request, ctx)
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            data, reason = self._response(route, request, ctx, stop.value, None, len(frame), started)
            METRICS.request(route.name, _perf() - started)
            self._emit(data, reason)
            return
        except Exception as exc:
            data, reason = self._response(route, request, ctx, None, exc)
            METRICS.request(route.name, _perf() - started)
            self._emit(data, reason)
            return
        slot = self._reserved
        if slot is not None:  # a deferred frame: place and bytes are counted already
            self._reserved = None
        else:
            slot = _Slot(len(frame))
            self._pending.append(slot)
            broker.requests.take(slot.size)
        task = broker.loop.create_task(
            self._finish(slot, route, request, ctx, coro, waiting, started),
            name="fetch" if api_key == FETCH_KEY else route.name,
        )
        self._tasks.add(task)
        broker.inflight.add(task)
        task.add_done_callback(self._task_done)
        self._update_reading()

    def _defer(self, frame: bytes) -> None:
        """Leave a Produce or Fetch frame (or any frame behind one) to the pump, its
        answer's place and its bytes counted against queued.max.* from now."""
        slot = _Slot(len(frame))
        self._pending.append(slot)
        broker = self.broker
        broker.requests.take(slot.size)
        self._deferred.append((slot, frame))
        broker.pump.add(self._serve_deferred)

    def _serve_deferred(self) -> None:
        """The pump's job: serve this connection's oldest deferred frame."""
        if not self._deferred:  # dropped when the connection was lost
            return
        slot, frame = self._deferred.popleft()
        self._reserved = slot
        self._corked = True
        try:
            self._on_frame(frame)
        finally:
            self._corked = False
            if self._reserved is slot:  # closed without an answer: give its place back
                self._reserved = None
                self._fill(slot, None, None)
            self._write_out()

    def _fill(self, slot: _Slot, data: bytes | None, close_reason: str | None) -> None:
        """Answer a request in the place it took (a deferred frame or a suspended
        handler), and stop counting its bytes against queued.max.*."""
        slot.data = data
        slot.close_reason = close_reason
        slot.done = True
        self.broker.requests.give_back(slot.size)
        self._flush()

    def _gate_outcome(self, outcome: Outcome) -> None:
        """Carry out what the SASL gate decided for a frame."""
        gate = self.gate
        assert gate is not None
        if outcome.close is not None and outcome.delay > 0:
            # Failed authentication: answer and close only after the delay, reading nothing
            # more meanwhile (Kafka's connection.failed.authentication.delay.ms).
            self._write_out()
            self._closing = self._refused = True
            self._drop_deferred()
            if self.transport is not None:
                self.transport.pause_reading()
            self.broker.loop.call_later(outcome.delay, self._late_close, outcome.data,
                                        outcome.close)
            return
        if outcome.illegal_state is not None:
            outcome.data = error_answer(self.broker.routes, outcome.illegal_state,
                                       ErrorCode.ILLEGAL_SASL_STATE)
        if gate.complete and gate.logins != self._logins:
            self._logins = gate.logins
            self.principal = gate.principal or ANONYMOUS
            self._max_frame = self.broker.config.socket_request_max_bytes
            log.info("%s %s on listener %s as %s (SASL/%s)", self.peer,
                     "re-authenticated" if self._logins > 1 else "authenticated",
                     self.listener, self.principal, gate.mechanism)
            if gate.reauth_ms <= 0:
                # Without KIP-368 re-authentication the gate passes every later frame
                # on (a SaslHandshake too: its handler answers ILLEGAL_SASL_STATE), so
                # it leaves the request path.
                self.gate = None
        self._emit(outcome.data, outcome.close)

    def _late_close(self, data: bytes | None, reason: str) -> None:
        log.warning("closing connection from %s: %s", self.peer, reason)
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if data is not None:
            transport.write(data)
            METRICS.bytes_out(len(data))
        transport.close()

    def _emit(self, data: bytes | None, close_reason: str | None) -> None:
        """Queue a finished answer: straight out when nothing before it is pending, else
        in a done slot behind the answers still being produced."""
        slot = self._reserved
        if slot is not None:  # a deferred frame: its place is taken already
            self._reserved = None
            self._fill(slot, data, close_reason)
            return
        if self._pending:
            slot = _Slot()
            slot.done = True
            slot.data = data
            slot.close_reason = close_reason
            self._pending.append(slot)
            self._flush()
            return
        if self._closing or self.transport is None:
            return
        if data is not None:
            self._out.append(data)
            self._out_size += len(data)
        if close_reason is not None:
            self.close(close_reason)
        elif not self._corked:
            self._write_out()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self.broker.inflight.discard(task)

    def _answer_unsupported_api_versions(self, api_version: int, correlation_id: int) -> None:
        """Kafka answers any ApiVersions version; unknown ones get error 35 in a v0 body."""
        log.info("ApiVersions v%d from %s is newer than we serve; answering v0 with error 35",
                 api_version, self.peer)
        self._emit(papi.unsupported_api_versions_response(correlation_id), None)

    # ------------------------------------------------------------ serving

    def _response(self, route: Route, request: Any, ctx: RequestContext, body: Any,
                  exc: BaseException | None, size: int = 0,
                  started: float = 0.0) -> tuple[bytes | None, str | None]:
        """(response frame or None, reason to close after it or None): see
        :func:`broker.answers.respond`; a throttled answer mutes this connection first."""
        data, reason, throttle = respond(self.broker, self.peer, route, request, ctx, body,
                                         exc, size, started)
        if throttle:
            self._mute(throttle)
        return data, reason

    def _mute(self, ms: int) -> None:
        """Stop reading this connection for ``ms`` (through the back-pressure gate)."""
        until = time.monotonic() + ms / 1000.0
        if until <= self._throttled_until or self._closing:
            return
        self._throttled_until = until
        self._throttled = True
        self._update_reading()
        if self._unmute is not None:
            self._unmute.cancel()
        self._unmute = self.broker.loop.call_later(ms / 1000.0, self._end_mute)

    def _end_mute(self) -> None:
        self._unmute = None
        self._throttled = False
        self._update_reading()
        self.release()

    async def _finish(self, slot: _Slot, route: Route, request: Any, ctx: RequestContext,
                      coro: Any, waiting: Any, started: float) -> None:
        """The rest of a handler that suspended, inside a task; fills its slot."""
        data: bytes | None = None
        reason: str | None = None
        try:
            body = await _resume(coro, waiting)
            # Request time is thread time, as in Kafka: a long-poll's wait is not charged.
            data, reason = self._response(route, request, ctx, body, None, slot.size, _perf())
        except asyncio.CancelledError:
            reason = f"{route.name} request cancelled (connection closing)"
        except Exception as exc:
            data, reason = self._response(route, request, ctx, None, exc)
        finally:
            METRICS.request(route.name, _perf() - started)
            self._fill(slot, data, reason)

    def _flush(self) -> None:
        pending = self._pending
        transport = self.transport
        while pending and pending[0].done:
            slot = pending.popleft()
            if self._closing or transport is None:
                continue
            if slot.data is not None:
                self._out.append(slot.data)
                self._out_size += len(slot.data)
            if slot.close_reason is not None:
                self.close(slot.close_reason)
        if not self._corked:
            self._write_out()
        self.last_active = time.monotonic()
        self._update_reading()
        if self._held:
            self.release()

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self._closing:
            return
        want_pause = (
            self._writing_paused
            or self._throttled
            or self._held
            or len(self._pending) >= MAX_IN_FLIGHT
            or self.broker.stopping
        )
        if want_pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not want_pause and self._reading_paused and len(self._pending) <= MAX_IN_FLIGHT // 2:
            self._reading_paused = False
            transport.resume_reading()


@types.coroutine
def _resume(coro: Any, waiting: Any) -> Generator[Any, Any, Any]:
    """Continue a coroutine that already ran up to its first suspension, inside a Task.

    Yields the future it is waiting on back to the Task (as ``await`` would), then
    forwards every value and exception (cancellation included) to it until it returns.
    """
    while True:
        try:
            sent = yield waiting
        except BaseException as exc:
            try:
                waiting = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                waiting = coro.send(sent)
            except StopIteration as stop:
                return stop.value
