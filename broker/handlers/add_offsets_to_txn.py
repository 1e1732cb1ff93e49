"""AddOffsetsToTxn (key 25), versions 0-3: a consumer group joins the ongoing transaction,
so its TxnOffsetCommit offsets are committed or dropped with it."""

from __future__ import annotations

from typing import Any


async def handle(request: Any, ctx: Any) -> dict[str, Any]:
    body = request.body
    service = ctx.broker.txns
    async with service.lock(body.transactional_id):
        code = service.coordinator.add_offsets(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group_id,
            request.api_version, service.clock())
    return {"throttle_time_ms": 0, "error_code": code}


def error_body(request: Any, code: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code}
