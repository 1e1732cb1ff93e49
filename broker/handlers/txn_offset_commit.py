"""TxnOffsetCommit (key 28), versions 0-3: group offsets that become visible only when
the transaction commits (and vanish if it aborts).

Invariants: the offsets are kept pending in the transaction coordinator's durable
state (the group must have been added with AddOffsetsToTxn, else INVALID_TXN_STATE);
an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (3) for that partition;
v3's generation / member checks are the group's own (as OffsetCommit's), applied when
the group has members.
"""

from __future__ import annotations

from typing import Any

from broker.txn.coordinator import PendingOffset
from protocol.errors import ErrorCode


async def handle(request: Any, ctx: Any) -> dict[str, Any]:
    body = request.body
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
        topics.append({"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
             if (t.name, p.partition_index) in unknown else code}
            for p in t.partitions]})
    return {"throttle_time_ms": 0, "topics": topics}


def error_body(request: Any, code: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                        for p in t.partitions]}
        for t in request.body.topics]}
