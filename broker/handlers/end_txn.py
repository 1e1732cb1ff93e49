"""EndTxn (key 26), versions 0-3: commit or abort the ongoing transaction.

Invariants: the answer goes out after the markers are in every partition of the
transaction and the pending offsets are committed (or dropped), so what the client
hears as committed is readable. Errors are the coordinator's (49, 90/47, 48, 51);
a repeated end with the same result is NONE. Without WRITE on the transactional id
the answer is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) and nothing changes.
"""

from __future__ import annotations

from typing import Any

from broker.acl.check import txn_error
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.EndTxnRequest], ctx: Any) -> m.EndTxnResponse:
    body = request.body
    denied = txn_error(ctx, body.transactional_id)
    if denied:
        return error_body(request, denied)
    service = ctx.broker.txns
    async with service.lock(body.transactional_id):
        result = service.coordinator.end_txn(
            body.transactional_id, body.producer_id, body.producer_epoch, bool(body.committed),
            request.api_version, service.clock())
        if result.completion is not None:
            await service.finish(result.completion)
    return m.EndTxnResponse(throttle_time_ms=0, error_code=result.error)


def error_body(request: Request[m.EndTxnRequest], code: int) -> m.EndTxnResponse:
    return m.EndTxnResponse(throttle_time_ms=0, error_code=code)
