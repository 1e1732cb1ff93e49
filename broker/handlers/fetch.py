"""Fetch (1), v4-12: record batches from each partition, with long polling.

Invariants:
- Records start at the batch containing FetchOffset and never go past the high
  watermark; under READ_COMMITTED (1) never past the last stable offset (whole
  batches), with AbortedTransactions = the partition's aborted transactions whose
  marker is at or after FetchOffset and whose first offset is below the LSO (Kafka's
  ``collectAbortedTxns``; empty, not null). READ_UNCOMMITTED gets a null
  AbortedTransactions. LastStableOffset is always the LSO, which is the high
  watermark unless a transaction is open. A FetchOffset outside [log start, log end]
  is OFFSET_OUT_OF_RANGE (1) for that partition.
- A partition with an error answers nothing but its code: HighWatermark,
  LastStableOffset and LogStartOffset -1, AbortedTransactions null, no records
  (Kafka's ``FetchResponse.partitionResponse``; checked against Kafka in
  tests/ecosystem/test_differential.py).
- Size limits follow KIP-74: the response limit is min(MaxBytes, broker
  ``fetch.max.bytes``); the first partition with data returns at least one whole
  batch even if it exceeds the limits (so MaxBytes 0 returns exactly one batch);
  later partitions are cut at min(PartitionMaxBytes, what is left of the limit), a
  trailing partial batch allowed (clients drop it), as Kafka does.
- Long poll: if fewer than MinBytes are available, no partition has an error and
  MaxWaitMs has not passed, wait until an append to one of the partitions (or
  shutdown), then read again. The answer never waits longer than MaxWaitMs.
- CurrentLeaderEpoch (v9+) other than -1 or 0 is UNKNOWN_LEADER_EPOCH (75) above,
  FENCED_LEADER_EPOCH (74) below, as Kafka checks it.
- A FetchOffset below the local log start of a tiered partition (KIP-405) is read from
  the remote tier in the tier's thread pool (``read_remote``), the answer otherwise the
  same: consumers see one log. Kafka's OFFSET_MOVED_TO_TIERED_STORAGE is for followers
  only; this broker has none.
- Fetch sessions (KIP-227) are not kept: SessionId 0 is answered (the client
  then sends full fetches); an incremental fetch naming a session is
  FETCH_SESSION_ID_NOT_FOUND (70).
"""

from __future__ import annotations

import asyncio

from broker.acl.authorizer import READ, TOPIC
from broker.acl.check import allowed
from broker.dispatch import RequestContext
from broker.errors import partition_error
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Buffer

READ_COMMITTED = 1
LEADER_EPOCH = 0  # this broker leads every partition in epoch 0 (Metadata says so)


Answer = m.FetchResponseResponsesPartitions
Aborted = m.FetchResponseResponsesPartitionsAbortedTransactions


def _partition(index: int, error: int, hw: int, log_start: int, records: Buffer,
               aborted: list[Aborted] | None, lso: int | None = None) -> Answer:
    if error:  # Kafka's FetchResponse.partitionResponse(tp, error): nothing but the code
        hw, log_start, lso, aborted, records = -1, -1, -1, None, b""
    return Answer(partition_index=index, error_code=error, high_watermark=hw,
                  last_stable_offset=hw if lso is None else lso, log_start_offset=log_start,
                  aborted_transactions=aborted, preferred_read_replica=-1, records=records)


async def read_remote(body: m.FetchRequest, ctx: RequestContext, denied: frozenset[str]
                      ) -> dict[tuple[str, int], Buffer | Exception]:
    """The records of partitions whose FetchOffset is below their local log start, read
    from the remote tier in its thread pool (never on the event loop): (topic,
    partition) -> bytes, or the exception the read raised (answered per partition)."""
    tier = ctx.broker.tier
    out: dict[tuple[str, int], Buffer | Exception] = {}
    if tier is None:
        return out
    pm = ctx.partitions
    committed = body.isolation_level == READ_COMMITTED
    limit = max(0, min(body.max_bytes, ctx.config.fetch_max_bytes))
    for topic in body.topics:
        if topic.topic in denied:
            continue
        for p in topic.partitions:
            try:
                plog = pm.get_log(topic.topic, p.partition)
            except KafkaError:
                continue
            offset = p.fetch_offset
            if not (plog.log_start_offset <= offset and tier.remote_below(plog, offset)):
                continue
            bound = pm.last_stable_offset(topic.topic, p.partition, plog) if committed \
                else plog.high_watermark
            try:
                out[(topic.topic, p.partition)] = await tier.read(
                    plog, offset, max(min(p.partition_max_bytes, limit), 1), bound)
            except Exception as exc:
                out[(topic.topic, p.partition)] = exc
    return out


def read_partitions(body: m.FetchRequest, ctx: RequestContext, denied: frozenset[str] = frozenset(),
                    remote: dict[tuple[str, int], Buffer | Exception] | None = None,
                    ) -> tuple[list[m.FetchResponseResponses], int, bool]:
    """One pass over the requested partitions: (responses, bytes of records, any error);
    topics in ``denied`` (no READ) answer TOPIC_AUTHORIZATION_FAILED; ``remote`` holds
    what ``read_remote`` read from the tier for offsets below the local log start."""
    pm = ctx.partitions
    tier = ctx.broker.tier
    committed = body.isolation_level == READ_COMMITTED
    aborted: list[Aborted] | None = [] if committed else None
    producers = pm.producers
    # MaxBytes 0 (or less) still returns the first batch, as every limit here does.
    remaining = max(0, min(body.max_bytes, ctx.config.fetch_max_bytes))
    total = 0
    errors = False
    first_data = True
    responses = []
    for topic in body.topics:
        name = topic.topic
        parts = []
        for p in topic.partitions:
            index = p.partition
            if denied and name in denied:
                parts.append(_partition(index, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), -1, -1,
                                        b"", aborted))
                errors = True
                continue
            try:
                plog = pm.get_log(name, index)
            except KafkaError as exc:
                parts.append(_partition(index, int(exc.code), -1, -1, b"", aborted))
                errors = True
                continue
            epoch = p.current_leader_epoch
            if epoch != -1 and epoch != LEADER_EPOCH:
                code = (ErrorCode.UNKNOWN_LEADER_EPOCH if epoch > LEADER_EPOCH
                        else ErrorCode.FENCED_LEADER_EPOCH)
                parts.append(_partition(index, int(code), -1, -1, b"", aborted))
                errors = True
                continue
            down = tier.unavailable(name, index) if tier is not None else None
            if down is not None:
                parts.append(_partition(index, int(ErrorCode.KAFKA_STORAGE_ERROR), -1, -1, b"",
                                        aborted))
                errors = True
                continue
            hw = plog.high_watermark
            start = plog.log_start_offset
            offset = p.fetch_offset
            lso = (producers.last_stable_offset(name, index, hw, start)
                   if producers is not None else hw)
            if offset < start or offset > plog.log_end_offset:
                parts.append(_partition(index, int(ErrorCode.OFFSET_OUT_OF_RANGE), hw, start, b"",
                                        aborted))
                errors = True
                continue
            records: Buffer = b""
            limit = min(p.partition_max_bytes, remaining)
            bound = lso if committed else hw
            if offset < bound and (limit > 0 or first_data):
                try:
                    got = remote.get((name, index)) if remote else None
                    if isinstance(got, Exception):
                        raise got
                    records = got if got is not None else plog.read(
                        offset, max(limit, 1), max_offset=bound)
                except Exception as exc:
                    err = partition_error(exc, f"fetch from {name}-{index}")
                    parts.append(_partition(index, int(err.code), hw, start, b"", aborted))
                    errors = True
                    continue
                if records:
                    if not first_data and len(records) > limit:
                        records = records[:limit]
                    first_data = False
                    remaining -= len(records)
                    total += len(records)
            txns = aborted
            if committed and records and producers is not None:
                txns = [Aborted(producer_id=a.producer_id, first_offset=a.first_offset)
                        for a in producers.aborted_transactions(name, index, offset, bound)]
            parts.append(_partition(index, 0, hw, start, records, txns, lso))
        responses.append(m.FetchResponseResponses(topic=name, partitions=parts))
    return responses, total, errors


async def handle(request: Request[m.FetchRequest], ctx: RequestContext) -> m.FetchResponse:
    body = request.body
    if request.api_version >= 7 and body.session_id != 0:
        return m.FetchResponse(throttle_time_ms=0, error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                               session_id=0, responses=[])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(body.max_wait_ms, 0) / 1000.0
    keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
    denied: frozenset[str] = frozenset()
    if ctx.broker.authorizer is not None:
        denied = frozenset(t.topic for t in body.topics if not allowed(ctx, READ, TOPIC, t.topic))
    while True:
        remote = await read_remote(body, ctx, denied) if ctx.broker.tier is not None else None
        responses, total, errors = read_partitions(body, ctx, denied, remote)
        remaining = deadline - loop.time()
        if total >= body.min_bytes or errors or remaining <= 0 or ctx.broker.stopping or not keys:
            break
        await ctx.partitions.wait_for_append(keys, remaining)
    return m.FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)


def error_body(request: Request[m.FetchRequest], code: int) -> m.FetchResponse:
    return m.FetchResponse(
        throttle_time_ms=0,
        error_code=code if request.api_version >= 7 else 0,
        session_id=0,
        responses=[
            m.FetchResponseResponses(
                topic=t.topic, partitions=[_partition(p.partition, code, -1, -1, b"", None) for p in t.partitions])
            for t in request.body.topics
        ],
    )
