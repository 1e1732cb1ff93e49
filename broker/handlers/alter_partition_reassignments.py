"""AlterPartitionReassignments (45, KIP-455), v0-1, on one node.

Invariants: replicas = [this broker] -> NONE (the partition is already there; nothing
moves); null replicas (cancel) -> NO_REASSIGNMENT_IN_PROGRESS (85); an empty list,
another broker or a broker twice -> INVALID_REPLICA_ASSIGNMENT (39); unknown topic or
partition -> UNKNOWN_TOPIC_OR_PARTITION (3). The top-level error is NONE; v1 echoes
AllowReplicationFactorChange.
"""

from __future__ import annotations

from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _result(ctx: RequestContext, topic: str,
            p: m.AlterPartitionReassignmentsRequestTopicsPartitions) -> m.AlterPartitionReassignmentsResponseResponsesPartitions:
    node = ctx.config.node_id
    code, message = 0, None
    if not ctx.partitions.has_partition(topic, p.partition_index):
        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    elif p.replicas is None:
        code, message = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No ongoing reassignment for this partition."
    elif list(p.replicas) != [node]:
        code, message = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"The replica assignment {list(p.replicas)} is not possible: broker "
                         f"{node} is the only broker")
    return m.AlterPartitionReassignmentsResponseResponsesPartitions(
        partition_index=p.partition_index, error_code=int(code), error_message=message)


async def handle(request: Request[m.AlterPartitionReassignmentsRequest], ctx: RequestContext) -> m.AlterPartitionReassignmentsResponse:
    body = request.body
    return m.AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=bool(body.allow_replication_factor_change),
        error_code=0, error_message=None, responses=[
            m.AlterPartitionReassignmentsResponseResponses(
                name=t.name, partitions=[_result(ctx, t.name, p) for p in t.partitions])
            for t in body.topics])


def error_body(request: Request[m.AlterPartitionReassignmentsRequest], code: int) -> m.AlterPartitionReassignmentsResponse:
    return m.AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=True, error_code=code,
        error_message="unexpected server error", responses=[])
