"""DescribeProducers (61, KIP-664), v0: the idempotent producers a partition tracks.

Invariants: one entry per producer id in ``broker.producers`` for that partition (the
state that deduplicates retried batches), with its epoch, last sequence and the time of
its last append (LastTimestamp, ms); CoordinatorEpoch that of the last COMMIT/ABORT
marker written for it there (-1 before any, as Kafka answers); CurrentTxnStartOffset
the first offset of the producer's open transaction there (-1 if none). Unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (3).
"""

from __future__ import annotations

from broker.acl.authorizer import READ, TOPIC
from broker.acl.check import error
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import KafkaError

Answer = m.DescribeProducersResponseTopicsPartitions


def _partition(ctx: RequestContext, topic: str, partition: int) -> Answer:
    try:
        ctx.partitions.get_log(topic, partition)
    except KafkaError as exc:
        return Answer(partition_index=partition, error_code=int(exc.code),
                      error_message=exc.message or None, active_producers=[])
    producers = ctx.partitions.producers
    active = producers.active(topic, partition) if producers is not None else {}
    return Answer(partition_index=partition, error_code=0, error_message=None, active_producers=[
        m.DescribeProducersResponseTopicsPartitionsActiveProducers(
            producer_id=pid, producer_epoch=e.epoch, last_sequence=e.last_seq,
            last_timestamp=e.last_seen_ms, coordinator_epoch=e.coordinator_epoch,
            current_txn_start_offset=producers.open_txn_start(topic, partition, pid)
            if producers is not None else -1)
        for pid, e in sorted(active.items())])


async def handle(request: Request[m.DescribeProducersRequest], ctx: RequestContext) -> m.DescribeProducersResponse:
    topics = []
    for t in request.body.topics:
        refused = error(ctx, READ, TOPIC, t.name)
        topics.append(m.DescribeProducersResponseTopics(name=t.name, partitions=[
            Answer(partition_index=p, error_code=refused, error_message="Authorization failed.",
                   active_producers=[])
            if refused else _partition(ctx, t.name, p) for p in t.partition_indexes]))
    return m.DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def error_body(request: Request[m.DescribeProducersRequest], code: int) -> m.DescribeProducersResponse:
    return m.DescribeProducersResponse(throttle_time_ms=0, topics=[
        m.DescribeProducersResponseTopics(name=t.name, partitions=[
            Answer(partition_index=p, error_code=code, error_message="unexpected server error",
                   active_producers=[]) for p in t.partition_indexes])
        for t in request.body.topics])
