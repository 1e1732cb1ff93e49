"""What AlterConfigs (33) and IncrementalAlterConfigs (44) share: checking one resource
and applying its new set of configs, with Kafka's error codes.

Invariants (Kafka's ``ConfigAdminManager`` and ``ConfigurationControlManager``):
- A resource named twice in one request: INVALID_REQUEST (42) for every copy; a key twice
  in one resource, a null value (other than for DELETE) or an unknown operation: 42.
- TOPIC (2): "" -> 42; an illegal name -> INVALID_TOPIC_EXCEPTION (17); absent ->
  UNKNOWN_TOPIC_OR_PARTITION (3); an unknown name or a bad value -> INVALID_CONFIG (40).
  Every topic config is dynamic.
- BROKER (4): "" (the cluster default) or this node's id, else 42; a setting that is not
  dynamic, unknown or badly valued -> 42 (Kafka answers INVALID_REQUEST here, KAFKA-13609).
- APPEND / SUBTRACT only on LIST configs, else INVALID_CONFIG (40); APPEND skips values
  already present and starts from Kafka's default when the key is unset.
- GROUP (32): any non-empty group id (existing or not; "" -> 42); an unknown name, a
  badly typed value or one outside the broker's bounds -> INVALID_CONFIG (40) with
  Kafka's message (``broker.group_configs``). A live KIP-848 group obeys the change at
  its members' next heartbeat.
- Anything else (BROKER_LOGGER, CLIENT_METRICS, unknown): 42 naming the type.
- ``validate_only`` runs every check and changes nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from broker.acl.authorizer import ALTER_CONFIGS
from broker.acl.check import config_error
from broker.config import ConfigError
from broker.dispatch import RequestContext
from broker.group_configs import GroupConfigError
from broker.groups.consumer import ConsumerGroup, ConsumerGroupSettings
from broker.partitions import Topic, validate_topic_name
from protocol import describe_configs as dc
from protocol import incremental_alter_configs as iac
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("chronolog.broker")

#: LIST-typed configs (the only ones APPEND / SUBTRACT apply to) and Kafka's default.
LIST_DEFAULTS: dict[str, str] = {
    "cleanup.policy": "delete",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "log.cleanup.policy": "delete",
}

# (resource type, name) -> the new whole set of values, given the current one.
Transform = Callable[[dict[str, str]], dict[str, str]]


def duplicate_resources(resources: Sequence[Any]) -> set[tuple[int, str]]:
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {k for k, n in counts.items() if n > 1}


def check_keys(names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")


def incremental(configs: Sequence[Any]) -> Transform:
    """The transform of a list of IncrementalAlterConfigs operations (checked now)."""
    check_keys([c.name for c in configs])
    nulls = [c.name for c in configs if c.value is None and c.config_operation != iac.OP_DELETE]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    for c in configs:
        if c.config_operation not in (iac.OP_SET, iac.OP_DELETE, iac.OP_APPEND, iac.OP_SUBTRACT):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {c.config_operation}")
        if c.config_operation in (iac.OP_APPEND, iac.OP_SUBTRACT) and c.name not in LIST_DEFAULTS:
            op = "APPEND" if c.config_operation == iac.OP_APPEND else "SUBTRACT"
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Can't {op} to key {c.name} because its type is not LIST.")

    def apply(current: dict[str, str]) -> dict[str, str]:
        out = dict(current)
        for c in configs:
            op = c.config_operation
            if op == iac.OP_SET:
                out[c.name] = c.value
            elif op == iac.OP_DELETE:
                out.pop(c.name, None)
            else:
                base = out.get(c.name, LIST_DEFAULTS[c.name])
                parts = [p for p in base.split(",") if p]
                for v in c.value.split(","):
                    if op == iac.OP_APPEND and v not in parts:
                        parts.append(v)
                    elif op == iac.OP_SUBTRACT and v in parts:
                        parts.remove(v)
                out[c.name] = ",".join(parts)
        return out

    return apply


def replacement(configs: Sequence[Any]) -> Transform:
    """The transform of a legacy AlterConfigs entry: exactly these keys, the rest deleted."""
    check_keys([c.name for c in configs])
    nulls = [c.name for c in configs if c.value is None]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    values = {c.name: c.value for c in configs}
    return lambda _current: dict(values)


def existing_topic(ctx: RequestContext, name: str) -> Topic:
    """The topic a TOPIC resource names; raises KafkaError 17 (illegal name) or 3 (absent)."""
    validate_topic_name(name)
    topic = ctx.partitions.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Topic {name!r} does not exist on this broker")
    return topic


def check_broker_name(ctx: RequestContext, name: str) -> None:
    """A BROKER resource is "" (the cluster default) or this node's id, else
    INVALID_REQUEST (42) with Kafka's message."""
    if not name:
        return
    try:
        node = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Broker id must be an integer, but it is: {name}") from None
    if node != ctx.config.node_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {ctx.config.node_id} or empty "
                         f"string, but received {name}")


def alter(ctx: RequestContext, rtype: int, name: str, transform: Transform, validate_only: bool) -> None:
    """Apply ``transform`` to one resource's dynamic configs; raises KafkaError."""
    pm = ctx.partitions
    if rtype == dc.RESOURCE_TOPIC:
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        topic = existing_topic(ctx, name)
        pm.alter_topic_configs(name, transform(dict(topic.configs)), validate_only=validate_only)
        if ctx.broker.tier is not None and not validate_only:
            ctx.broker.tier.kick()  # attach or retire its tiers now, not at the next interval
        return
    if rtype == dc.RESOURCE_BROKER:
        check_broker_name(ctx, name)
        try:
            pm.alter_broker_configs(name, transform(pm.dynamic.level(name)), validate_only=validate_only)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        return
    if rtype == dc.RESOURCE_GROUP:
        alter_group(ctx, name, transform, validate_only)
        return
    kind = {
        dc.RESOURCE_BROKER_LOGGER: "BROKER_LOGGER", dc.RESOURCE_CLIENT_METRICS: "CLIENT_METRICS",
    }.get(rtype, str(rtype))
    raise KafkaError(ErrorCode.INVALID_REQUEST,
                     f"Unknown resource type {kind}: Chronolog alters TOPIC ({dc.RESOURCE_TOPIC}), "
                     f"BROKER ({dc.RESOURCE_BROKER}) and GROUP ({dc.RESOURCE_GROUP}) configs only")


def check_group_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group resource name must not be empty.")


def alter_group(ctx: RequestContext, name: str, transform: Transform, validate_only: bool) -> None:
    """Replace a group's configs; a live KIP-848 group takes the new timeouts at once."""
    check_group_name(name)
    coordinator = ctx.broker.groups
    try:
        coordinator.configs.replace(name, transform(coordinator.configs.values(name)),
                                    validate_only=validate_only)
    except GroupConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    group = coordinator.group(name)
    if not validate_only and isinstance(group, ConsumerGroup):
        group.settings = ConsumerGroupSettings.from_config(ctx.config,
                                                           coordinator.configs.values(name))


Outcome = tuple[int, str | None, int, str]  # error code, message, resource type, resource name


def handle_resources(ctx: RequestContext, body: Any,
                     make: Callable[[Sequence[Any]], Transform]) -> list[Outcome]:
    """The outcome of either API for each resource, in request order."""
    dupes = duplicate_resources(body.resources)
    out = []
    for r in body.resources:
        code, message = 0, None
        try:
            if (r.resource_type, r.resource_name) in dupes:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            refused = config_error(ctx, ALTER_CONFIGS, r.resource_type, r.resource_name)
            if refused:
                raise KafkaError(ErrorCode(refused), "Authorization failed.")
            alter(ctx, r.resource_type, r.resource_name, make(r.configs), bool(body.validate_only))
        except KafkaError as exc:
            code, message = int(exc.code), exc.message or None
            log.info("refused a config change of resource %d %r from %s: %s", r.resource_type,
                     r.resource_name, ctx.peer, exc)
        out.append((code, message, r.resource_type, r.resource_name))
    return out


def failed_resources(request: Any, code: int) -> list[Outcome]:
    """Every resource of the request answered with ``code``."""
    return [(code, "unexpected server error", r.resource_type, r.resource_name)
            for r in request.body.resources]
