"""Produce (0), served v3-11: one record batch per partition, appended in request order.

Invariants:
- Each partition is answered on its own: an error in one (unknown partition,
  corrupt batch, INVALID_TIMESTAMP, idempotence) never affects the others, and a
  partition that errs had nothing appended (BaseOffset -1).
- acks must be -1, 0 or 1, else every partition gets INVALID_REQUIRED_ACKS (21)
  and nothing is appended. acks=0 gets no response; if any partition failed the
  connection is closed after its turn, as Kafka does, so the producer notices.
- An unknown topic is created first when ``auto.create.topics.enable`` is on,
  else its partitions get UNKNOWN_TOPIC_OR_PARTITION (3).
- INVALID_TIMESTAMP carries RecordErrors (v8+) listing every offending record.
- ErrorMessage is sent only with RecordErrors (Kafka's custom-message rule); every
  refusal is logged with its reason.
- A failed append answers the partition's LogStartOffset, except for the errors Kafka
  answers before it looks at the log (unknown partition, not leader, too large,
  corrupt, storage): -1 there (ReplicaManager.appendToLocalLog).
- With an authorizer, transactional batches need WRITE on the request's transactional
  id (a null one is refused): TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) everywhere,
  nothing appended; then WRITE per topic (29).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from broker.acl.authorizer import TOPIC, TRANSACTIONAL_ID, WRITE
from broker.acl.check import allowed, may_create_topic
from broker.dispatch import RequestContext
from broker.errors import PartitionError, partition_error
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError
from storage.errors import CorruptRecordError
from storage.records import TRANSACTIONAL_MASK, iter_batches

log = logging.getLogger(__name__)

Answer = m.ProduceResponseResponsesPartitionResponses

# The append errors Kafka answers with LogStartOffset -1; every other one carries it.
_NO_LOG_START = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.KAFKA_STORAGE_ERROR})


def _ok(index: int, base_offset: int, log_append_time_ms: int, log_start_offset: int) -> Answer:
    return Answer(index=index, error_code=0, base_offset=base_offset,
                  log_append_time_ms=log_append_time_ms, log_start_offset=log_start_offset)


def _record_errors(err: PartitionError) -> list[m.ProduceResponseResponsesPartitionResponsesRecordErrors]:
    return [m.ProduceResponseResponsesPartitionResponsesRecordErrors(
        batch_index=i, batch_index_error_message=msg) for i, msg in err.record_errors]


def _failed(index: int, err: PartitionError, log_start_offset: int = -1) -> Answer:
    # Kafka sends a message only with record errors (RecordValidationException); the
    # others' reasons go to the log.
    return Answer(index=index, error_code=int(err.code), base_offset=-1, log_append_time_ms=-1,
                  log_start_offset=log_start_offset, record_errors=_record_errors(err),
                  error_message=err.message if err.record_errors else None)


async def handle(request: Request[m.ProduceRequest], ctx: RequestContext) -> m.ProduceResponse | None:
    body = request.body
    acks = body.acks
    if acks not in (-1, 0, 1):
        return _all_failed(body, PartitionError(ErrorCode.INVALID_REQUIRED_ACKS,
                                                f"acks must be -1, 0 or 1, got {acks}"))
    pm = ctx.partitions
    authz = ctx.broker.authorizer
    if authz is not None and _has_transactional_records(body) and (
            body.transactional_id is None
            or not allowed(ctx, WRITE, TRANSACTIONAL_ID, body.transactional_id)):
        return _all_failed(body, PartitionError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                "not authorized for the transactional id"))
    now_ms = int(time.time() * 1000)
    failures = 0
    responses = []
    syncs: list[asyncio.Future[None]] = []  # group commits this request's appends joined
    synced: list[Answer] = []  # the partition answers that wait for them
    for topic in body.topic_data:
        name = topic.name
        parts = []
        topic_error: PartitionError | None = None
        if authz is not None and not allowed(ctx, WRITE, TOPIC, name):
            topic_error = PartitionError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                         f"not authorized to write to {name!r}")
        elif pm.partition_count(name) == 0:
            try:
                if not may_create_topic(ctx, name) or pm.auto_create(name) is None:
                    topic_error = PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                 f"topic {name!r} does not exist")
            except Exception as exc:  # e.g. no space for the new partition directories:
                # only this topic fails; partitions already appended keep their answers.
                topic_error = partition_error(exc, f"auto-create of {name}")
        for pdata in topic.partition_data:
            index = pdata.index
            if topic_error is not None:
                parts.append(_failed(index, topic_error))
                failures += 1
                continue
            try:
                records = pdata.records
                if records is None:
                    raise KafkaError(ErrorCode.INVALID_RECORD, "a produce request needs records")
                waiting = len(syncs)
                result = pm.append(name, index, records, now_ms, syncs if acks else None)
            except Exception as exc:
                err = partition_error(exc, f"produce to {name}-{index}")
                log.info("produce to %s-%d refused (%s): %s", name, index, err.code.name,
                         "; ".join(msg for _, msg in err.record_errors[:3]) or err.message)
                parts.append(_failed(index, err, _log_start(pm, name, index, err.code)))
                failures += 1
                continue
            parts.append(_ok(index, result.base_offset, result.log_append_time_ms,
                             result.log_start_offset))
            if len(syncs) > waiting:
                synced.append(parts[-1])
        responses.append(m.ProduceResponseResponses(name=name, partition_responses=parts))
    if syncs:
        await _durable(syncs, synced)
    if acks == 0:
        if failures:
            ctx.close_after = f"acks=0 produce failed for {failures} partition(s)"
        return None
    return m.ProduceResponse(responses=responses, throttle_time_ms=0)


def _log_start(pm: Any, topic: str, partition: int, code: ErrorCode) -> int:
    if code in _NO_LOG_START:
        return -1
    try:
        return int(pm.get_log(topic, partition).log_start_offset)
    except KafkaError:
        return -1


def _has_transactional_records(body: m.ProduceRequest) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: does any batch carry the
    transactional bit? Only such requests need WRITE on the transactional id (and refuse
    a null one). A malformed blob counts as not transactional: its append fails anyway."""
    for topic in body.topic_data:
        for pdata in topic.partition_data:
            if not pdata.records:
                continue
            try:
                if any(h.attributes & TRANSACTIONAL_MASK for _, h in iter_batches(pdata.records)):
                    return True
            except CorruptRecordError:
                continue
    return False


async def _durable(syncs: list[asyncio.Future[None]], synced: list[Answer]) -> None:
    """Wait for the group commits (log.flush.interval.messages); a failed fsync turns every
    partition that waited into KAFKA_STORAGE_ERROR: its data may not be on disk."""
    results = await asyncio.gather(*set(syncs), return_exceptions=True)
    failed = next((r for r in results if isinstance(r, BaseException)), None)
    if failed is None:
        return
    err = partition_error(failed, "fsync of a produce")
    for part in synced:
        part.error_code = int(err.code)
        part.base_offset = part.log_append_time_ms = part.log_start_offset = -1
        part.record_errors = _record_errors(err)
        part.error_message = err.message if err.record_errors else None


def _all_failed(body: m.ProduceRequest, err: PartitionError) -> m.ProduceResponse:
    return m.ProduceResponse(responses=[
        m.ProduceResponseResponses(name=t.name, partition_responses=[_failed(p.index, err) for p in t.partition_data])
        for t in body.topic_data
    ], throttle_time_ms=0)


def error_body(request: Request[m.ProduceRequest], code: int) -> m.ProduceResponse | None:
    """UNKNOWN_SERVER_ERROR in every partition; acks=0 gets nothing (the connection closes)."""
    if request.body.acks == 0:
        return None
    return _all_failed(request.body, PartitionError(ErrorCode(code), "unexpected server error"))
