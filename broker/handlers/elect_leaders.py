"""ElectLeaders (43), v0-2, on one node: there is never another leader to elect.

Invariants: a named existing partition -> ELECTION_NOT_NEEDED (84), as Kafka answers
when the preferred (or only) replica already leads; unknown -> UNKNOWN_TOPIC_OR_PARTITION
(3); null TopicPartitions (every partition) -> no entries, error NONE (Kafka omits the
partitions that need no election). The top-level ErrorCode (v1+) is NONE.
"""

from __future__ import annotations

from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

Result = m.ElectLeadersResponseReplicaElectionResultsPartitionResult


def _result(ctx: RequestContext, topic: str, p: int) -> Result:
    if ctx.partitions.has_partition(topic, p):
        return Result(partition_id=p, error_code=int(ErrorCode.ELECTION_NOT_NEEDED),
                      error_message="Leader election not needed for topic partition.")
    return Result(partition_id=p, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                  error_message="The partition does not exist.")


async def handle(request: Request[m.ElectLeadersRequest], ctx: RequestContext) -> m.ElectLeadersResponse:
    wanted = request.body.topic_partitions or []
    return m.ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
        m.ElectLeadersResponseReplicaElectionResults(
            topic=t.topic, partition_result=[_result(ctx, t.topic, p) for p in t.partitions])
        for t in wanted])


def error_body(request: Request[m.ElectLeadersRequest], code: int) -> m.ElectLeadersResponse:
    return m.ElectLeadersResponse(throttle_time_ms=0, error_code=code, replica_election_results=[])
