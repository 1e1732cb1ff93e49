"""FindCoordinator (key 10), versions 0-4: this broker coordinates every group.

A single-node broker is the coordinator of every group (key type 0) and every
transactional id (key type 1), so the answer is always our own node, as Kafka's
would be with one broker (transactions: ``broker.txn``). Any other key type is
INVALID_REQUEST (42), as Kafka answers it (``CoordinatorType.forId``).
"""

from __future__ import annotations

from typing import Any

from broker.acl import authorizer as acl
from broker.acl.authorizer import DESCRIBE
from broker.acl.check import error
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

GROUP = 0
Coordinator = m.FindCoordinatorResponseCoordinators
TRANSACTION = 1
# Kafka's ErrorMessage when the coordinator is found: Errors.NONE.message() in v1-3,
# "" in each v4 coordinator.
NO_ERROR_MESSAGE = "NONE"


def advertised(ctx: Any) -> tuple[str, int]:
    """The host and port clients should use: the advertised address of the listener the
    request came in on, else where that listener listens."""
    host, port = ctx.broker.advertised_for(ctx.listener)
    return host, port


def _answer(ctx: Any, key: str, key_type: int, node_id: int, host: str, port: int,
            found_message: str = NO_ERROR_MESSAGE) -> Coordinator:
    if key_type not in (GROUP, TRANSACTION):
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=int(ErrorCode.INVALID_REQUEST),
                           error_message=f"unknown coordinator key type {key_type}")
    refused = error(ctx, DESCRIBE, acl.GROUP if key_type == GROUP else acl.TRANSACTIONAL_ID, key)
    if refused:
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=refused, error_message=None)
    return Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=0, error_message=found_message)


async def handle(request: Request[m.FindCoordinatorRequest], ctx: Any) -> m.FindCoordinatorResponse:
    body = request.body
    host, port = advertised(ctx)
    node_id = ctx.config.node_id
    key_type = int(body.key_type)
    if request.api_version >= 4:
        # Each v4 coordinator found says "" where v1-3 say "NONE".
        return m.FindCoordinatorResponse(
            throttle_time_ms=0,
            coordinators=[_answer(ctx, k, key_type, node_id, host, port, "") for k in body.coordinator_keys],
        )
    one = _answer(ctx, body.key, key_type, node_id, host, port)
    return m.FindCoordinatorResponse(throttle_time_ms=0, error_code=one.error_code, error_message=one.error_message,
                                     node_id=one.node_id, host=one.host, port=one.port)


def error_body(request: Request[m.FindCoordinatorRequest], code: int) -> m.FindCoordinatorResponse:
    """Every key (or the one key) answered with ``code``."""
    body = request.body
    if request.api_version >= 4:
        return m.FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=None)
            for k in body.coordinator_keys
        ])
    return m.FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=None,
                                     node_id=-1, host="", port=-1)
