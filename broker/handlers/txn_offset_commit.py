"""TxnOffsetCommit (key 28), versions 0-3: group offsets that become visible only when
the transaction commits (and vanish if it aborts).

Invariants: the offsets are kept pending in the transaction coordinator's durable
state (the group must have been added with AddOffsetsToTxn, else INVALID_TXN_STATE);
an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (3) for that partition;
v3's generation / member checks are the group's own (as OffsetCommit's), applied when
the group has members.
Authorization, Kafka's order: WRITE on the transactional id (53 on every partition),
then READ on the group (30 on every partition), then READ per topic (29 for that
topic's partitions, before existence); the other partitions are still committed.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import READ, TOPIC
from broker.acl.check import allowed, txn_error
from broker.txn.coordinator import PendingOffset
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


async def handle(request: Request[m.TxnOffsetCommitRequest], ctx: Any) -> m.TxnOffsetCommitResponse:
    body = request.body
    denied = txn_error(ctx, body.transactional_id, body.group_id)
    if denied:
        return error_body(request, denied)
    refused = {t.name for t in body.topics if not allowed(ctx, READ, TOPIC, t.name)}
    pm = ctx.partitions
    service = ctx.broker.txns
    group_err = 0
    if request.api_version >= 3 and body.generation_id >= 0:
        group = ctx.broker.groups.group(body.group_id)
        if group is not None:
            group_err = group.validate_offset_commit(
                body.member_id, body.generation_id, body.group_instance_id, 9)
    pending = []
    unknown = set()
    for t in body.topics:
        if t.name in refused:
            continue
        for p in t.partitions:
            if not pm.has_partition(t.name, p.partition_index):
                unknown.add((t.name, p.partition_index))
            else:
                pending.append(PendingOffset(
                    t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                    p.committed_metadata if p.committed_metadata is not None else ""))
    code = group_err
    if not code and pending:
        async with service.lock(body.transactional_id):
            code = service.coordinator.txn_offset_commit(
                body.transactional_id, body.group_id, body.producer_id, body.producer_epoch,
                pending, request.api_version, service.clock())
    topics = []
    for t in body.topics:
        topics.append(m.TxnOffsetCommitResponseTopics(name=t.name, partitions=[
            m.TxnOffsetCommitResponseTopicsPartitions(
                partition_index=p.partition_index,
                error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED) if t.name in refused
                else int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if (t.name, p.partition_index) in unknown else code)
            for p in t.partitions]))
    return m.TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)


def error_body(request: Request[m.TxnOffsetCommitRequest], code: int) -> m.TxnOffsetCommitResponse:
    return m.TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        m.TxnOffsetCommitResponseTopics(name=t.name, partitions=[
            m.TxnOffsetCommitResponseTopicsPartitions(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])
        for t in request.body.topics])
