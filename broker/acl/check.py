"""The one authorization check every handler calls.

Invariants:
- With no ``authorizer.class.name`` the broker has no authorizer and
  :func:`allowed` is True at the cost of one attribute test; hot handlers test
  ``ctx.broker.authorizer is None`` once per request and skip the per-topic calls.
- The host an ACL is matched against is the client's IP address (Kafka's
  ``InetAddress.getHostAddress``), the principal is ``ctx.principal``.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import (
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)
from protocol.errors import ErrorCode

#: The error an API answers when the operation on that resource type is refused.
DENIED: dict[int, ErrorCode] = {
    TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def host_of(peer: str) -> str:
    """``"1.2.3.4:5678"`` / ``"::1:5678"`` -> the IP string ACL hosts are compared with."""
    host = peer.rpartition(":")[0]
    return host[1:-1] if host.startswith("[") else host


def allowed(ctx: Any, operation: int, resource_type: int, name: str = CLUSTER_NAME) -> bool:
    """May this request's principal do ``operation`` on the resource?"""
    authz = ctx.broker.authorizer
    if authz is None:
        return True
    return bool(authz.authorize(ctx.principal, host_of(ctx.peer), operation, resource_type, name))


def error(ctx: Any, operation: int, resource_type: int, name: str = CLUSTER_NAME) -> int:
    """0 if allowed, else the Kafka error code for that resource type."""
    if allowed(ctx, operation, resource_type, name):
        return 0
    return int(DENIED[resource_type])


#: Kafka's supported operations per resource type (``AclEntry.supportedOperations``, 4.0:
#: groups gained DESCRIBE_CONFIGS and ALTER_CONFIGS with KIP-848's group configs).
SUPPORTED_OPERATIONS: dict[int, tuple[int, ...]] = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
              DESCRIBE),
}


def authorized_operations(ctx: Any, resource_type: int, name: str = CLUSTER_NAME) -> int:
    """Kafka's AuthorizedOperations bit field (``AuthHelper.authorizedOperations``): each
    supported operation this principal may do on the resource; all of them without an
    authorizer."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
               if allowed(ctx, op, resource_type, name))


def may_create_topic(ctx: Any, name: str) -> bool:
    """Kafka's rule for creating a topic: CREATE on the cluster, or else on the topic."""
    return allowed(ctx, CREATE, CLUSTER) or allowed(ctx, CREATE, TOPIC, name)


def _group_id(request: Any) -> str:
    return str(request.body.group_id)


def _cluster(request: Any) -> str:
    return CLUSTER_NAME


#: API key -> the one operation Kafka checks on the whole request before serving it;
#: ``broker.dispatch`` applies it before the handler runs (the refusal is the handler's
#: ``error_body`` with the resource type's error code).
#: APIs that check per topic/group/resource do it in the handler with :func:`allowed`.
REQUEST_CHECKS: dict[int, tuple[int, int, Any]] = {
    8: (READ, GROUP, _group_id),               # OffsetCommit (topics: READ, in the handler)
    11: (READ, GROUP, _group_id),              # JoinGroup
    12: (READ, GROUP, _group_id),              # Heartbeat
    13: (READ, GROUP, _group_id),              # LeaveGroup
    14: (READ, GROUP, _group_id),              # SyncGroup
    27: (CLUSTER_ACTION, CLUSTER, _cluster),   # WriteTxnMarkers (coordinators, kafka-transactions abort)
    35: (DESCRIBE, CLUSTER, _cluster),         # DescribeLogDirs
    43: (ALTER, CLUSTER, _cluster),            # ElectLeaders
    45: (ALTER, CLUSTER, _cluster),            # AlterPartitionReassignments
    46: (DESCRIBE, CLUSTER, _cluster),         # ListPartitionReassignments
    47: (DELETE, GROUP, _group_id),            # OffsetDelete (topics: READ, in the handler)
    48: (DESCRIBE_CONFIGS, CLUSTER, _cluster),  # DescribeClientQuotas
    49: (ALTER_CONFIGS, CLUSTER, _cluster),    # AlterClientQuotas
    68: (READ, GROUP, _group_id),              # ConsumerGroupHeartbeat
}


def request_error(request: Any, ctx: Any) -> int:
    """0, or the error code refusing the whole request by :data:`REQUEST_CHECKS`."""
    if ctx.broker.authorizer is None:
        return 0
    operation, resource_type, name = REQUEST_CHECKS[int(request.api_key)]
    return error(ctx, operation, resource_type, name(request))


def txn_error(ctx: Any, transactional_id: str, group_id: str | None = None) -> int:
    """The transaction APIs' entry check, in Kafka's order: WRITE on the transactional id
    (53), then, for the APIs that carry a group, READ on the group (30); 0 if allowed."""
    if ctx.broker.authorizer is None:
        return 0
    return (error(ctx, WRITE, TRANSACTIONAL_ID, transactional_id)
            or (error(ctx, READ, GROUP, group_id) if group_id is not None else 0))


def may_write_idempotently(ctx: Any) -> bool:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE
    on at least one topic (Kafka 2.8+)."""
    authz = ctx.broker.authorizer
    if authz is None or allowed(ctx, IDEMPOTENT_WRITE, CLUSTER):
        return True
    return bool(authz.authorize_any(ctx.principal, host_of(ctx.peer), WRITE, TOPIC))


#: ConfigResource type (2 TOPIC, 4 BROKER, 8 BROKER_LOGGER, 32 GROUP) -> ACL resource type.
_CONFIG_RESOURCES = {2: TOPIC, 4: CLUSTER, 8: CLUSTER, 32: GROUP}


def config_error(ctx: Any, operation: int, config_resource_type: int, name: str) -> int:
    """Describe/AlterConfigs: DESCRIBE_CONFIGS/ALTER_CONFIGS on the cluster (brokers,
    loggers), topic or group; 0 if allowed (or a type that names no ACL resource)."""
    rtype = _CONFIG_RESOURCES.get(config_resource_type)
    if rtype is None:
        return 0
    return error(ctx, operation, rtype, CLUSTER_NAME if rtype == CLUSTER else name)


def acl_api_error(ctx: Any, operation: int) -> int:
    """Create/Describe/DeleteAcls: SECURITY_DISABLED (54) without an authorizer, else
    ``operation`` (ALTER or DESCRIBE) on the cluster decides; 0 if allowed."""
    if ctx.broker.authorizer is None:
        return int(ErrorCode.SECURITY_DISABLED)
    return error(ctx, operation, CLUSTER)
