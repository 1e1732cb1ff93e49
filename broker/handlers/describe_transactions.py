"""DescribeTransactions (65, KIP-664), v0: the coordinator's view of transactional ids.

Invariants: per id its state name, timeout, start time (-1 before the first
AddPartitions/AddOffsets), producer id and epoch and the partitions of the transaction
(sorted); an unknown (or Dead) id is TRANSACTIONAL_ID_NOT_FOUND (105). An id the
principal may not DESCRIBE is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), checked
before existence, and topics it may not DESCRIBE are left out of the partitions (Kafka).
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import DESCRIBE, TOPIC, TRANSACTIONAL_ID
from broker.acl.check import allowed
from broker.txn.coordinator import STATE_NAMES, TxnState
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

State = m.DescribeTransactionsResponseTransactionStates


def _state(ctx: Any, txn_id: str) -> State:
    if not allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, txn_id):
        return _failed(txn_id, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    meta = ctx.broker.txns.coordinator.describe(txn_id)
    if meta is None or meta.state == TxnState.DEAD:
        return _failed(txn_id, int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
    topics: dict[str, list[int]] = {}
    for t, p in sorted(meta.partitions):
        if allowed(ctx, DESCRIBE, TOPIC, t):
            topics.setdefault(t, []).append(p)
    return State(error_code=0, transactional_id=txn_id,
                 transaction_state=STATE_NAMES[meta.state],
                 transaction_timeout_ms=meta.timeout_ms,
                 transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
                 producer_epoch=meta.producer_epoch,
                 topics=[m.DescribeTransactionsResponseTransactionStatesTopics(topic=t, partitions=ps)
                         for t, ps in topics.items()])


async def handle(request: Request[m.DescribeTransactionsRequest], ctx: Any) -> m.DescribeTransactionsResponse:
    return m.DescribeTransactionsResponse(
        throttle_time_ms=0, transaction_states=[_state(ctx, t) for t in request.body.transactional_ids])


def _failed(txn_id: str, code: int) -> State:
    return State(error_code=code, transactional_id=txn_id, transaction_state="",
                 transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                 producer_epoch=-1, topics=[])


def error_body(request: Request[m.DescribeTransactionsRequest], code: int) -> m.DescribeTransactionsResponse:
    return m.DescribeTransactionsResponse(
        throttle_time_ms=0, transaction_states=[_failed(t, code) for t in request.body.transactional_ids])
