"""DeleteRecords (21, KIP-107), v0-2: move partitions' log start offsets forward.

Invariants (Kafka's ``Partition.deleteRecordsOnLeader``):
- Per partition: absent topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (3); offset -1
  means the high watermark; an offset below 0 (other than -1) or above the high
  watermark -> OFFSET_OUT_OF_RANGE (1); a topic whose cleanup.policy lacks ``delete``
  -> POLICY_VIOLATION (44); an offset at or below the current start changes nothing.
- LowWatermark is the log start afterwards (-1 on error). The new start is checkpointed
  at once and the segments wholly below it are deleted at once (Kafka leaves both to
  its periodic tasks); ListOffsets EARLIEST, time lookups, Fetch (OFFSET_OUT_OF_RANGE
  below it) and retention all use it.
- A tiered partition (KIP-405): the new start is written into its remote manifest before
  the answer (read replicas and Spark stop serving below it), and the remote segments
  wholly below it are deleted by the remote-log-manager's next pass, which this kicks. A
  store failure there is logged and retried; the answer stands (the start moved).
"""

from __future__ import annotations

import logging

from broker.acl.authorizer import DELETE, TOPIC
from broker.acl.check import error
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import KafkaError

log = logging.getLogger("chronolog.broker")
Answer = m.DeleteRecordsResponseTopicsPartitions


async def handle(request: Request[m.DeleteRecordsRequest], ctx: RequestContext) -> m.DeleteRecordsResponse:
    pm = ctx.partitions
    topics = []
    for topic in request.body.topics:
        parts = []
        refused = error(ctx, DELETE, TOPIC, topic.name)
        for p in topic.partitions:
            if refused:
                parts.append(Answer(partition_index=p.partition_index, low_watermark=-1, error_code=refused))
                continue
            try:
                low, code = pm.delete_records(topic.name, p.partition_index, p.offset), 0
                if ctx.broker.tier is not None:
                    await ctx.broker.tier.log_start_moved(topic.name, p.partition_index)
            except KafkaError as exc:
                low, code = -1, int(exc.code)
                log.info("refused DeleteRecords of %s-%d to %d from %s: %s", topic.name,
                         p.partition_index, p.offset, ctx.peer, exc)
            parts.append(Answer(partition_index=p.partition_index, low_watermark=low, error_code=code))
        topics.append(m.DeleteRecordsResponseTopics(name=topic.name, partitions=parts))
    return m.DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def error_body(request: Request[m.DeleteRecordsRequest], code: int) -> m.DeleteRecordsResponse:
    return m.DeleteRecordsResponse(throttle_time_ms=0, topics=[
        m.DeleteRecordsResponseTopics(name=t.name, partitions=[
            Answer(partition_index=p.partition_index, low_watermark=-1, error_code=code) for p in t.partitions])
        for t in request.body.topics])
