"""DescribeTopicPartitions (75, KIP-966), v0: topics and partitions, paged by a cursor.

Invariants (Kafka's ``DescribeTopicPartitionsRequestHandler``):
- An empty topic list means every topic. Topics are answered in name order; an unknown
  one gets UNKNOWN_TOPIC_OR_PARTITION (3), an illegal name INVALID_TOPIC_EXCEPTION (17).
- At most clamp(ResponsePartitionLimit, 1, 2000) partitions per answer; when more remain,
  NextCursor names the topic and partition the next page starts at, else it is null.
- A cursor whose topic is not among those asked for, or whose partition is negative ->
  INVALID_REQUEST (42) for the whole request (every topic answered with it).
- Every partition is led by this broker, epoch 0, replicas = ISR = [this broker]; ELR
  fields are empty lists, as Kafka sends them without ELR (never null: the Java admin
  client streams them unchecked and fails with a NullPointerException).
- A topic answered without error carries its TopicAuthorizedOperations (this request
  has no flag for it; Kafka always fills it, and Admin.describeTopics reads it).
"""

from __future__ import annotations

from broker.acl.authorizer import DESCRIBE, TOPIC
from broker.acl.check import allowed, authorized_operations
from broker.dispatch import RequestContext
from broker.partitions import validate_topic_name
from protocol import describe_topic_partitions as dtp
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

ZERO_UUID = bytes(16)
MAX_LIMIT = 2000


Topic = m.DescribeTopicPartitionsResponseTopics
Cursor = m.DescribeTopicPartitionsResponseNextCursor


def _topic(name: str, code: int, partitions: list[m.DescribeTopicPartitionsResponseTopicsPartitions]) -> Topic:
    return Topic(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False, partitions=partitions,
                 topic_authorized_operations=dtp.AUTHORIZED_OPERATIONS_OMITTED)


def _partition(node: int, p: int) -> m.DescribeTopicPartitionsResponseTopicsPartitions:
    return m.DescribeTopicPartitionsResponseTopicsPartitions(
        error_code=0, partition_index=p, leader_id=node, leader_epoch=0, replica_nodes=[node],
        isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[])


async def handle(request: Request[m.DescribeTopicPartitionsRequest], ctx: RequestContext) -> m.DescribeTopicPartitionsResponse:
    body = request.body
    pm = ctx.partitions
    node = ctx.config.node_id
    names = sorted({t.name for t in body.topics}) if body.topics else pm.topic_names()
    if ctx.broker.authorizer is not None:  # unauthorized topics are left out, as Kafka does
        names = [n for n in names if allowed(ctx, DESCRIBE, TOPIC, n)]
    cursor = body.cursor
    if cursor is not None and (cursor.partition_index < 0 or cursor.topic_name not in names):
        return m.DescribeTopicPartitionsResponse(throttle_time_ms=0, next_cursor=None, topics=[
            _topic(n, int(ErrorCode.INVALID_REQUEST), []) for n in names])
    limit = min(max(body.response_partition_limit, 1), MAX_LIMIT)
    start_topic = cursor.topic_name if cursor is not None else None
    start_partition = cursor.partition_index if cursor is not None else 0
    out: list[Topic] = []
    next_cursor = None
    budget = limit
    for name in names:
        if start_topic is not None and name < start_topic:
            continue
        first = start_partition if name == start_topic else 0
        try:
            validate_topic_name(name)
            count = pm.partition_count(name)
            if count == 0:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        except KafkaError as exc:
            out.append(_topic(name, int(exc.code), []))
            continue
        if budget == 0:
            next_cursor = Cursor(topic_name=name, partition_index=first)
            break
        last = min(count, first + budget)
        answered = _topic(name, 0, [_partition(node, p) for p in range(first, last)])
        answered.topic_authorized_operations = authorized_operations(ctx, TOPIC, name)
        out.append(answered)
        budget -= last - first
        if last < count:
            next_cursor = Cursor(topic_name=name, partition_index=last)
            break
    return m.DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=out, next_cursor=next_cursor)


def error_body(request: Request[m.DescribeTopicPartitionsRequest], code: int) -> m.DescribeTopicPartitionsResponse:
    return m.DescribeTopicPartitionsResponse(throttle_time_ms=0, next_cursor=None,
                                             topics=[_topic(t.name, code, []) for t in request.body.topics])
