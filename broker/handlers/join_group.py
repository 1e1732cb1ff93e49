"""JoinGroup (key 11), versions 0-9: join a classic group; parked until the join phase ends.

Checks before the group sees the request (``GroupCoordinatorService.joinGroup``):
an empty group id is INVALID_GROUP_ID (24); a session timeout outside
[group.min.session.timeout.ms, group.max.session.timeout.ms] is INVALID_SESSION_TIMEOUT
(26); an unknown group with a non-empty member id is UNKNOWN_MEMBER_ID (25); a
consumer-protocol (KIP-848) group is INCONSISTENT_GROUP_PROTOCOL (23). v0 has no
rebalance timeout: the session timeout stands in (KAFKA-8653), as it does for a
negative one (which Redpanda took literally and rebalanced forever, brod#465).
"""

from __future__ import annotations

from typing import Any

import msgspec

from broker.groups.classic import JoinRequest
from broker.groups.coordinator import GroupCoordinator, InconsistentGroupType
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _error(member_id: str, code: ErrorCode) -> m.JoinGroupResponse:
    return m.JoinGroupResponse(error_code=int(code), generation_id=-1, protocol_type=None,
                               protocol_name=None, leader="", skip_assignment=False,
                               member_id=member_id, members=[])


def _shape(version: int, body: m.JoinGroupResponse) -> m.JoinGroupResponse:
    out = msgspec.structs.replace(body, throttle_time_ms=0)
    if version < 7 and out.protocol_name is None:
        out.protocol_name = ""  # not nullable before v7
    return out


async def handle(request: Request[m.JoinGroupRequest], ctx: Any) -> m.JoinGroupResponse:
    b = request.body
    v = request.api_version
    coord: GroupCoordinator = ctx.broker.groups
    cfg = ctx.config
    if not b.group_id:
        return _shape(v, _error(b.member_id, ErrorCode.INVALID_GROUP_ID))
    if not cfg.group_min_session_timeout_ms <= b.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        return _shape(v, _error(b.member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
    try:
        group = coord.classic(b.group_id, create=not b.member_id)
    except InconsistentGroupType:
        return _shape(v, _error(b.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    if group is None:
        return _shape(v, _error(b.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
    req = JoinRequest(
        member_id=b.member_id,
        instance_id=b.group_instance_id,
        client_id=request.client_id or "",
        client_host="/" + ctx.peer.rsplit(":", 1)[0],
        session_timeout_ms=b.session_timeout_ms,
        rebalance_timeout_ms=(b.rebalance_timeout_ms if v >= 1 and b.rebalance_timeout_ms >= 0
                              else b.session_timeout_ms),
        protocol_type=b.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in b.protocols],
        api_version=v,
        reason=b.reason,
    )
    ticket = coord.ticket()
    answer: m.JoinGroupResponse = await coord.call(group, group.join(coord.clock(), req, ticket), ticket)
    return _shape(v, answer)


def error_body(request: Request[m.JoinGroupRequest], code: int) -> m.JoinGroupResponse:
    return _shape(request.api_version, _error(request.body.member_id, ErrorCode(code)))
