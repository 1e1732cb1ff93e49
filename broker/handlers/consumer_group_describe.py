"""ConsumerGroupDescribe (69), v0-1: KIP-848 groups, their epochs, members and assignments.

Invariants: one answer per requested id, in order. An empty id is INVALID_GROUP_ID
(24); an unknown group, or one that is not a KIP-848 consumer group, is
GROUP_ID_NOT_FOUND (69) — clients (librdkafka, Kafka's Admin) then fall back to
DescribeGroups. Assignments list each topic by id and name; v1 adds MemberType 1
(consumer) to each member.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import DESCRIBE, GROUP
from broker.acl.check import authorized_operations, error
from broker.groups.consumer import ConsumerGroup
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

NO_OPERATIONS = -2147483648


def _failed(group_id: str, code: int, message: str) -> m.ConsumerGroupDescribeResponseGroups:
    return m.ConsumerGroupDescribeResponseGroups(
        error_code=code, error_message=message, group_id=group_id, group_state="",
        group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
        authorized_operations=NO_OPERATIONS,
    )


async def handle(request: Request[m.ConsumerGroupDescribeRequest], ctx: Any) -> m.ConsumerGroupDescribeResponse:
    out = []
    for group_id in request.body.group_ids:
        if not group_id:
            out.append(_failed(group_id, int(ErrorCode.INVALID_GROUP_ID), "Group id can't be empty."))
            continue
        refused = error(ctx, DESCRIBE, GROUP, group_id)
        if refused:
            out.append(_failed(group_id, refused, "Not authorized to describe the group."))
            continue
        group = ctx.broker.groups.group(group_id)
        if not isinstance(group, ConsumerGroup) or group.state_name() == "Dead":
            message = (f"Group {group_id} not found." if group is None
                       else f"Group {group_id} is not a consumer group.")
            out.append(_failed(group_id, int(ErrorCode.GROUP_ID_NOT_FOUND), message))
            continue
        described = group.describe()  # sessions end on the coordinator's timer, not here
        if request.body.include_authorized_operations:
            described.authorized_operations = authorized_operations(ctx, GROUP, group_id)
        out.append(described)
    return m.ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=out)


def error_body(request: Request[m.ConsumerGroupDescribeRequest], code: int) -> m.ConsumerGroupDescribeResponse:
    return m.ConsumerGroupDescribeResponse(
        throttle_time_ms=0, groups=[_failed(g, code, "unexpected server error") for g in request.body.group_ids])
