"""ListGroups (key 16), versions 0-5: every group, filtered by state (v4+) and type (v5+).

Filters match case-insensitively; an empty filter matches everything. Types are
"classic" and "consumer" (KIP-848); a consumer group's protocol type is "consumer".
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import CLUSTER, DESCRIBE, GROUP
from broker.acl.check import allowed
from broker.groups.coordinator import GroupCoordinator
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.ListGroupsRequest], ctx: Any) -> m.ListGroupsResponse:
    b = request.body
    coord: GroupCoordinator = ctx.broker.groups
    groups = coord.list_groups(b.states_filter or (), b.types_filter or ())
    if ctx.broker.authorizer is not None and not allowed(ctx, DESCRIBE, CLUSTER):
        groups = [g for g in groups if allowed(ctx, DESCRIBE, GROUP, g.group_id)]
    return m.ListGroupsResponse(
        throttle_time_ms=0,
        error_code=0,
        groups=[
            m.ListGroupsResponseGroups(group_id=g.group_id, protocol_type=g.protocol_type(),
                                       group_state=g.state_name(), group_type=g.group_type)
            for g in sorted(groups, key=lambda g: g.group_id)
        ],
    )


def error_body(request: Request[m.ListGroupsRequest], code: int) -> m.ListGroupsResponse:
    return m.ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=[])
