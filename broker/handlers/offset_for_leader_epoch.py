"""OffsetForLeaderEpoch (23), v0-4: where a leader epoch ends, so clients can validate
their positions after a leader change (librdkafka, kafka-python, the Java consumer).

Invariants (Kafka's ``LeaderEpochFileCache.endOffsetFor`` on a single node):
- The partition's current leader epoch is 0, as Metadata reports. CurrentLeaderEpoch -1
  skips the check; below 0 otherwise -> FENCED_LEADER_EPOCH (74), above ->
  UNKNOWN_LEADER_EPOCH (75).
- The latest epoch is the one the log's newest batch records (0 for Chronolog's own
  appends, as Kafka seeds its cache on becoming leader, so an empty log answers (0, 0)).
  Asking for it -> (epoch, log end offset); for a later epoch or a negative one ->
  (-1, -1); for an earlier one -> (the largest recorded epoch <= it, the first offset of
  the next epoch in the log).
- Unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (3) with (-1, -1).
"""

from __future__ import annotations

from broker.acl.authorizer import DESCRIBE, TOPIC
from broker.acl.check import error
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError
from storage.log import Log

CURRENT_LEADER_EPOCH = 0


def end_offset_for(plog: Log, epoch: int) -> tuple[int, int]:
    """(epoch, end offset) of ``epoch`` in ``plog``, as Kafka's leader-epoch cache answers."""
    latest = max(0, plog.latest_epoch())
    if epoch < 0 or epoch > latest:
        return -1, -1
    if epoch == latest:
        return epoch, plog.log_end_offset
    floor = -1
    for seg in plog.segments:
        for info in seg.iter_batches(0):
            h = info.header
            if h.base_offset < plog.log_start_offset and h.base_offset + h.last_offset_delta < plog.log_start_offset:
                continue
            if h.partition_leader_epoch > epoch:
                return (floor if floor >= 0 else epoch), max(h.base_offset, plog.log_start_offset)
            floor = max(floor, h.partition_leader_epoch)
    return epoch, plog.log_end_offset


Answer = m.OffsetForLeaderEpochResponseTopicsPartitions


def _partition(ctx: RequestContext, topic: str, p: m.OffsetForLeaderEpochRequestTopicsPartitions) -> Answer:
    try:
        plog = ctx.partitions.get_log(topic, p.partition)
        current = p.current_leader_epoch
        if current != -1 and current < CURRENT_LEADER_EPOCH:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        if current > CURRENT_LEADER_EPOCH:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
    except KafkaError as exc:
        return Answer(error_code=int(exc.code), partition=p.partition, leader_epoch=-1, end_offset=-1)
    epoch, end = end_offset_for(plog, p.leader_epoch)
    return Answer(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end)


async def handle(request: Request[m.OffsetForLeaderEpochRequest], ctx: RequestContext) -> m.OffsetForLeaderEpochResponse:
    topics = []
    for t in request.body.topics:
        refused = error(ctx, DESCRIBE, TOPIC, t.topic)
        topics.append(m.OffsetForLeaderEpochResponseTopics(topic=t.topic, partitions=[
            Answer(error_code=refused, partition=p.partition, leader_epoch=-1, end_offset=-1)
            if refused else _partition(ctx, t.topic, p) for p in t.partitions]))
    return m.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def error_body(request: Request[m.OffsetForLeaderEpochRequest], code: int) -> m.OffsetForLeaderEpochResponse:
    return m.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
        m.OffsetForLeaderEpochResponseTopics(topic=t.topic, partitions=[
            Answer(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)
            for p in t.partitions])
        for t in request.body.topics])
