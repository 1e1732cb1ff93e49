"""DescribeGroups (key 15), versions 0-6: classic groups' state, protocol and members.

Members carry their metadata and assignment only while the group is Stable (as
Kafka's group summary). An unknown group, or a consumer-protocol (KIP-848) group,
is "not found": up to v5 that is NONE with state "Dead" and no members; v6 answers
GROUP_ID_NOT_FOUND (69) with a message (KIP-1043). Without an authorizer every
group operation is allowed (READ, DELETE, DESCRIBE) when asked for (v3+).
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import DESCRIBE, GROUP
from broker.acl.check import authorized_operations, error
from broker.groups.classic import ClassicGroup
from broker.groups.coordinator import GroupCoordinator
from protocol import messages as m
from protocol.api import Request
from protocol.describe_groups import AUTHORIZED_OPERATIONS_OMITTED
from protocol.errors import ErrorCode

Group = m.DescribeGroupsResponseGroups


def _not_found(group_id: str, version: int, why: str) -> Group:
    return Group(
        error_code=int(ErrorCode.GROUP_ID_NOT_FOUND) if version >= 6 else 0,
        error_message=why if version >= 6 else None,
        group_id=group_id, group_state="Dead", protocol_type="",
        protocol_data="", members=[],
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def handle(request: Request[m.DescribeGroupsRequest], ctx: Any) -> m.DescribeGroupsResponse:
    b = request.body
    v = request.api_version
    coord: GroupCoordinator = ctx.broker.groups
    out = []
    for gid in b.groups:
        refused = error(ctx, DESCRIBE, GROUP, gid)
        if refused:
            denied = _not_found(gid, v, "Not authorized.")
            denied.error_code = refused
            out.append(denied)
            continue
        g = coord.group(gid)
        if g is None:
            out.append(_not_found(gid, v, f"Group {gid} not found."))
        elif not isinstance(g, ClassicGroup):
            out.append(_not_found(gid, v, f"Group {gid} is not a classic group."))
        else:
            stable = g.state_name() == "Stable"
            out.append(Group(
                error_code=0, error_message=None, group_id=gid,
                group_state=g.state_name(), protocol_type=g.protocol_type(),
                protocol_data=(g.protocol_name or "") if stable else "",
                members=g.describe_members(),
                authorized_operations=(authorized_operations(ctx, GROUP, gid)
                                       if b.include_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
            ))
    return m.DescribeGroupsResponse(throttle_time_ms=0, groups=out)


def error_body(request: Request[m.DescribeGroupsRequest], code: int) -> m.DescribeGroupsResponse:
    return m.DescribeGroupsResponse(throttle_time_ms=0, groups=[
        Group(error_code=code, error_message=None, group_id=gid, group_state="",
              protocol_type="", protocol_data="", members=[],
              authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for gid in request.body.groups
    ])
