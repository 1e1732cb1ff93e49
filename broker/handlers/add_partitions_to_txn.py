"""AddPartitionsToTxn (key 24), versions 0-3: partitions join the ongoing transaction.

Invariants: without WRITE on the transactional id every partition gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53). A topic the principal may not WRITE gets
TOPIC_AUTHORIZATION_FAILED (29, before existence is looked at), an unknown topic or
partition UNKNOWN_TOPIC_OR_PARTITION (3), and then every other partition of the request
OPERATION_NOT_ATTEMPTED (55), nothing added; otherwise the coordinator's one verdict
(49, 90/47, 51 or NONE) goes on every partition.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import TOPIC, WRITE
from broker.acl.check import allowed, txn_error
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _results(body: m.AddPartitionsToTxnRequest,
             code_for: Any) -> list[m.AddPartitionsToTxnResponseResultsByTopicV3AndBelow]:
    return [m.AddPartitionsToTxnResponseResultsByTopicV3AndBelow(name=t.name, results_by_partition=[
        m.AddPartitionsToTxnResponseResultsByTopicV3AndBelowResultsByPartition(
            partition_index=p, partition_error_code=code_for(t.name, p)) for p in t.partitions])
        for t in body.v3_and_below_topics]


async def handle(request: Request[m.AddPartitionsToTxnRequest], ctx: Any) -> m.AddPartitionsToTxnResponse:
    body = request.body
    txn_id = body.v3_and_below_transactional_id
    denied = txn_error(ctx, txn_id)
    if denied:
        return error_body(request, denied)
    pm = ctx.partitions
    refused = {t.name for t in body.v3_and_below_topics if not allowed(ctx, WRITE, TOPIC, t.name)}
    unknown = {(t.name, p) for t in body.v3_and_below_topics for p in t.partitions
               if not pm.has_partition(t.name, p)}
    if refused or unknown:
        def verdict(name: str, p: int) -> int:
            if name in refused:
                return int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if (name, p) in unknown
                       else ErrorCode.OPERATION_NOT_ATTEMPTED)
        return m.AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_results(body, verdict))
    service = ctx.broker.txns
    async with service.lock(txn_id):
        code = service.coordinator.add_partitions(
            txn_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
            [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions],
            request.api_version, service.clock())
    return m.AddPartitionsToTxnResponse(throttle_time_ms=0,
                                        results_by_topic_v3_and_below=_results(body, lambda _n, _p: code))


def error_body(request: Request[m.AddPartitionsToTxnRequest], code: int) -> m.AddPartitionsToTxnResponse:
    return m.AddPartitionsToTxnResponse(throttle_time_ms=0,
                                        results_by_topic_v3_and_below=_results(request.body, lambda _n, _p: code))
