"""OffsetDelete (key 47), version 0: delete some committed offsets of a group (KIP-496).

Top level: empty group id 24; unknown group GROUP_ID_NOT_FOUND (69); an active group
whose protocol type is not "consumer" NON_EMPTY_GROUP (68). Per partition: a topic
the active group subscribes to is GROUP_SUBSCRIBED_TO_TOPIC (86); else the offset is
deleted (NONE, also when nothing was stored), durably before the answer.
"""

from __future__ import annotations

from typing import Any

from broker.groups.coordinator import GroupCoordinator
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _topics(request: Request[m.OffsetDeleteRequest], code_for: Any) -> list[m.OffsetDeleteResponseTopics]:
    return [
        m.OffsetDeleteResponseTopics(name=t.name, partitions=[
            m.OffsetDeleteResponseTopicsPartitions(partition_index=p.partition_index,
                                                   error_code=int(code_for(t.name)))
            for p in t.partitions])
        for t in request.body.topics
    ]


async def handle(request: Request[m.OffsetDeleteRequest], ctx: Any) -> m.OffsetDeleteResponse:
    b = request.body
    coord: GroupCoordinator = ctx.broker.groups
    if not b.group_id:
        return error_body(request, int(ErrorCode.INVALID_GROUP_ID))
    g = coord.group(b.group_id)
    if g is None:
        return error_body(request, int(ErrorCode.GROUP_ID_NOT_FOUND))
    if not g.is_empty() and g.protocol_type() != "consumer":
        return error_body(request, int(ErrorCode.NON_EMPTY_GROUP))
    subscribed = getattr(g, "is_subscribed_to_topic", None)

    def code_for(topic: str) -> ErrorCode:
        if not g.is_empty() and subscribed is not None and subscribed(topic):
            return ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        return ErrorCode.NONE

    topics = _topics(request, code_for)
    doomed = [(t.name, p.partition_index) for t in topics for p in t.partitions if p.error_code == 0]
    try:
        await coord.store.delete_offsets(b.group_id, doomed)
    except OSError:
        return error_body(request, int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    return m.OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=topics)


def error_body(request: Request[m.OffsetDeleteRequest], code: int) -> m.OffsetDeleteResponse:
    return m.OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])
