"""ListTransactions (66, KIP-664), v0-1: every transactional id the coordinator knows.

Invariants: StateFilters and ProducerIdFilters keep matching entries (empty = all); a
state name Kafka does not know is listed in UnknownStateFilters; DurationFilter (v1,
>= 0) keeps transactions started more than that many ms ago, as Kafka does. Ids the
principal may not DESCRIBE are left out (Kafka filters the coordinator's answer).
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import DESCRIBE, TRANSACTIONAL_ID
from broker.acl.check import allowed
from broker.txn.coordinator import STATE_NAMES, TxnState
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.ListTransactionsRequest], ctx: Any) -> m.ListTransactionsResponse:
    body = request.body
    service = ctx.broker.txns
    known = set(STATE_NAMES.values())
    states = set(body.state_filters)
    pids = set(body.producer_id_filters)
    duration = body.duration_filter if request.api_version >= 1 else -1
    now = service.clock()
    out = []
    for txn_id, meta in sorted(service.coordinator.txns.items()):
        name = STATE_NAMES[meta.state]
        if meta.state == TxnState.DEAD or (states and name not in states):
            continue
        if pids and meta.producer_id not in pids:
            continue
        if duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms <= duration):
            continue
        if not allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, txn_id):
            continue
        out.append(m.ListTransactionsResponseTransactionStates(
            transactional_id=txn_id, producer_id=meta.producer_id, transaction_state=name))
    return m.ListTransactionsResponse(throttle_time_ms=0, error_code=0,
                                      unknown_state_filters=sorted(s for s in states if s not in known),
                                      transaction_states=out)


def error_body(request: Request[m.ListTransactionsRequest], code: int) -> m.ListTransactionsResponse:
    return m.ListTransactionsResponse(throttle_time_ms=0, error_code=code, unknown_state_filters=[],
                                      transaction_states=[])
