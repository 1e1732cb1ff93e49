"""The broker process: an asyncio (uvloop) server speaking the Kafka wire protocol.

Invariants:
- Per connection, responses leave in request order. Handlers of pipelined
  requests run concurrently (a Fetch long-poll does not hold up the decoding of
  what follows), but each response waits in its slot until every earlier one
  has been written. acks=0 Produce fills its slot with nothing.
- Back-pressure: a connection's requests are decoded only while its answers are
  being read (the transport is below its write high-water mark), it has fewer than
  MAX_IN_FLIGHT requests waiting, and the broker serves fewer than
  ``queued.max.requests`` (and ``queued.max.request.bytes``) waiting requests in
  all; otherwise the rest of what it sent stays unparsed in its buffer and the
  socket is not read, so a client that never reads costs one answer's worth of
  memory, not one per request it pipelined.
- A bad frame (negative or larger than ``socket.request.max.bytes``, unknown API
  key or version, undecodable header/body) closes that one connection after the
  responses already due, with one log line saying why. An unsupported
  ApiVersions version is answered with error 35 in a v0 body instead, as Kafka
  does. A handler exception is logged with its traceback and answered with
  UNKNOWN_SERVER_ERROR where the API has a place for it, else the connection
  closes. Nothing a client sends can stop the server.
- A peer that closes is closed gracefully: every request already read from it
  (waiting for the pump, or held unparsed by back-pressure) is still served, its
  answer dropped; only Fetch is not. When the broker closes a connection for a
  reason, nothing read after the request that closed it is served.
- Listeners (``listeners``): one asyncio server per listener, each with its security
  protocol. On TLS listeners the connection runs the record layer itself
  (:class:`TlsConnection` over ``protocol.tls.TlsSession``): a request is decrypted,
  served and its answer encrypted in the one loop pass that read it, as on plaintext.
  The handshake must finish within SSL_HANDSHAKE_TIMEOUT_S; a failed one sends its alert,
  is logged and closes that connection. SASL listeners put every connection behind its
  ``broker.security.sasl.SaslGate`` until it authenticates, with frames capped at
  ``sasl.server.max.receive.size`` meanwhile. Back-pressure and the connection limits
  above apply to every listener alike. A request's context carries the listener name and
  the connection's principal (``User:ANONYMOUS``, the TLS certificate's DN, or the SASL
  user).
- Shutdown (SIGTERM/SIGINT) stops accepting, stops reading new requests, wakes
  long-polls, lets in-flight requests finish and their responses drain, then
  closes the logs (segments sealed, clean-shutdown marker written) and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import importlib.util
import logging
import signal
import socket
import ssl
import struct
import sys
import time
import types
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from broker import dispatch
from broker.acl.authorizer import Authorizer
from broker.acl.store import AclStore
from broker.config import LONG_MAX, BrokerConfig, ConfigError, add_arguments
from broker.dispatch import RequestContext, Route
from broker.group_configs import GroupConfigs
from broker.groups.coordinator import GroupCoordinator
from broker.groups.store import forget_store
from broker.logs import setup_logging
from broker.metrics import METRICS
from broker.partitions import PartitionManager
from broker.pump import WAKE_COST_S, Pump
from broker.quotas.model import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaConfigs,
    Quotas,
)
from broker.quotas.store import FILE_NAME as QUOTA_FILE
from broker.quotas.store import load as load_quotas
from broker.security.listeners import Listener, listeners, mechanisms
from broker.security.sasl import Outcome, SaslGate
from broker.security.tls import ANONYMOUS, principal
from broker.txn.service import TransactionService
from protocol import api as papi
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsResponseApiKeys, KafkaMessage
from protocol.tls import TlsSession

if TYPE_CHECKING:
    from broker.tier import RemoteLogManager

log = logging.getLogger("chronolog.broker")

_HEADER = struct.Struct(">hhi")
_perf = time.perf_counter
_SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18
FETCH_KEY = 1
PRODUCE_KEY = 0
# Stop reading a connection with this many requests in flight (Kafka mutes a
# channel with one); resume when half of them are answered.
MAX_IN_FLIGHT = 64
# The second byte of the API keys served through the pump (Produce 0, Fetch 1; the
# first byte of both is 0).
_THROUGHPUT_KEYS = (b"\0", b"\1")
# Answers served inline are gathered and written once per chunk read, or as soon as
# they hold this many bytes, so that the transport can push back (pause_writing).
OUT_CHUNK = 256 * 1024
# Background summary building: slices of 2 ms with 2 ms for requests in between while
# there is work, then a look every second for batches appended since.
SUMMARY_SLICE_MS = 2.0
SUMMARY_GAP_S = 0.002
SUMMARY_IDLE_S = 1.0
SSL_HANDSHAKE_TIMEOUT_S = 10.0


def _with(body: Any, **changes: Any) -> Any:
    """A copy of a response body (a generated message, or a dict from an unconverted
    handler) with ``changes``."""
    if isinstance(body, KafkaMessage):
        return msgspec.structs.replace(body, **changes)
    return {**body, **changes}


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
        broker.held.discard(self)
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
        broker = self.broker
        broker.queued -= 1
        broker.queued_bytes -= slot.size
        if broker.held:
            broker.release_held()

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
        broker = self.broker
        return (self._writing_paused or self._throttled or len(self._pending) >= MAX_IN_FLIGHT
                or broker.queued >= broker.queued_max
                or 0 <= broker.queued_bytes_max <= broker.queued_bytes)

    def release(self) -> None:
        """Serve frames that back-pressure held, once it has eased."""
        if not self._held or self._processing or self._closing or self._blocked():
            return
        self._held = False
        self.broker.held.discard(self)
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
                    self.broker.held.add(self)
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
            broker.queued += 1
            broker.queued_bytes += slot.size
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
        broker.queued += 1
        broker.queued_bytes += slot.size
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
        broker = self.broker
        broker.queued -= 1
        broker.queued_bytes -= slot.size
        if broker.held:
            broker.release_held()
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
            outcome.data = self._error_answer(outcome.illegal_state, ErrorCode.ILLEGAL_SASL_STATE)
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

    def _error_answer(self, frame: bytes, code: ErrorCode) -> bytes | None:
        """The frame's request answered with ``code`` in its API's error body, if it has one
        (and the request decodes); else None."""
        try:
            request = papi.decode_request(frame)
            route = self.broker.routes.get(request.api_key)
            if route is None or route.error_body is None:
                return None
            body = route.error_body(request, int(code))
            return papi.encode_response(request.api_key, request.api_version,
                                        request.correlation_id, body)
        except Exception:  # a malformed request: just the close
            return None

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
        """(response frame or None, reason to close after it or None) for a handler that
        returned ``body`` or raised ``exc``. A failure is logged with its traceback and
        answered with UNKNOWN_SERVER_ERROR where the API has a place for it; otherwise
        the connection closes at this answer's turn."""
        if exc is None:
            try:
                if self.broker.quotas.active:
                    return self._charged(request, ctx, body, size, started), ctx.close_after
                data = None if body is None else papi.encode_response(
                    request.api_key, request.api_version, request.correlation_id, body)
                return data, ctx.close_after
            except Exception as encode_exc:
                exc = encode_exc
        log.error(
            "%s v%d from %s (correlation id %d) failed",
            route.name, request.api_version, self.peer, request.correlation_id,
            exc_info=exc,
        )
        reason = f"{route.name} handler failed: {type(exc).__name__}: {exc}"
        if route.error_body is not None:
            try:
                err = route.error_body(request, int(ErrorCode.UNKNOWN_SERVER_ERROR))
                if err is not None:
                    return papi.encode_response(
                        request.api_key, request.api_version, request.correlation_id, err
                    ), None
            except Exception:
                log.exception("%s error response could not be built", route.name)
        return None, reason

    def _charged(self, request: Any, ctx: RequestContext, body: Any, size: int,
                 started: float) -> bytes | None:
        """The response of a request charged against the client quotas (KIP-219): the
        throttle time is the largest of the request-time and byte-rate ones, the answer
        carries it in ``throttle_time_ms`` and leaves at once, then the connection is
        muted that long. A throttled Fetch is answered empty and its bytes un-recorded."""
        quotas = self.broker.quotas
        now = time.monotonic() * 1000.0
        user = ctx.principal.partition(":")[2]
        client = ctx.client_id or ""
        key = request.api_key
        throttle = 0
        if key != API_VERSIONS_KEY and body is not None:  # acks=0 is exempt, as in Kafka
            throttle = quotas.record(REQUEST_PERCENTAGE, user, client,
                                     (_perf() - started) * 100.0, now)[0]
        if key == PRODUCE_KEY:
            throttle = max(throttle, quotas.record(PRODUCER_BYTE_RATE, user, client, size, now)[0])

        def encode(answer: Any, ms: int) -> bytes:
            if ms and "throttle_time_ms" in answer:
                answer = _with(answer, throttle_time_ms=ms)
            return papi.encode_response(key, request.api_version, request.correlation_id, answer)

        data = None if body is None else encode(body, throttle)
        if key == FETCH_KEY and data is not None:
            fetch_throttle, rate = quotas.record(CONSUMER_BYTE_RATE, user, client, len(data), now)
            if fetch_throttle and rate is not None:
                rate.unrecord(len(data))
                throttle = max(throttle, fetch_throttle)
                data = encode(_with(body, responses=[]), throttle)
        if throttle:
            self._mute(throttle)
        return data

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


class _TlsTransport:
    """What a :class:`TlsConnection` writes through: the socket's own transport, with
    answers encrypted on the way out and a close_notify before the close. Flow control
    (pause/resume_writing) stays the socket's, counted in ciphertext."""

    __slots__ = ("_raw", "_session", "write")

    def __init__(self, raw: asyncio.Transport, session: TlsSession) -> None:
        self._raw = raw
        self._session = session
        # Encrypt and write in one call; what the session says on its own (tickets,
        # alerts) goes straight to the socket too.
        self.write = session.attach(raw.write)

    def close(self) -> None:
        raw = self._raw
        if not raw.is_closing():
            alert = self._session.close_notify()
            if alert:
                raw.write(alert)
        raw.close()

    def abort(self) -> None:
        self._raw.abort()

    def is_closing(self) -> bool:
        return self._raw.is_closing()

    def pause_reading(self) -> None:
        self._raw.pause_reading()

    def resume_reading(self) -> None:
        self._raw.resume_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peercert":
            return self._session.peercert()
        return self._raw.get_extra_info(name, default)


class TlsConnection(Connection):
    """A connection on an SSL or SASL_SSL listener.

    uvloop's SSL transport (a Cython port of asyncio's sslproto) gives every read a
    256 KiB buffer (measured in a fresh process: an mmap, mremap and munmap per small
    request) and a layer of protocol calls each way; running ``ssl.SSLObject`` over memory
    BIOs here decrypts exactly what arrived and hands the plaintext to the same frame
    code as a plaintext connection. What remains is OpenSSL's own record work (measured
    inside the broker under load: 5-7 µs to decrypt and about 3 µs to encrypt a small
    request, 1.4 and 1.1 µs warm). The principal comes from the client certificate once
    the handshake completes; until then no frame is served.
    """

    def __init__(self, broker: Broker, listener: Listener, context: ssl.SSLContext) -> None:
        super().__init__(broker, listener)
        self._session = TlsSession(context)
        self._raw: asyncio.Transport | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        raw: asyncio.Transport = base  # type: ignore[assignment]
        self._raw = raw
        super().connection_made(_TlsTransport(raw, self._session))  # type: ignore[arg-type]
        if not self._closing and not raw.is_closing():
            self._handshake_timer = self.broker.loop.call_later(
                SSL_HANDSHAKE_TIMEOUT_S, self._handshake_expired)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        super().connection_lost(exc)

    def _handshake_expired(self) -> None:
        self._handshake_timer = None
        if not self._session.handshaken and self._raw is not None:
            log.warning("closing connection from %s: TLS handshake not done within %g s",
                        self.peer, SSL_HANDSHAKE_TIMEOUT_S)
            self._closing = self._refused = True
            self._raw.abort()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        session = self._session
        was_handshaken = session.handshaken
        try:
            plain = session.receive(data)  # handshake replies and tickets are sent already
        except ssl.SSLError as exc:  # its alert is sent already
            self._closing = self._refused = True
            log.warning("closing connection from %s: TLS %s failed: %s", self.peer,
                        "record layer" if was_handshaken else "handshake",
                        exc.reason or exc.__class__.__name__)
            self._raw.close()  # type: ignore[union-attr]
            return
        if not was_handshaken and session.handshaken:
            if self._handshake_timer is not None:
                self._handshake_timer.cancel()
                self._handshake_timer = None
            self.principal = principal(session.peercert())
        if plain:
            Connection.data_received(self, plain)  # (no super object per request)
        if session.closed and not self._closing and self.transport is not None:
            # The client's close_notify: as a TCP EOF on plaintext, a quiet close (with ours).
            self._write_out()
            self._closing = True
            self.transport.close()


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


class Broker:
    """The running broker: listener, connections, partitions and background tasks."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.partitions = PartitionManager(config)
        self.routes: dict[int, Route] = dispatch.table()
        if config.read_replica:
            from broker.read_replica import read_only_routes

            self.routes = read_only_routes(self.routes)
        self.connections: set[Connection] = set()
        self.per_ip: dict[str, int] = {}
        self.inflight: set[asyncio.Task[None]] = set()
        # Requests being served (suspended handlers) across all connections, against
        # queued.max.requests / queued.max.request.bytes, and the connections whose
        # further requests wait for them.
        self.queued = 0
        self.queued_bytes = 0
        self.queued_max = config.queued_max_requests
        self.queued_bytes_max = config.queued_max_request_bytes
        self.held: set[Connection] = set()
        self.stopping = False
        # Idle polling (see _idle_poll): when the latest request arrived, and the future
        # that wakes the poller once it sleeps.
        self.last_request = 0.0
        self.poll_wake: asyncio.Future[None] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self.listeners: list[Listener] = listeners(config)
        # Listener name -> the port actually bound (port 0 resolved).
        self.bound: dict[str, int] = {}
        self._lock: Any = None
        self.credentials: Any = None
        self._background: list[asyncio.Task[None]] = []
        self.cleaner: Any = None  # broker.cleaner_task.CleanerTask while the cleaner runs
        # The remote-log-manager (broker.tier.RemoteLogManager) when
        # remote.log.storage.system.enable is on; handlers test it for None.
        self.tier: RemoteLogManager | None = None
        self._udp: Any = None
        self._metrics_server: Any = None
        self._versions: dict[int, tuple[int, int]] = {}
        # API key -> (route, lowest, highest served version): one lookup per request.
        self.served: dict[int, tuple[Route, int, int]] = {
            key: (route, *self.version_range(key)) for key, route in self.routes.items()
        }
        self._advertised: list[ApiVersionsResponseApiKeys] | None = None
        self.loop: asyncio.AbstractEventLoop
        # Produce and Fetch frames served in slices between socket polls (broker/pump.py).
        self.pump: Pump
        # The group coordinator (``ctx.broker.groups``), opened with the partitions.
        self.groups: GroupCoordinator
        # The transaction coordinator (``ctx.broker.txns``), opened after the groups.
        self.txns: TransactionService
        # Authorization (broker.acl): None unless authorizer.class.name is set, so
        # handlers pay one attribute test when it is off.
        self.authorizer: Authorizer | None = None
        self.acl_store: AclStore | None = None
        # Client quotas (broker.quotas): loaded with the partitions; enforcement runs only
        # while some quota is configured (``quotas.active``).
        self.quotas = Quotas(QuotaConfigs(), config.quota_window_num,
                             config.quota_window_size_seconds)
        self.quota_path = Path(config.log_dirs) / "__chronolog" / QUOTA_FILE
        self.host = config.host
        self.port = config.port

    def sasl_gate(self, listener: str) -> SaslGate:
        """A new connection's SASL state on ``listener``."""
        from broker.security.plain import jaas_users

        cfg = self.config
        return SaslGate(
            mechanisms(cfg, listener),
            lambda: jaas_users(cfg, listener),
            self.credentials.get,
            cfg.connections_max_reauth_ms,
            cfg.connection_failed_authentication_delay_ms,
        )

    def advertised_for(self, listener: str) -> tuple[str, int]:
        """The (host, port) Metadata and FindCoordinator tell a client of ``listener``."""
        return self.config.advertised_host_port(self.bound.get(listener.upper(), self.port),
                                                listener)

    def release_held(self) -> None:
        """Back-pressure eased: let held connections serve what they buffered (next pass)."""
        if self.queued < self.queued_max and not (
                0 <= self.queued_bytes_max <= self.queued_bytes):
            for conn in list(self.held):
                self.loop.call_soon(conn.release)

    # ------------------------------------------------------------ versions

    def version_range(self, api_key: int) -> tuple[int, int]:
        """The versions we serve of ``api_key`` (what ApiVersions advertises)."""
        rng = self._versions.get(api_key)
        if rng is None:
            rng = served_versions(api_key)
            self._versions[api_key] = rng
        return rng

    def advertised_versions(self) -> list[ApiVersionsResponseApiKeys]:
        """ApiVersions' ``api_keys``: every API routed here, advertised min .. max.

        Produce is advertised from v0 though served from v3 (KAFKA-18659: librdkafka
        enables compression only when v0 is advertised).
        """
        if self._advertised is not None:
            return self._advertised
        out = []
        for key in sorted(self.routes):
            entry = papi.API_VERSIONS[key]  # type: ignore[index]
            out.append(ApiVersionsResponseApiKeys(api_key=key, min_version=int(entry.advertised_min),
                                                  max_version=int(entry.max_version)))
        self._advertised = out
        return out

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.pump = Pump(self.loop)
        pump = self.pump
        self.partitions.defer_wake = lambda job: pump.add(job, WAKE_COST_S)
        from broker.security.credentials import CredentialStore, DataDirLock

        self._lock = DataDirLock(self.config.data_dir)
        try:
            self.credentials = CredentialStore(self.config.data_dir)
            self.partitions.open(self.loop)
        except BaseException:
            self._lock.release()  # a failed start must not keep the data dir locked
            raise
        self.quota_path = self.partitions.state_dir / QUOTA_FILE
        self.quotas.configs = load_quotas(self.quota_path)
        self.quotas.changed()
        if self.config.authorizer_class_name:
            self.authorizer = Authorizer(
                [u.strip() for u in self.config.super_users.split(";") if u.strip()],
                self.config.allow_everyone_if_no_acl_found)
            self.acl_store = AclStore(self.partitions.state_dir, self.authorizer)
            log.info("authorizer on: %d ACLs, super users %s", len(self.authorizer),
                     sorted(self.authorizer.super_users) or "none")
        group_configs = GroupConfigs(self.partitions.state_dir, self.config)
        group_configs.load()
        self.groups = GroupCoordinator(self.config, self.partitions.group_offsets,
                                       topics=self.partitions, configs=group_configs)
        self.groups.start(self.loop)
        self.txns = TransactionService(self.partitions, self.groups,
                                       max_timeout_ms=self.config.transaction_max_timeout_ms)
        await self.txns.open()
        if self.config.remote_log_storage_system_enable:
            from broker.read_replica import ReadReplica
            from broker.tier import RemoteLogManager

            # Tiers attach before the listeners serve, so no read below a local log
            # start is ever answered without its remote half.
            self.tier = (ReadReplica if self.config.read_replica else RemoteLogManager)(
                self.partitions, self.config)
            try:
                await self.tier.open()
            except BaseException:
                await self.tier.close()
                self.partitions.close()
                self._lock.release()
                raise
        # The listeners are bound first (so port 0 resolves and a taken port fails early)
        # but accept only once UDP ingest and metrics run too: whoever waits for a
        # port to open finds the whole broker up.
        try:
            from broker.security.tls import server_context

            for lst in self.listeners:
                factory: Any
                if lst.tls:
                    ctx = server_context(self.config, lst.name, lst.protocol)
                    factory = lambda lst=lst, ctx=ctx: TlsConnection(self, lst, ctx)  # noqa: E731
                else:
                    factory = lambda lst=lst: Connection(self, lst)  # noqa: E731
                server = await self.loop.create_server(
                    factory, lst.host or None, lst.port,
                    reuse_address=True, backlog=1024, start_serving=False,
                )
                self._servers.append(server)
                self.bound[lst.name] = server.sockets[0].getsockname()[1]
            self._server = self._servers[0]
            sock = self._server.sockets[0]
            self.host, self.port = sock.getsockname()[:2]
            if self.config.udp_listeners:
                from broker.udp import start_udp_ingest

                self._udp = await start_udp_ingest(self)
            if self.config.metrics_listener:
                from broker.config import parse_host_port
                from broker.metrics import start_metrics_server

                mhost, mport = parse_host_port(self.config.metrics_listener, "metrics.listener")
                self._metrics_server = start_metrics_server(mhost, mport, self)
        except BaseException:
            await self._stop_extras()
            for server in self._servers:
                server.close()
            self.partitions.close()
            self._lock.release()
            raise
        self._start_background()
        # Everything allocated so far (modules, codecs, opened logs) lives as long as the
        # process: keep it out of the cyclic GC's generations so collections stay short.
        gc.freeze()
        for server in self._servers:
            await server.start_serving()
        log.info("chronolog broker ready on %s:%d (listeners: %s)", self.host, self.port,
                 ", ".join(f"{lst.name}://{lst.host}:{self.bound[lst.name]} ({lst.protocol})"
                           for lst in self.listeners))

    def _start_background(self) -> None:
        cfg = self.config
        self._background.append(self.loop.create_task(
            self._every(cfg.log_retention_check_interval_ms, self.partitions.enforce_retention,
                        "retention"), name="retention"))
        self._background.append(self.loop.create_task(
            self._every(cfg.log_flush_offset_checkpoint_interval_ms, self.partitions.checkpoint,
                        "checkpoint"), name="checkpoint"))
        if cfg.log_flush_scheduler_interval_ms < LONG_MAX:
            self._background.append(self.loop.create_task(
                self._every(cfg.log_flush_scheduler_interval_ms, self.partitions.flush_due,
                            "flush"), name="flush"))
        self._background.append(self.loop.create_task(self._summarize(), name="summaries"))
        self._background.append(self.loop.create_task(
            self._every_async(cfg.offsets_retention_check_interval_ms, self.groups.expire_offsets,
                              "offset expiry", first=True), name="offset-expiry"))
        if self.tier is not None:
            self.tier.start(self.loop)
        if cfg.log_cleaner_enable and cfg.log_cleaner_threads > 0:
            from broker.cleaner_task import CleanerTask

            self.cleaner = CleanerTask(self.partitions, cfg)
            self.cleaner.start(self.loop)
        self._background.append(self.loop.create_task(
            self._every_async(cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                              self.txns.abort_timed_out, "transaction timeout"),
            name="transaction-timeout"))
        if cfg.idle_poll_us > 0:
            self._background.append(self.loop.create_task(
                self._idle_poll(cfg.idle_poll_us / 1e6), name="idle-poll"))
        if cfg.connections_max_idle_ms >= 0:
            interval = max(10, min(cfg.connections_max_idle_ms // 4, 10_000))
            self._background.append(self.loop.create_task(
                self._every(interval, self._close_idle, "idle"), name="idle"))

    async def _every(self, interval_ms: int, job: Any, what: str) -> None:
        """Run ``job(now_ms)`` every interval; a failure is logged and the schedule goes on."""
        delay = min(interval_ms, 2**31) / 1000.0
        while True:
            await asyncio.sleep(delay)
            try:
                job(int(time.time() * 1000))
            except Exception:
                log.exception("background %s job failed", what)

    async def _every_async(self, interval_ms: int, job: Any, what: str, *, first: bool = False) -> None:
        """``_every`` for a coroutine job; ``first`` runs it once at start too."""
        delay = min(interval_ms, 2**31) / 1000.0
        if not first:
            await asyncio.sleep(delay)
        while True:
            try:
                await job(int(time.time() * 1000))
            except Exception:
                log.exception("background %s job failed", what)
            await asyncio.sleep(delay)

    async def _idle_poll(self, window: float) -> None:
        """Keep the event loop polling (zero-timeout waits) for ``window`` seconds after
        the latest request, then sleep until the next one arrives.

        On this kind of machine a CPU that goes idle between a response and the next
        request costs that request tens of µs to wake up (measured: a no-op round
        trip 101 -> 59 µs p50 with a 200 µs window). Seastar (Redpanda's reactor)
        does the same with its idle-poll time. The spin is bounded: a gap longer than
        the window costs at most the window in CPU.
        """
        loop = self.loop
        while not self.stopping:
            if _perf() - self.last_request < window:
                await asyncio.sleep(0)  # one loop pass with a zero-timeout poll
                continue
            wake = loop.create_future()
            self.poll_wake = wake
            await wake

    async def _summarize(self) -> None:
        """Build lookup summaries in short slices between requests, then keep up with appends."""
        while True:
            try:
                done = self.partitions.summarize_step(SUMMARY_SLICE_MS)
            except Exception:
                log.exception("background summary build failed")
                done = True
            await asyncio.sleep(SUMMARY_IDLE_S if done else SUMMARY_GAP_S)

    def _close_idle(self, now_ms: int) -> None:
        limit = self.config.connections_max_idle_ms / 1000.0
        now = time.monotonic()
        for conn in list(self.connections):
            if conn.idle and now - conn.last_active > limit:
                conn.close(f"idle for more than {self.config.connections_max_idle_ms} ms "
                           f"(connections.max.idle.ms)")

    async def _stop_udp(self) -> None:
        """Stop UDP ingest, appending what it holds, if running."""
        if self._udp is not None:
            try:
                await self._udp.close()
            except Exception:
                log.exception("UDP ingest did not close cleanly")
            self._udp = None

    async def _stop_extras(self) -> None:
        """Stop UDP ingest (appending what it holds) and the metrics endpoint, if running."""
        await self._stop_udp()
        if self._metrics_server is not None:
            try:
                await asyncio.to_thread(self._metrics_server.close)
            except Exception:
                log.exception("metrics endpoint did not close cleanly")
            self._metrics_server = None

    async def close(self, timeout: float = 30.0) -> None:
        """Graceful stop: no new connections or requests, finish in-flight ones, seal the logs."""
        if self.stopping:
            return
        self.stopping = True
        log.info("broker stopping: %d connections, %d requests in flight",
                 len(self.connections), len(self.inflight))
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn._update_reading()
        await self._stop_udp()
        self.pump.drain()  # requests already read are served, as Kafka's shutdown does
        self.partitions.wake_all()
        self.groups.close()  # parked JoinGroup/SyncGroup answer NOT_COORDINATOR now
        if self.inflight:
            done, pending = await asyncio.wait(set(self.inflight), timeout=timeout)
            for task in pending:
                task.cancel()
        if self.cleaner is not None:
            await self.cleaner.close()
        if self.tier is not None:
            await self.tier.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn._write_out()
                conn.transport.close()  # flushes what is buffered, then closes
        await asyncio.sleep(0)
        await self._stop_extras()
        self.pump.drain()
        self.txns.close()
        self.partitions.close()
        forget_store(self.partitions.state_dir)
        if self._lock is not None:
            self._lock.release()
        log.info("broker stopped cleanly")


def served_versions(api_key: int) -> tuple[int, int]:
    """Our served range of an API, from protocol.api's table; (0, -1) when not in it."""
    entry = papi.API_VERSIONS.get(api_key)  # type: ignore[call-overload]
    if entry is None:
        return 0, -1
    return int(entry.min_version), int(entry.max_version)


async def serve(config: BrokerConfig) -> int:
    """Run a broker until SIGTERM/SIGINT; returns the exit code."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    broker = Broker(config)
    await broker.start()
    try:
        await stop.wait()
    finally:
        await broker.close()
    return 0


def run(config: BrokerConfig) -> int:
    """Blocking entry point used by ``python -m broker`` and ``chronolog serve``."""
    import uvloop

    return uvloop.run(serve(config))


def run_from_args(args: argparse.Namespace) -> int:
    """Load the configuration (exit 2 with a message if it is bad) and run until signalled."""
    _setup_logging(args.log_format, args.log_level)
    try:
        config = BrokerConfig.load(
            args.properties, args.override, data_dir=args.data_dir, host=args.host, port=args.port,
            read_replica=getattr(args, "read_replica", None),
        )
    except ConfigError as exc:
        log.error("invalid configuration: %s", exc)
        print(f"chronolog: invalid configuration: {exc}", file=sys.stderr)
        return 2
    missing = _missing_udp_modules(config)
    if missing:
        # The base install (`make run`, the slim image) has no PyArrow: say so before binding.
        msg = (f"udp.listeners is set, and UDP ingest needs {' and '.join(missing)}, which this "
               "install lacks: pip install 'chronolog[arrow]' (in a checkout: make install; "
               "in a container: the full image, docker/Dockerfile --target full)")
        log.error("%s", msg)
        print(f"chronolog: {msg}", file=sys.stderr)
        return 2
    try:
        return run(config)
    except OSError as exc:
        log.error("broker could not start: %s", exc)
        return 1


def _missing_udp_modules(config: BrokerConfig) -> list[str]:
    """The column-wise batch builder's modules UDP ingest would import, if it is on and
    they are not installed (the ``arrow`` extra)."""
    if not config.udp_listeners:
        return []
    return [name for name in ("pyarrow", "numpy") if importlib.util.find_spec(name) is None]


def _setup_logging(fmt: str, level: str) -> None:
    setup_logging(fmt, level)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="Run the Chronolog broker.")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
