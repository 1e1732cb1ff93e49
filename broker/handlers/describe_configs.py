"""DescribeConfigs (32), v0-4: a topic's, this broker's or a group's configs, Kafka's way.

Invariants:
- Each resource is answered on its own, in request order, with its type and name echoed.
- TOPIC (2): every topic config the broker applies (``LogConfig.to_kafka()``: the
  storage settings plus pass-through configs set on the topic), sorted by name, with
  its effective value; never read-only or sensitive. The source is
  DYNAMIC_TOPIC_CONFIG (1) when set on the topic, else STATIC_BROKER_CONFIG (4) when a
  broker synonym (``log.*``, Kafka's ``ServerTopicConfigSynonyms`` order) is set, else
  DEFAULT_CONFIG (5). A broker setting counts as set when it differs from Kafka's
  default (``BrokerConfig`` keeps no record of which names a file or flag named).
  An illegal name is INVALID_TOPIC_EXCEPTION (17), an absent topic
  UNKNOWN_TOPIC_OR_PARTITION (3).
- BROKER (4): name = our ``node.id`` -> every broker setting, source
  DYNAMIC_BROKER_CONFIG (2) / DYNAMIC_DEFAULT_BROKER_CONFIG (3) when set through
  AlterConfigs / IncrementalAlterConfigs (``broker.dynamic_config``), else 4 or 5 as
  above, null for unset nullable settings; read-only unless Kafka lets it change at
  runtime; name "" -> the cluster-wide dynamic defaults that are set (source 3); another
  id or a non-integer name -> INVALID_REQUEST (42) with a message.
- A topic config's broker synonyms include the dynamic levels too (2, then 3, before 4).
- Sensitive settings (``BrokerConfig`` fields marked so: passwords, keys, JAAS) are
  described with value null and ``is_sensitive`` true, in synonyms too, as Kafka does.
- GROUP (32): any non-empty group id, existing or not -> every group config
  (``broker.group_configs``), sorted by name: source DYNAMIC_GROUP_CONFIG (8) when set
  on the group, else DEFAULT_CONFIG (5) with the broker's value; never read-only.
- Any other resource type -> INVALID_REQUEST (42) with a message naming it.
- ``configuration_keys`` null or empty = every config; unknown keys are skipped.
- Synonyms (v1+, only when IncludeSynonyms): the topic override first, then set
  broker synonyms (4), then broker synonyms that have a default (5); of a topic
  config's defaults, only those from the first one named after its primary synonym on
  (Kafka's ``dropWhile``: ``segment.ms`` lists no ``log.roll.hours``) unless a broker
  synonym is set. The config
  type is always sent (v3+), the documentation only when IncludeDocumentation.
- v0 has no source: ``is_default`` is true when the config is not set on the
  resource itself (a topic: no override; the broker: not set).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.acl.authorizer import DESCRIBE_CONFIGS
from broker.acl.check import config_error
from broker.config import BrokerConfig
from broker.config_admin import check_broker_name, check_group_name, existing_topic
from broker.dispatch import RequestContext
from broker.dynamic_config import DynamicBrokerConfigs, dynamic_names
from broker.group_configs import DEFINITIONS, INT, GroupConfigs
from broker.group_configs import default as group_default
from protocol import describe_configs as dc
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

# Topic config -> its broker synonyms, highest priority first (Kafka's ServerTopicConfigSynonyms).
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "retention.bytes": ("log.retention.bytes",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "cleanup.policy": ("log.cleanup.policy",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
}

# Kafka's ConfigDef types of the topic configs (LogConfig).
TOPIC_TYPES: dict[str, int] = {
    **dict.fromkeys(("segment.bytes", "segment.index.bytes", "index.interval.bytes",
                     "max.message.bytes", "min.insync.replicas", "compression.gzip.level",
                     "compression.lz4.level", "compression.zstd.level"), dc.TYPE_INT),
    **dict.fromkeys(("segment.ms", "segment.jitter.ms", "retention.ms", "retention.bytes",
                     "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
                     "message.timestamp.difference.max.ms", "flush.messages", "flush.ms",
                     "file.delete.delay.ms", "delete.retention.ms", "min.compaction.lag.ms",
                     "max.compaction.lag.ms", "local.retention.ms", "local.retention.bytes"),
                    dc.TYPE_LONG),
    **dict.fromkeys(("message.timestamp.type", "compression.type", "message.format.version"),
                    dc.TYPE_STRING),
    **dict.fromkeys(("cleanup.policy", "leader.replication.throttled.replicas",
                     "follower.replication.throttled.replicas"), dc.TYPE_LIST),
    **dict.fromkeys(("preallocate", "unclean.leader.election.enable", "message.downconversion.enable",
                     "remote.storage.enable", "remote.log.copy.disable",
                     "remote.log.delete.on.disable"), dc.TYPE_BOOLEAN),
    "min.cleanable.dirty.ratio": dc.TYPE_DOUBLE,
}

TOPIC_DOCS: dict[str, str] = {
    "segment.bytes": "Roll a new segment when the active one reaches this many bytes.",
    "segment.ms": "Roll a new segment when the active one's first timestamp is this old (ms).",
    "segment.jitter.ms": "Largest random jitter subtracted from segment.ms per segment (ms).",
    "segment.index.bytes": "Preallocated size of each offset and time index file (bytes).",
    "index.interval.bytes": "Bytes appended between two index entries.",
    "retention.ms": "Delete segments whose newest record is older than this (ms; -1 = forever).",
    "retention.bytes": "Delete the oldest segments while a partition is larger (-1 = off).",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime stamps "
                              "every batch with the broker's clock.",
    "message.timestamp.before.max.ms": "Reject CreateTime records older than now minus this (ms).",
    "message.timestamp.after.max.ms": "Reject CreateTime records newer than now plus this (ms).",
    "max.message.bytes": "Largest record batch the topic accepts (bytes).",
    "flush.messages": "fsync a partition after this many records.",
    "flush.ms": "fsync a partition this long after its last flush (ms).",
    "file.delete.delay.ms": "Accepted for compatibility; deleted segments are removed at once.",
    "cleanup.policy": "delete: time and size retention; compact: keep the latest record per key "
                      "(log compaction); compact,delete: both.",
    "delete.retention.ms": "How long a tombstone is kept after the clean that first saw it (ms).",
    "min.compaction.lag.ms": "Records younger than this are never compacted (ms).",
    "max.compaction.lag.ms": "A record not compacted after this long makes its log cleanable (ms).",
    "min.cleanable.dirty.ratio": "Clean a log once its dirty share of bytes exceeds this.",
}
_PASS_THROUGH_DOC = "Accepted and stored for compatibility; Chronolog does not act on it."

# Kafka's ConfigDef types of the integer broker settings that are LONG (the rest are INT).
_BROKER_LONGS = frozenset({
    "log.roll.ms", "log.roll.jitter.ms", "log.retention.ms", "log.retention.bytes",
    "log.retention.check.interval.ms", "log.segment.delete.delay.ms",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.flush.scheduler.interval.ms",
    "connections.max.idle.ms",
    "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "remote.log.manager.task.interval.ms", "remote.log.manager.task.retry.backoff.ms",
    "remote.log.manager.task.retry.backoff.max.ms", "remote.log.index.file.cache.total.size.bytes",
    "remote.log.chunk.cache.total.size.bytes",
    "log.local.retention.ms", "log.local.retention.bytes",
})


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class Entry:
    """One described config, every field any version may carry."""

    name: str
    value: str | None
    source: int
    read_only: bool
    is_default: bool
    config_type: int
    documentation: str | None
    synonyms: tuple[Synonym, ...]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@functools.cache
def _broker_fields() -> dict[str, dataclasses.Field[Any]]:
    """Kafka name -> field of every broker setting (fixed for the process)."""
    return BrokerConfig.settings()


def broker_value(config: BrokerConfig, name: str) -> tuple[str | None, bool]:
    """(value as text, set) of one broker setting; set = differs from Kafka's default."""
    f = _broker_fields()[name]
    value = getattr(config, f.name)
    return _text(value), value is not None and value != f.default


def _broker_synonyms(config: BrokerConfig, names: Sequence[str],
                     dynamic: DynamicBrokerConfigs | None = None) -> list[Synonym]:
    fields = _broker_fields()
    out: list[Synonym] = []
    static = config
    if dynamic is not None:
        static = dynamic.static
        for level, source in (("broker", dc.SOURCE_DYNAMIC_BROKER_CONFIG),
                              ("default", dc.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)):
            values = dynamic.per_broker if level == "broker" else dynamic.cluster_default
            out += [Synonym(n, values[n], source) for n in names if n in values]
    for name in names:
        value, is_set = broker_value(static, name)
        if is_set:
            out.append(Synonym(name, value, dc.SOURCE_STATIC_BROKER_CONFIG))
    for name in names:
        default = fields[name].default
        if default is not None:
            out.append(Synonym(name, _text(default), dc.SOURCE_DEFAULT_CONFIG))
    return out


def _kafka_synonyms(overridden: bool, synonyms: list[Synonym], names: Sequence[str]) -> list[Synonym]:
    """Kafka lists a topic config's broker synonyms from the first one named after the
    primary synonym on (ConfigHelper.configSynonyms' dropWhile), so with no broker
    setting made, segment.ms (primary log.roll.ms, no default) lists no log.roll.hours.
    When a broker setting is made, every synonym stays listed: Kafka would hide
    log.retention.minutes=90 and call retention.ms DEFAULT_CONFIG (docs/compatibility.md)."""
    own, broker = (synonyms[:1], synonyms[1:]) if overridden else ([], synonyms)
    if not names or any(s.source != dc.SOURCE_DEFAULT_CONFIG for s in broker):
        return synonyms
    return own + list(itertools.dropwhile(lambda s: s.name != names[0], broker))


def topic_entries(
    config: BrokerConfig, overrides: Mapping[str, str], effective: Mapping[str, str],
    dynamic: DynamicBrokerConfigs | None = None,
) -> list[Entry]:
    """Every config of a topic with these overrides and effective values, sorted by name."""
    out = []
    for name in sorted(effective):
        names = TOPIC_SYNONYMS.get(name, ())
        synonyms = _broker_synonyms(config, names, dynamic)
        if name in overrides:
            synonyms.insert(0, Synonym(name, effective[name], dc.SOURCE_DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else dc.SOURCE_DEFAULT_CONFIG
        synonyms = _kafka_synonyms(name in overrides, synonyms, names)
        out.append(Entry(
            name=name,
            value=effective[name],
            source=source,
            read_only=False,
            is_default=name not in overrides,
            config_type=TOPIC_TYPES.get(name, dc.TYPE_UNKNOWN),
            documentation=TOPIC_DOCS.get(name, _PASS_THROUGH_DOC),
            synonyms=tuple(synonyms),
        ))
    return out


def _broker_type(name: str, default: Any) -> int:
    if isinstance(default, bool):
        return dc.TYPE_BOOLEAN
    if isinstance(default, str):
        return dc.TYPE_STRING
    if isinstance(default, float):
        return dc.TYPE_DOUBLE
    return dc.TYPE_LONG if name in _BROKER_LONGS else dc.TYPE_INT


def broker_entries(config: BrokerConfig, dynamic: DynamicBrokerConfigs | None = None,
                   *, default_level: bool = False) -> list[Entry]:
    """Every broker setting under its Kafka name, sorted by name; ``default_level`` gives
    the cluster-wide dynamic defaults instead (resource name "")."""
    out = []
    fields = _broker_fields()
    changeable = dynamic_names()
    for name in sorted(fields):
        f = fields[name]
        if default_level:
            if dynamic is None or name not in dynamic.cluster_default:
                continue
            value: str | None = dynamic.cluster_default[name]
            synonyms = [Synonym(name, value, dc.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)]
        else:
            value, _ = broker_value(config, name)
            synonyms = _broker_synonyms(config, (name,), dynamic)
        source = synonyms[0].source if synonyms else dc.SOURCE_DEFAULT_CONFIG
        out.append(Entry(
            name=name,
            value=value,
            source=source,
            read_only=name not in changeable,
            is_default=source == dc.SOURCE_DEFAULT_CONFIG,
            config_type=_broker_type(name, f.default),
            documentation=f.metadata.get("doc") or None,
            synonyms=tuple(synonyms),
        ))
    return out


def group_entries(config: BrokerConfig, configs: GroupConfigs, group_id: str) -> list[Entry]:
    """Every group config of ``group_id``: its own value where set, else the broker's."""
    own = configs.values(group_id)
    out = []
    for d in sorted(DEFINITIONS, key=lambda d: d.name):
        is_set = d.name in own
        value = own[d.name] if is_set else group_default(config, d.name)
        source = dc.SOURCE_DYNAMIC_GROUP_CONFIG if is_set else dc.SOURCE_DEFAULT_CONFIG
        out.append(Entry(
            name=d.name, value=value, source=source, read_only=False, is_default=not is_set,
            config_type=dc.TYPE_INT if d.type == INT else dc.TYPE_STRING,
            documentation=d.doc, synonyms=(Synonym(d.name, value, source),),
        ))
    return out


def _sensitive(name: str) -> bool:
    """Secrets (``ssl.key.password``, ``sasl.jaas.config``, ...) are described as null."""
    f = _broker_fields().get(name)
    return f is not None and bool(f.metadata.get("sensitive"))


def _wire(entry: Entry, synonyms: bool, documentation: bool) -> m.DescribeConfigsResponseResultsConfigs:
    secret = _sensitive(entry.name)
    return m.DescribeConfigsResponseResultsConfigs(
        name=entry.name,
        value=None if secret else entry.value,
        read_only=entry.read_only,
        is_default=entry.is_default,
        config_source=entry.source,
        is_sensitive=secret,
        synonyms=[
            m.DescribeConfigsResponseResultsConfigsSynonyms(
                name=s.name, value=None if _sensitive(s.name) else s.value, source=s.source)
            for s in entry.synonyms
        ] if synonyms else [],
        config_type=entry.config_type,
        documentation=entry.documentation if documentation else None,
    )


def _result(resource: Any, code: int, message: str | None,
            configs: list[m.DescribeConfigsResponseResultsConfigs]) -> m.DescribeConfigsResponseResults:
    return m.DescribeConfigsResponseResults(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


def _entries(resource: Any, ctx: RequestContext) -> list[Entry]:
    """The resource's configs; raises KafkaError for a resource we cannot describe."""
    rtype, name = resource.resource_type, resource.resource_name
    refused = config_error(ctx, DESCRIBE_CONFIGS, rtype, name)
    if refused:
        raise KafkaError(ErrorCode(refused), "Authorization failed.")
    if rtype == dc.RESOURCE_TOPIC:
        topic = existing_topic(ctx, name)
        effective = ctx.partitions.log_config(name).to_kafka()
        return topic_entries(ctx.config, topic.configs, effective, ctx.partitions.dynamic)
    if rtype == dc.RESOURCE_BROKER:
        check_broker_name(ctx, name)
        return broker_entries(ctx.config, ctx.partitions.dynamic, default_level=not name)
    if rtype == dc.RESOURCE_GROUP:
        check_group_name(name)
        return group_entries(ctx.config, ctx.broker.groups.configs, name)
    raise KafkaError(ErrorCode.INVALID_REQUEST,
                     f"Unsupported resource type {rtype} for resource {name!r}: Chronolog "
                     f"describes TOPIC ({dc.RESOURCE_TOPIC}), BROKER ({dc.RESOURCE_BROKER}) "
                     f"and GROUP ({dc.RESOURCE_GROUP}) configs only")


def select(entries: list[Entry], keys: Sequence[str] | None) -> list[Entry]:
    """Kafka's filter: null or empty keys keep every entry, else those named (unknown skipped)."""
    if not keys:
        return entries
    wanted = set(keys)
    return [e for e in entries if e.name in wanted]


async def handle(request: Request[m.DescribeConfigsRequest], ctx: RequestContext) -> m.DescribeConfigsResponse:
    body = request.body
    synonyms = request.api_version >= 1 and bool(body.include_synonyms)
    documentation = request.api_version >= 3 and bool(body.include_documentation)
    out = []
    for resource in body.resources:
        try:
            entries = select(_entries(resource, ctx), resource.configuration_keys)
        except KafkaError as exc:
            out.append(_result(resource, int(exc.code), exc.message or None, []))
            continue
        # Kafka answers a described resource with the message "", not null.
        out.append(_result(resource, 0, "", [_wire(e, synonyms, documentation) for e in entries]))
    return m.DescribeConfigsResponse(throttle_time_ms=0, results=out)


def error_body(request: Request[m.DescribeConfigsRequest], code: int) -> m.DescribeConfigsResponse:
    return m.DescribeConfigsResponse(
        throttle_time_ms=0, results=[_result(r, code, "unexpected server error", []) for r in request.body.resources])
