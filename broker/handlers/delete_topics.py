"""DeleteTopics (20), v1-6: remove topics, their logs and their producer state.

Invariants: each topic is answered on its own — UNKNOWN_TOPIC_OR_PARTITION (3)
for a name we do not have, UNKNOWN_TOPIC_ID (100) for an id (v6, null name)
that no topic has, TOPIC_DELETION_DISABLED (73) when ``delete.topic.enable``
is false. A deleted topic's files are gone when the answer is sent.
Deleting a topic's files runs on the event loop, so the handler yields to the loop
before each topic after the first: a request naming many topics does not keep every
other client waiting for all of them.
"""

from __future__ import annotations

import asyncio

from broker.acl.authorizer import DELETE, TOPIC
from broker.acl.check import error
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

ZERO_UUID = bytes(16)


def _answer(name: str | None, topic_id: bytes, code: int, message: str | None) -> m.DeleteTopicsResponseResponses:
    return m.DeleteTopicsResponseResponses(name=name, topic_id=topic_id, error_code=code, error_message=message)


def _entries(request: Request[m.DeleteTopicsRequest]) -> list[tuple[str | None, bytes]]:
    body = request.body
    if request.api_version >= 6:
        return [(t.name, bytes(t.topic_id or ZERO_UUID)) for t in body.topics]
    return [(name, ZERO_UUID) for name in body.topic_names]


async def handle(request: Request[m.DeleteTopicsRequest], ctx: RequestContext) -> m.DeleteTopicsResponse:
    pm = ctx.partitions
    out = []
    for i, (name, topic_id) in enumerate(_entries(request)):
        if i:
            await asyncio.sleep(0)  # let other requests in between two topics' file work
        if name is None:
            name = pm.topic_by_id(topic_id)
            if name is None:
                out.append(_answer(None, topic_id, int(ErrorCode.UNKNOWN_TOPIC_ID),
                                   "This server does not host this topic ID."))
                continue
        elif topic_id == ZERO_UUID:
            topic_id = pm.topic_id(name)
        refused = error(ctx, DELETE, TOPIC, name)
        if refused:
            out.append(_answer(name, topic_id, refused, "Authorization failed."))
            continue
        if not ctx.config.delete_topic_enable:
            out.append(_answer(name, topic_id, int(ErrorCode.TOPIC_DELETION_DISABLED),
                               "delete.topic.enable is false"))
            continue
        try:
            pm.delete_topic(name)
        except KafkaError as exc:
            out.append(_answer(name, topic_id, int(exc.code), exc.message or None))
            continue
        out.append(_answer(name, topic_id, 0, None))
    return m.DeleteTopicsResponse(throttle_time_ms=0, responses=out)


def error_body(request: Request[m.DeleteTopicsRequest], code: int) -> m.DeleteTopicsResponse:
    return m.DeleteTopicsResponse(
        throttle_time_ms=0, responses=[_answer(n, i, code, "unexpected server error") for n, i in _entries(request)])
