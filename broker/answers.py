"""A request's answer: its response frame from what the handler returned or raised, and
what the client quotas charge for it (KIP-219). Pure functions of the request; the
connection (broker/connection.py) puts the frame in its place and mutes itself.

Invariants:
- A handler exception, or a body that fails to encode, is logged with its traceback and
  answered with UNKNOWN_SERVER_ERROR in the API's ``error_body`` where it has one;
  otherwise there is no frame and the connection closes at this answer's turn, with
  the reason. A handler's ``ctx.close_after`` is the reason to close after its answer.
- With quotas active (``Quotas.active``), every answer but ApiVersions' is charged its
  request time (thread time: a long-poll's wait is not charged; acks=0 Produce, which has
  no answer, is exempt, as in Kafka), Produce also its request bytes and Fetch its
  response bytes. The throttle time is the largest of the three; the answer carries it in
  ``throttle_time_ms`` and leaves at once, and the connection is muted that long. A
  throttled Fetch is answered with no partitions and its bytes are un-recorded.
- ``error_answer`` (the SASL gate's ILLEGAL_SASL_STATE) is the frame's request answered
  with a code in its API's error body, or None when the API has none or the frame does
  not decode: never an exception.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import msgspec

from broker.dispatch import RequestContext, Route
from broker.quotas.model import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Quotas,
)
from protocol import api as papi
from protocol.errors import ErrorCode
from protocol.messages import KafkaMessage

if TYPE_CHECKING:
    from broker.server import Broker

log = logging.getLogger("chronolog.broker")

_perf = time.perf_counter
# The API keys answers treat specially, as plain ints (compared on every request).
API_VERSIONS_KEY = int(papi.ApiKey.API_VERSIONS)
FETCH_KEY = int(papi.ApiKey.FETCH)
PRODUCE_KEY = int(papi.ApiKey.PRODUCE)


def respond(broker: Broker, peer: str, route: Route, request: Any, ctx: RequestContext,
            body: Any, exc: BaseException | None, size: int = 0,
            started: float = 0.0) -> tuple[bytes | None, str | None, int]:
    """(response frame or None, reason to close after it or None, ms to mute the
    connection for) for a handler that returned ``body`` or raised ``exc``."""
    if exc is None:
        try:
            if broker.quotas.active:
                data, throttle = charged(broker.quotas, request, ctx, body, size, started)
                return data, ctx.close_after, throttle
            data = None if body is None else papi.encode_response(
                request.api_key, request.api_version, request.correlation_id, body)
            return data, ctx.close_after, 0
        except Exception as encode_exc:
            exc = encode_exc
    log.error(
        "%s v%d from %s (correlation id %d) failed",
        route.name, request.api_version, peer, request.correlation_id,
        exc_info=exc,
    )
    reason = f"{route.name} handler failed: {type(exc).__name__}: {exc}"
    if route.error_body is not None:
        try:
            err = route.error_body(request, int(ErrorCode.UNKNOWN_SERVER_ERROR))
            if err is not None:
                return papi.encode_response(
                    request.api_key, request.api_version, request.correlation_id, err
                ), None, 0
        except Exception:
            log.exception("%s error response could not be built", route.name)
    return None, reason, 0


def charged(quotas: Quotas, request: Any, ctx: RequestContext, body: Any, size: int,
            started: float) -> tuple[bytes | None, int]:
    """(response frame or None, throttle ms) of a request charged against the client
    quotas: the throttle time is the largest of the request-time and byte-rate ones."""
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
    return data, throttle


def error_answer(routes: dict[int, Route], frame: bytes, code: ErrorCode) -> bytes | None:
    """The frame's request answered with ``code`` in its API's error body, if it has one
    (and the request decodes); else None."""
    try:
        request = papi.decode_request(frame)
        route = routes.get(request.api_key)
        if route is None or route.error_body is None:
            return None
        body = route.error_body(request, int(code))
        return papi.encode_response(request.api_key, request.api_version,
                                    request.correlation_id, body)
    except Exception:  # a malformed request: just the close
        return None


def _with(body: Any, **changes: Any) -> Any:
    """A copy of a response body (a generated message, or a dict from an unconverted
    handler) with ``changes``."""
    if isinstance(body, KafkaMessage):
        return msgspec.structs.replace(body, **changes)
    return {**body, **changes}
