"""Heartbeat (key 12), versions 0-4: keep a classic member's session alive.

Checks in Kafka's order (``ClassicGroup`` / ``GroupMetadataManager.classicGroupHeartbeat``):
empty group id 24; unknown group or member 25; static id bound to another member 82;
generation mismatch 22; then REBALANCE_IN_PROGRESS (27) while preparing a rebalance
(the session still counts as renewed), else NONE.
"""

from __future__ import annotations

from typing import Any

from broker.groups.coordinator import GroupCoordinator, InconsistentGroupType
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _answer(code: int) -> m.HeartbeatResponse:
    return m.HeartbeatResponse(throttle_time_ms=0, error_code=code)


async def handle(request: Request[m.HeartbeatRequest], ctx: Any) -> m.HeartbeatResponse:
    b = request.body
    coord: GroupCoordinator = ctx.broker.groups
    if not b.group_id:
        return _answer(int(ErrorCode.INVALID_GROUP_ID))
    try:
        group = coord.classic(b.group_id, create=False)
    except InconsistentGroupType:
        return _answer(int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    if group is None:
        return _answer(int(ErrorCode.UNKNOWN_MEMBER_ID))
    code = group.heartbeat(coord.clock(), b.member_id, b.group_instance_id, b.generation_id)
    coord.schedule(group)
    return _answer(code)


def error_body(request: Request[m.HeartbeatRequest], code: int) -> m.HeartbeatResponse:
    return _answer(code)
