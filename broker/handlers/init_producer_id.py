"""InitProducerId (key 22), versions 0-4: producer ids for idempotent producers.

A null TransactionalId asks for an idempotent producer: Kafka then ignores any
ProducerId/ProducerEpoch the request carries (KIP-360 epoch bumps are for
transactional ids) and hands out a fresh id with epoch 0; so do we, from
``broker.producers.ProducerStateManager`` which never reuses an id.

Chronolog has no transaction coordinator. A TransactionalId therefore gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): it is what Kafka answers a principal
that may not use any transactional id, it is the only InitProducerId error every
client treats as fatal at once (instead of retrying until a timeout), and its
meaning — "you may not use transactions here" — is the truth. An empty
TransactionalId is INVALID_REQUEST (42), as in Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.acl.check import may_write_idempotently
from broker.producers import ProducerStateManager
from protocol.errors import ErrorCode

log = logging.getLogger("chronolog.broker")


def producer_state(ctx: Any) -> ProducerStateManager:
    """The partition manager's producer state (the produce path checks sequences there)."""
    return ctx.partitions.producers  # type: ignore[no-any-return]


async def handle(request: Any, ctx: Any) -> dict[str, Any]:
    txn_id = request.body.transactional_id
    if txn_id is not None:
        code = ErrorCode.INVALID_REQUEST if txn_id == "" else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        log.info("InitProducerId from %s refused with %s: transactional id %r "
                 "(Chronolog supports idempotent producers, not transactions)",
                 ctx.peer, code.name, txn_id)
        return error_body(request, int(code))
    if not may_write_idempotently(ctx):
        return error_body(request, int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    pid = producer_state(ctx).allocate_producer_id()
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}


def error_body(request: Any, code: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
