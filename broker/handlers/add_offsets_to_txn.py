"""AddOffsetsToTxn (key 25), versions 0-3: a consumer group joins the ongoing transaction,
so its TxnOffsetCommit offsets are committed or dropped with it.

Refused (Kafka's order) without WRITE on the transactional id (53), then without READ
on the group (30)."""

from __future__ import annotations

from typing import Any

from broker.acl.check import txn_error
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.AddOffsetsToTxnRequest], ctx: Any) -> m.AddOffsetsToTxnResponse:
    body = request.body
    denied = txn_error(ctx, body.transactional_id, body.group_id)
    if denied:
        return error_body(request, denied)
    service = ctx.broker.txns
    async with service.lock(body.transactional_id):
        code = service.coordinator.add_offsets(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group_id,
            request.api_version, service.clock())
    return m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)


def error_body(request: Request[m.AddOffsetsToTxnRequest], code: int) -> m.AddOffsetsToTxnResponse:
    return m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)
