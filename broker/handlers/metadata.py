"""Metadata (3): this broker, the cluster id, and the topics asked for.

Invariants:
- One broker (``node.id``, the advertised host and port) leads every partition,
  is its only replica and its whole ISR; it is also the controller, because
  admin clients send CreateTopics to ControllerId.
- From v10 every topic carries its persistent id (``partition.metadata``); v12
  clients may ask by id alone (null name), as librdkafka does to resolve KIP-848
  assignments: a known id is answered under its name, an unknown one with
  UNKNOWN_TOPIC_ID (100), a null name and the id echoed. Before v10 a null name
  cannot be sent; v10-11 can send one but cannot answer one (the response name is
  nullable from v12): such a topic gets INVALID_REQUEST (42) under the name "", as
  Kafka refuses it ("Topic name can not be null for version 10/11").
- Authorized operations (v8+) only when asked (IncludeTopicAuthorizedOperations, and
  IncludeClusterAuthorizedOperations in v8-10): the bit field of what this principal may
  do, as DescribeCluster answers it; else -2147483648 (Kafka's "omitted").
- v0: an empty topic list means every topic. v1+: null means every topic, an
  empty list none. An unknown topic is created when ``auto.create.topics.enable``
  and (from v4) the request's AllowAutoTopicCreation allow it, and is answered
  at once with its partitions; otherwise UNKNOWN_TOPIC_OR_PARTITION (3). An
  illegal name is INVALID_TOPIC_EXCEPTION (17); a lookup by id alone, UNKNOWN_TOPIC_ID.
- Auto-creating writes and fsyncs files on the event loop: between two auto-created
  topics the handler yields to the loop, so a request naming many new topics does not
  keep every other client waiting (as CreateTopics does).
"""

from __future__ import annotations

import asyncio

from broker.acl.authorizer import CLUSTER, DESCRIBE, TOPIC
from broker.acl.check import allowed, authorized_operations, may_create_topic
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

ZERO_UUID = bytes(16)
NO_OPERATIONS = -2147483648


def _topic_entry(name: str | None, error: int, partitions: list[m.MetadataResponseTopicsPartitions],
                 topic_id: bytes = ZERO_UUID) -> m.MetadataResponseTopics:
    return m.MetadataResponseTopics(error_code=error, name=name, topic_id=topic_id, is_internal=False,
                                    partitions=partitions, topic_authorized_operations=NO_OPERATIONS)


def _partitions(node: int, count: int) -> list[m.MetadataResponseTopicsPartitions]:
    return [
        m.MetadataResponseTopicsPartitions(error_code=0, partition_index=p, leader_id=node, leader_epoch=0,
                                           replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
        for p in range(count)
    ]


async def handle(request: Request[m.MetadataRequest], ctx: RequestContext) -> m.MetadataResponse:
    body = request.body
    version = request.api_version
    pm = ctx.partitions
    node = ctx.config.node_id
    requested = body.topics
    authz = ctx.broker.authorizer
    listing = requested is None or (version == 0 and len(requested) == 0)
    if listing:
        names: list[str | bytes] = list(pm.topic_names())
        allow_create = False
    else:
        names = [bytes(t.topic_id or ZERO_UUID) if t.name is None else t.name for t in requested or []]
        allow_create = bool(body.allow_auto_topic_creation) if version >= 4 else True
    topics = []
    created = 0
    seen: set[str | bytes] = set()
    for entry in names:
        if entry in seen:
            continue
        seen.add(entry)
        if isinstance(entry, bytes):  # by id (v10+ with a null name)
            if version < 12:
                topics.append(_topic_entry("", int(ErrorCode.INVALID_REQUEST), [], entry))
                continue
            by_id = pm.topic_by_id(entry)
            if by_id is None or by_id in seen:
                if by_id is None:
                    topics.append(_topic_entry(None, int(ErrorCode.UNKNOWN_TOPIC_ID), [], entry))
                continue
            seen.add(by_id)
            name = by_id
        else:
            name = entry
        if authz is not None and not allowed(ctx, DESCRIBE, TOPIC, name):
            if not listing:  # a listing leaves it out; a named topic gets 29, zero id
                topics.append(_topic_entry(name, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), []))
            continue
        count = pm.partition_count(name)
        if count == 0 and allow_create and authz is not None and not may_create_topic(ctx, name):
            topics.append(_topic_entry(name, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), []))
            continue
        if count == 0 and allow_create:
            if created:
                await asyncio.sleep(0)  # let other requests in between two topics' file work
                count = pm.partition_count(name)  # another request may have created it
        if count == 0 and allow_create:
            created += 1
            try:
                topic = pm.auto_create(name)
            except KafkaError as exc:
                topics.append(_topic_entry(name, int(exc.code), []))
                continue
            count = topic.partitions if topic is not None else 0
        if count == 0:
            topics.append(_topic_entry(name, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), []))
            continue
        entry_ok = _topic_entry(name, 0, _partitions(node, count), pm.topic_id(name))
        if version >= 8 and body.include_topic_authorized_operations:
            entry_ok.topic_authorized_operations = authorized_operations(ctx, TOPIC, name)
        topics.append(entry_ok)
    cluster_ops = (authorized_operations(ctx, CLUSTER)
                   if 8 <= version <= 10 and body.include_cluster_authorized_operations
                   else NO_OPERATIONS)
    host, port = ctx.broker.advertised_for(ctx.listener)
    return m.MetadataResponse(
        throttle_time_ms=0,
        brokers=[m.MetadataResponseBrokers(node_id=node, host=host, port=port, rack=None)],
        cluster_id=pm.cluster_id,
        controller_id=node,
        topics=topics,
        cluster_authorized_operations=cluster_ops,
    )


def error_body(request: Request[m.MetadataRequest], code: int) -> m.MetadataResponse:
    topics = request.body.topics or []
    return m.MetadataResponse(
        throttle_time_ms=0,
        brokers=[],
        cluster_id=None,
        controller_id=-1,
        topics=[_topic_entry(t.name, code, []) for t in topics],
        cluster_authorized_operations=NO_OPERATIONS,
    )
