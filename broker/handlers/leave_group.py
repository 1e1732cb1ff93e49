"""LeaveGroup (key 13), versions 0-5: members leave a classic group at once.

v0-2 name one member and answer its error at the top level; v3+ name several
(by member id, or by instance id with an empty member id for a static member) and
answer per member. An unknown group answers UNKNOWN_MEMBER_ID for each member.
Leaving starts a rebalance (or completes the join phase if everyone else has rejoined).
"""

from __future__ import annotations

from typing import Any

from broker.groups.coordinator import GroupCoordinator, InconsistentGroupType
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _leaving(request: Request[m.LeaveGroupRequest]) -> list[tuple[str, str | None]]:
    b = request.body
    if request.api_version < 3:
        return [(b.member_id, None)]
    return [(member.member_id, member.group_instance_id) for member in b.members]


def _answer(request: Request[m.LeaveGroupRequest], leaving: list[tuple[str, str | None]], codes: list[int],
            top: int = 0) -> m.LeaveGroupResponse:
    if request.api_version < 3:
        return m.LeaveGroupResponse(throttle_time_ms=0, error_code=codes[0] if codes else top, members=[])
    return m.LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=top,
        members=[m.LeaveGroupResponseMembers(member_id=member, group_instance_id=i, error_code=c)
                 for (member, i), c in zip(leaving, codes, strict=True)],
    )


async def handle(request: Request[m.LeaveGroupRequest], ctx: Any) -> m.LeaveGroupResponse:
    b = request.body
    coord: GroupCoordinator = ctx.broker.groups
    leaving = _leaving(request)
    if not b.group_id:
        return error_body(request, int(ErrorCode.INVALID_GROUP_ID))
    try:
        group = coord.classic(b.group_id, create=False)
    except InconsistentGroupType:
        return error_body(request, int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    if group is None:
        return _answer(request, leaving, [int(ErrorCode.UNKNOWN_MEMBER_ID)] * len(leaving))
    codes, fx = group.leave(coord.clock(), leaving)
    await coord.run_effects(group, fx)
    return _answer(request, leaving, codes)


def error_body(request: Request[m.LeaveGroupRequest], code: int) -> m.LeaveGroupResponse:
    """The whole request failed with ``code`` (top level, and for each member from v3)."""
    leaving = _leaving(request)
    return _answer(request, leaving, [code] * len(leaving), code)
