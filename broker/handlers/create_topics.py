"""CreateTopics (19), v2-7: topics with partitions and Kafka topic configs.

Invariants:
- Each topic is answered on its own: TOPIC_ALREADY_EXISTS (36), INVALID_TOPIC_EXCEPTION
  (17), INVALID_PARTITIONS (37), INVALID_REPLICATION_FACTOR (38, anything above 1:
  there is one broker), INVALID_CONFIG (40, with the message naming the setting),
  INVALID_REPLICA_ASSIGNMENT (39), INVALID_REQUEST (42: a name twice in one
  request, assignments together with counts).
- NumPartitions / ReplicationFactor -1 mean the broker defaults in every version, as
  Apache Kafka's broker accepts them (only Kafka's Java client refuses to send them
  before v4; kafkajs sends v3 with -1 by default).
- From v5 a created (or validated) topic's answer lists its partition count,
  replication factor and every config with its effective value; overrides are
  reported as DYNAMIC_TOPIC_CONFIG (1), the rest as DEFAULT_CONFIG (5).
- ``validate_only`` runs every check and answers as if created, creating nothing.
- Creating a topic writes and fsyncs its files on the event loop, so the handler yields
  to the loop before each topic after the first: a request naming a hundred topics
  must not keep every other client (a group member's heartbeat) waiting for all of
  them.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from broker.acl.check import may_create_topic
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

ZERO_UUID = bytes(16)
DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5


Topic = m.CreateTopicsResponseTopics


def _failed(name: str, code: int, message: str | None) -> Topic:
    return Topic(name=name, topic_id=ZERO_UUID, error_code=code, error_message=message,
                 topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=None)


def _created(name: str, partitions: int, log_config: Any, overrides: dict[str, str]) -> Topic:
    configs = [
        m.CreateTopicsResponseTopicsConfigs(
            name=key,
            value=value,
            read_only=False,
            config_source=DYNAMIC_TOPIC_CONFIG if key in overrides else DEFAULT_CONFIG,
            is_sensitive=False,
        )
        for key, value in sorted(log_config.to_kafka().items())
    ]
    return Topic(name=name, topic_id=ZERO_UUID, error_code=0, error_message=None, topic_config_error_code=0,
                 num_partitions=partitions, replication_factor=1, configs=configs)


def _partitions_from_assignments(topic: Any, node_id: int) -> int:
    """Validate explicit replica assignments (only this broker) and return the partition count."""
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "Both numPartitions or replicationFactor and replicasAssignments were set. "
                         "Both cannot be used at the same time.")
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Partitions should be a consecutive 0-based integer sequence")
    for a in topic.assignments:
        if list(a.broker_ids) != [node_id]:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Partition {a.partition_index} may only be assigned to broker "
                             f"{node_id}, got {list(a.broker_ids)}")
    return len(indexes)


async def handle(request: Request[m.CreateTopicsRequest], ctx: RequestContext) -> m.CreateTopicsResponse:
    body = request.body
    pm = ctx.partitions
    counts = Counter(t.name for t in body.topics)
    out = []
    for i, topic in enumerate(body.topics):
        if i:
            await asyncio.sleep(0)  # let other requests in between two topics' file work
        name = topic.name
        if counts[name] > 1:
            out.append(_failed(name, int(ErrorCode.INVALID_REQUEST),
                               f"Create topics request contains multiple entries for topic {name}"))
            continue
        if not may_create_topic(ctx, name):
            out.append(_failed(name, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                               "Authorization failed."))
            continue
        try:
            num_partitions = topic.num_partitions
            rf = topic.replication_factor
            if topic.assignments:
                num_partitions = _partitions_from_assignments(topic, ctx.config.node_id)
                rf = 1
            configs = {c.name: c.value for c in topic.configs}
            partitions, log_config, overrides = pm.resolve_create(name, num_partitions, rf, configs)
            if not body.validate_only:
                pm.create_topic(name, partitions, dict(overrides), rf)
                if ctx.broker.tier is not None:
                    ctx.broker.tier.kick()  # a tiered topic gets its tiers at once
        except KafkaError as exc:
            out.append(_failed(name, int(exc.code), exc.message or None))
            continue
        out.append(_created(name, partitions, log_config, overrides))
        out[-1].topic_id = pm.topic_id(name)  # v7+: the new topic's id (zeros if validate_only)
    return m.CreateTopicsResponse(throttle_time_ms=0, topics=out)


def error_body(request: Request[m.CreateTopicsRequest], code: int) -> m.CreateTopicsResponse:
    return m.CreateTopicsResponse(
        throttle_time_ms=0, topics=[_failed(t.name, code, "unexpected server error") for t in request.body.topics])
