"""DeleteGroups (key 42), versions 0-2: delete empty groups and all their committed offsets.

Per group: unknown (or already dead) is GROUP_ID_NOT_FOUND (69); a group with members
is NON_EMPTY_GROUP (68); else the group and its offsets are tombstoned durably
before the answer.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import DELETE, GROUP
from broker.acl.check import error
from broker.groups.coordinator import GroupCoordinator
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


async def handle(request: Request[m.DeleteGroupsRequest], ctx: Any) -> m.DeleteGroupsResponse:
    coord: GroupCoordinator = ctx.broker.groups
    results = []
    for gid in request.body.groups_names:
        g = coord.group(gid)
        refused = error(ctx, DELETE, GROUP, gid)
        if refused:
            code = ErrorCode(refused)
        elif g is None:
            code = ErrorCode.GROUP_ID_NOT_FOUND
        elif not g.is_empty():
            code = ErrorCode.NON_EMPTY_GROUP
        else:
            code = ErrorCode.NONE
            try:
                await coord.delete(gid)
            except OSError:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        results.append(m.DeleteGroupsResponseResults(group_id=gid, error_code=int(code)))
    return m.DeleteGroupsResponse(throttle_time_ms=0, results=results)


def error_body(request: Request[m.DeleteGroupsRequest], code: int) -> m.DeleteGroupsResponse:
    return m.DeleteGroupsResponse(throttle_time_ms=0, results=[
        m.DeleteGroupsResponseResults(group_id=g, error_code=code) for g in request.body.groups_names])
