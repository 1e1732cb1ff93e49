"""ConsumerGroupHeartbeat (68), v0-1: join, heartbeat in and leave a KIP-848 consumer group.

Invariants:
- The request is validated first (INVALID_REQUEST 42, ``validate_heartbeat``); then
  the group is looked up in the coordinator (``ctx.broker.groups``): a missing group
  is created only by a join (epoch 0), otherwise GROUP_ID_NOT_FOUND (69); a group id
  held by a classic group with members is 69 too ("not a consumer group").
- Owned partitions arrive as topic ids and are turned into names through the
  topic ids of ``partition.metadata``; ids of topics that no longer exist are
  dropped (the member cannot own them any more). The assignment goes back by id.
- A group whose state changed is persisted before the answer leaves, so a broker
  restart never forgets a member's epoch or assignment (librdkafka treats
  GROUP_ID_NOT_FOUND as fatal).
- Errors carry Kafka's message; member id and epoch are then null and 0, as Kafka answers.
- With an authorizer, subscribed topic names the principal may not DESCRIBE fail the
  whole heartbeat with TOPIC_AUTHORIZATION_FAILED (29), as Kafka's KafkaApis checks.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.acl.authorizer import DESCRIBE, TOPIC
from broker.acl.check import allowed
from broker.groups.consumer import HeartbeatRequest, consumer_group, validate_heartbeat
from broker.groups.coordinator import Effects
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("chronolog.groups")


def _owned(ctx: Any, topic_partitions: Any) -> dict[str, frozenset[int]] | None:
    if topic_partitions is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for tp in topic_partitions:
        name = ctx.partitions.topic_by_id(bytes(tp.topic_id))
        if name is not None:
            out[name] = out.get(name, frozenset()) | frozenset(tp.partitions)
    return out


def client_host(ctx: Any) -> str:
    """Kafka's ClientHost form: ``/`` and the peer's address."""
    return "/" + ctx.peer.rsplit(":", 1)[0]


async def handle(request: Request[m.ConsumerGroupHeartbeatRequest], ctx: Any) -> m.ConsumerGroupHeartbeatResponse:
    body = request.body
    names = body.subscribed_topic_names
    if names and ctx.broker.authorizer is not None and not all(
            allowed(ctx, DESCRIBE, TOPIC, n) for n in set(names)):
        # Kafka's KafkaApis: a subscription naming a topic the principal may not DESCRIBE
        # fails the whole heartbeat, so it never learns whether that topic exists.
        return error_body(request, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    req = HeartbeatRequest(
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
        subscribed_topic_regex=body.subscribed_topic_regex,
        server_assignor=body.server_assignor,
        owned=_owned(ctx, body.topic_partitions),
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        api_version=request.api_version,
    )
    coordinator = ctx.broker.groups
    try:
        validate_heartbeat(req, body.group_id)
        group = consumer_group(coordinator, body.group_id, create=req.member_epoch == 0)
        before = group.version
        try:
            resp = group.heartbeat(req)
        finally:
            if group.version != before:
                await coordinator.persist(group)
            # re-arms the group's timer; forgets a group whose first join failed
            await coordinator.run_effects(group, Effects())
    except OSError as exc:
        log.error("group %r state could not be stored: %s", body.group_id, exc)
        return error_body(request, int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "group state not stored")
    except KafkaError as exc:
        if exc.code not in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            log.info("ConsumerGroupHeartbeat from %s for group %r: %s", ctx.peer, body.group_id, exc)
        return error_body(request, int(exc.code), exc.message or None)
    assignment = None
    if resp.assignment is not None:
        assignment = m.ConsumerGroupHeartbeatResponseAssignment(topic_partitions=[
            m.ConsumerGroupHeartbeatResponseAssignmentTopicPartitions(
                topic_id=ctx.partitions.topic_id(t), partitions=sorted(ps))
            for t, ps in sorted(resp.assignment.items())
        ])
    return m.ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        member_id=resp.member_id,
        member_epoch=resp.member_epoch,
        heartbeat_interval_ms=resp.heartbeat_interval_ms,
        assignment=assignment,
    )


def error_body(request: Request[m.ConsumerGroupHeartbeatRequest], code: int, message: str | None = None) -> m.ConsumerGroupHeartbeatResponse:
    return m.ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        member_id=None,
        member_epoch=0,
        heartbeat_interval_ms=0,
        assignment=None,
    )

