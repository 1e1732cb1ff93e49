"""SyncGroup (key 14), versions 0-5: the leader hands out assignments; followers wait for them.

A follower's SyncGroup is parked until the leader's arrives and the generation's
assignment is durable (never answered early with empty bytes). v5 requires
ProtocolType and ProtocolName (``SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent``):
missing or different ones are INCONSISTENT_GROUP_PROTOCOL (23).
"""

from __future__ import annotations

from typing import Any

import msgspec

from broker.groups.coordinator import GroupCoordinator, InconsistentGroupType
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _error(code: ErrorCode | int) -> m.SyncGroupResponse:
    return m.SyncGroupResponse(throttle_time_ms=0, error_code=int(code), protocol_type=None,
                               protocol_name=None, assignment=b"")


async def handle(request: Request[m.SyncGroupRequest], ctx: Any) -> m.SyncGroupResponse:
    b = request.body
    coord: GroupCoordinator = ctx.broker.groups
    if not b.group_id:
        return _error(ErrorCode.INVALID_GROUP_ID)
    if request.api_version >= 5 and (b.protocol_type is None or b.protocol_name is None):
        return _error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    try:
        group = coord.classic(b.group_id, create=False)
    except InconsistentGroupType:
        return _error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if group is None:
        return _error(ErrorCode.UNKNOWN_MEMBER_ID)
    assignments = {a.member_id: bytes(a.assignment) for a in b.assignments}
    ticket = coord.ticket()
    fx = group.sync(coord.clock(), b.member_id, b.group_instance_id, b.generation_id,
                    b.protocol_type, b.protocol_name, assignments, ticket)
    answer: m.SyncGroupResponse = await coord.call(group, fx, ticket)
    return msgspec.structs.replace(answer, throttle_time_ms=0)


def error_body(request: Request[m.SyncGroupRequest], code: int) -> m.SyncGroupResponse:
    return _error(code)
