"""CreatePartitions (37), v0-3: grow a topic's partition count, as Kafka (never shrink).

Invariants (Kafka's ``ReplicationControlManager.createPartitions``):
- A topic named twice: INVALID_REQUEST (42) for each copy; absent:
  UNKNOWN_TOPIC_OR_PARTITION (3); a count not above the current one: INVALID_PARTITIONS (37).
- Assignments, when given, must list one replica set per added partition, each exactly
  this broker: else INVALID_REPLICA_ASSIGNMENT (39).
- ``validate_only`` checks everything and creates nothing; the new count is persisted in
  the topic registry and survives a restart.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from broker.acl.authorizer import ALTER, TOPIC
from broker.acl.check import allowed
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("chronolog.broker")


def _check_assignments(topic: Any, current: int, node_id: int) -> None:
    if topic.assignments is None:
        return
    added = topic.count - current
    if len(topic.assignments) != added:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Attempted to add {added} additional partition(s), but only "
                         f"{len(topic.assignments)} assignment(s) were specified.")
    for a in topic.assignments:
        if list(a.broker_ids) != [node_id]:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker(s) other than "
                             f"this one ({node_id}): {list(a.broker_ids)}")


async def handle(request: Request[m.CreatePartitionsRequest], ctx: RequestContext) -> m.CreatePartitionsResponse:
    body = request.body
    pm = ctx.partitions
    counts = Counter(t.name for t in body.topics)
    out = []
    for topic in body.topics:
        code, message = 0, None
        try:
            if counts[topic.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            if not allowed(ctx, ALTER, TOPIC, topic.name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            current = pm.partition_count(topic.name)
            if current and topic.count > current:
                _check_assignments(topic, current, ctx.config.node_id)
            pm.create_partitions(topic.name, topic.count, validate_only=bool(body.validate_only))
        except KafkaError as exc:
            code, message = int(exc.code), exc.message or None
            log.info("refused CreatePartitions of %r from %s: %s", topic.name, ctx.peer, exc)
        out.append(m.CreatePartitionsResponseResults(name=topic.name, error_code=code, error_message=message))
    return m.CreatePartitionsResponse(throttle_time_ms=0, results=out)


def error_body(request: Request[m.CreatePartitionsRequest], code: int) -> m.CreatePartitionsResponse:
    return m.CreatePartitionsResponse(throttle_time_ms=0, results=[
        m.CreatePartitionsResponseResults(name=t.name, error_code=code, error_message="unexpected server error")
        for t in request.body.topics])
