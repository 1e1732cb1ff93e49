"""InitProducerId (key 22), versions 0-4: producer ids for idempotent and transactional producers.

A null TransactionalId asks for an idempotent producer: Kafka then ignores any
ProducerId/ProducerEpoch the request carries (KIP-360 epoch bumps are for
transactional ids) and hands out a fresh id with epoch 0; so do we, from
``broker.producers.ProducerStateManager`` which never reuses an id.

A TransactionalId goes to the transaction coordinator (``broker.txn``): epoch bumps,
fencing of an ongoing transaction (CONCURRENT_TRANSACTIONS, retried by the client),
KIP-360 recovery, INVALID_TRANSACTION_TIMEOUT (50) outside (0, transaction.max.timeout.ms].
An empty TransactionalId is INVALID_REQUEST (42), as in Kafka, and so is a request
with only one of ProducerId/ProducerEpoch set.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.acl.authorizer import TRANSACTIONAL_ID, WRITE
from broker.acl.check import error, may_write_idempotently
from broker.producers import ProducerStateManager
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

log = logging.getLogger("chronolog.broker")


def producer_state(ctx: Any) -> ProducerStateManager:
    """The partition manager's producer state (the produce path checks sequences there)."""
    return ctx.partitions.producers  # type: ignore[no-any-return]


async def handle(request: Request[m.InitProducerIdRequest], ctx: Any) -> m.InitProducerIdResponse:
    body = request.body
    txn_id = body.transactional_id
    if txn_id is None:
        if not may_write_idempotently(ctx):
            return error_body(request, int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        pid = producer_state(ctx).allocate_producer_id()
        return m.InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)
    expected_pid = body.producer_id if request.api_version >= 3 else -1
    expected_epoch = body.producer_epoch if request.api_version >= 3 else -1
    if txn_id == "" or (expected_pid == -1) != (expected_epoch == -1):
        return error_body(request, int(ErrorCode.INVALID_REQUEST))
    denied = error(ctx, WRITE, TRANSACTIONAL_ID, txn_id)
    if denied:
        return error_body(request, denied)
    service = ctx.broker.txns
    async with service.lock(txn_id):
        result = service.coordinator.init_producer_id(
            txn_id, body.transaction_timeout_ms, expected_pid, expected_epoch,
            request.api_version, service.clock())
        if result.completion is not None:
            log.info("InitProducerId for %r fenced producer %d: aborting its open transaction",
                     txn_id, result.completion.producer_id)
            await service.finish(result.completion)
    if result.error:
        return error_body(request, result.error)
    return m.InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=result.producer_id,
                                    producer_epoch=result.producer_epoch)


def error_body(request: Request[m.InitProducerIdRequest], code: int) -> m.InitProducerIdResponse:
    return m.InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
