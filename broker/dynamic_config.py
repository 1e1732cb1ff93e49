"""Dynamic broker configs: the broker settings an admin client may change while the broker runs.

Kafka keeps two dynamic levels above ``server.properties`` (``DynamicBrokerConfig``):
per broker (resource name = the node id, source DYNAMIC_BROKER_CONFIG) and the
cluster-wide default (resource name ``""``, source DYNAMIC_DEFAULT_BROKER_CONFIG).
Precedence: per broker, then cluster default, then the static file/flags, then
Kafka's default.

Invariants:
- Only names in :data:`DYNAMIC_SETTINGS` that ``BrokerConfig`` knows can be set; each
  value is parsed and checked exactly as a static one (``BrokerConfig.from_properties``).
- Both levels live in ``<data>/__chronolog/broker-configs.json``, rewritten atomically
  (temp file, fsync, rename, fsync of the directory) before a change is applied, so a
  crash leaves the old or the new set, and a restart applies it again.
- :meth:`DynamicBrokerConfigs.apply` sets the effective values on the one live
  ``BrokerConfig`` object in place, so every holder of it sees the change; the static
  values are kept in a private copy so a deleted dynamic value falls back to them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path

from broker.config import BrokerConfig, ConfigError
from storage.fsutil import atomic_write_text

FILE_NAME = "broker-configs.json"

#: Kafka's dynamically reconfigurable broker settings that mean something on one node:
#: the broker synonyms of the topic configs (``DynamicLogConfig.ReconfigurableConfigs``:
#: new defaults for every topic without its own override, applied at once), the
#: cleaner's (``LogCleaner.ReconfigurableConfigs``, when this broker has them),
#: ``max.connections`` (``DynamicListenerConfig``) and ``producer.id.expiration.ms``
#: (``DynamicProducerStateManagerConfig``), and ``sasl.kerberos.min.time.before.relogin``
#: (``DynamicListenerConfig``; inert here, but admin tools such as librdkafka's 0081_admin
#: set it and Kafka accepts it). Listener, TLS and thread-pool settings are not: one
#: asyncio process has no pools to resize and one listener to keep.
DYNAMIC_SETTINGS: frozenset[str] = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.index.interval.bytes", "log.retention.ms", "log.retention.bytes",
    "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "message.max.bytes", "log.flush.interval.messages",
    "log.flush.interval.ms", "log.segment.delete.delay.ms", "log.cleanup.policy",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.threads", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.backoff.ms",
    "max.connections", "producer.id.expiration.ms", "sasl.kerberos.min.time.before.relogin",
})

CLUSTER_DEFAULT = ""


def dynamic_names() -> frozenset[str]:
    """The dynamic settings this broker actually has."""
    return DYNAMIC_SETTINGS & frozenset(BrokerConfig.settings())


class DynamicBrokerConfigs:
    """The two dynamic levels of one broker, persisted in its state directory."""

    def __init__(self, state_dir: Path, config: BrokerConfig) -> None:
        self.path = state_dir / FILE_NAME
        self.config = config
        self.static = copy.deepcopy(config)
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}

    def load(self) -> None:
        """Read the persisted levels and apply them (a bad file stops the broker, naming it)."""
        if not self.path.exists():
            return
        try:
            doc = json.loads(self.path.read_text())
            per_broker = {str(k): str(v) for k, v in doc.get("broker", {}).items()}
            default = {str(k): str(v) for k, v in doc.get("default", {}).items()}
            self.validate(per_broker, default)
        except (ValueError, TypeError, AttributeError, ConfigError) as exc:
            raise RuntimeError(f"dynamic broker configs {self.path} are unreadable: {exc}") from exc
        self.per_broker, self.cluster_default = per_broker, default
        self.apply()

    def level(self, resource_name: str) -> dict[str, str]:
        """The current values of one level ("" = cluster default, else this broker)."""
        return dict(self.cluster_default if resource_name == CLUSTER_DEFAULT else self.per_broker)

    def validate(self, per_broker: Mapping[str, str], default: Mapping[str, str]) -> BrokerConfig:
        """The effective config these levels would give; raises ConfigError naming the
        offending setting (not dynamic, unknown, or a bad value)."""
        allowed = dynamic_names()
        for name in (*per_broker, *default):
            if name not in allowed:
                if name in BrokerConfig.settings():
                    raise ConfigError(f"Cannot update these configs dynamically: Set({name})")
                raise ConfigError(f"Unknown broker config: {name}")
        values = {name: _text(self.static, name) for name in allowed}
        values.update(default)
        values.update(per_broker)
        props = {k: v for k, v in values.items() if v is not None}
        effective = copy.deepcopy(self.static)
        parsed = BrokerConfig.from_properties(props)  # parses and range-checks every value
        fields = BrokerConfig.settings()
        for name in allowed:
            setattr(effective, fields[name].name, getattr(parsed, fields[name].name)
                    if name in props else getattr(self.static, fields[name].name))
        effective.validate()  # e.g. the topic defaults they imply must make a valid topic config
        return effective

    def replace(self, resource_name: str, values: Mapping[str, str], *, validate_only: bool = False) -> None:
        """Make ``values`` the whole level ``resource_name``; persist, then apply."""
        per_broker = dict(self.per_broker)
        default = dict(self.cluster_default)
        if resource_name == CLUSTER_DEFAULT:
            default = dict(values)
        else:
            per_broker = dict(values)
        self.validate(per_broker, default)
        if validate_only:
            return
        doc = {"version": 1, "broker": per_broker, "default": default}
        atomic_write_text(self.path, json.dumps(doc, indent=1, sort_keys=True))
        self.per_broker, self.cluster_default = per_broker, default
        self.apply()

    def apply(self) -> None:
        """Set every dynamic setting's effective value on the live config object."""
        effective = self.validate(self.per_broker, self.cluster_default)
        fields = BrokerConfig.settings()
        for name in dynamic_names():
            attr = fields[name].name
            setattr(self.config, attr, getattr(effective, attr))

    def source(self, name: str) -> tuple[str, str] | None:
        """(level, value) of the dynamic value of ``name`` that wins, if any."""
        if name in self.per_broker:
            return "broker", self.per_broker[name]
        if name in self.cluster_default:
            return "default", self.cluster_default[name]
        return None


def _text(config: BrokerConfig, name: str) -> str | None:
    value = getattr(config, BrokerConfig.settings()[name].name)
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
