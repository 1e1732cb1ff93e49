"""Per-group configs: Kafka 4.x's GROUP config resource (type 32, KIP-848's ``GroupConfig``).

Invariants (Kafka 4.1's ``GroupConfig`` and ``GroupConfigManager``, checked side by side
with the real Kafka in tests/ecosystem/test_admin_differences.py):
- The names are Kafka's: ``consumer.session.timeout.ms`` and
  ``consumer.heartbeat.interval.ms`` (defaults: the broker's ``group.consumer.*``), and the
  share and streams group settings with Kafka's defaults. Chronolog has no share or
  streams groups: those are kept and reported, without effect.
- Any group id may carry configs, whether or not the group exists (Kafka's rule); an
  empty id is INVALID_REQUEST (42).
- A set value is checked as Kafka checks it, else INVALID_CONFIG (40) with Kafka's
  message: an unknown name, a value not of the config's type, a timeout or interval
  outside the broker's ``group.*.min/max`` bounds.
- All groups' configs live in ``<data>/__chronolog/group-configs.json``, rewritten
  atomically before a change is applied, so a crash leaves the old or the new set.
- A KIP-848 consumer group's session timeout and heartbeat interval are its own configs
  where set, else the broker's (``ConsumerGroupSettings.from_config``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.fsutil import atomic_write_text

FILE_NAME = "group-configs.json"

INT, STRING = "INT", "STRING"


class GroupConfigError(ValueError):
    """A group config Kafka would refuse with INVALID_CONFIG (40); the message is Kafka's."""


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: str
    doc: str


#: Kafka 4.1's group configs, in Kafka's order of description (sorted by name).
DEFINITIONS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef("consumer.heartbeat.interval.ms", INT,
                   "The heartbeat interval given to the members of a consumer group."),
    GroupConfigDef("consumer.session.timeout.ms", INT,
                   "The timeout to detect client failures when using the consumer group protocol."),
    GroupConfigDef("share.auto.offset.reset", STRING,
                   "Where a share group starts: latest, earliest or by_duration:<ISO-8601> "
                   "(kept, without effect: Chronolog has no share groups)."),
    GroupConfigDef("share.heartbeat.interval.ms", INT,
                   "The heartbeat interval of share group members (kept, without effect)."),
    GroupConfigDef("share.isolation.level", STRING,
                   "read_committed or read_uncommitted for share groups (kept, without effect)."),
    GroupConfigDef("share.record.lock.duration.ms", INT,
                   "The record acquisition lock of share groups (kept, without effect)."),
    GroupConfigDef("share.session.timeout.ms", INT,
                   "The session timeout of share group members (kept, without effect)."),
    GroupConfigDef("streams.heartbeat.interval.ms", INT,
                   "The heartbeat interval of streams group members (kept, without effect)."),
    GroupConfigDef("streams.num.standby.replicas", INT,
                   "Standby replicas of streams groups (kept, without effect)."),
    GroupConfigDef("streams.session.timeout.ms", INT,
                   "The session timeout of streams group members (kept, without effect)."),
)
BY_NAME: dict[str, GroupConfigDef] = {d.name: d for d in DEFINITIONS}

# Kafka's broker defaults for the group kinds Chronolog does not run (GroupCoordinatorConfig,
# ShareGroupConfig): (default, min, max) per config.
_FIXED_BOUNDS: dict[str, tuple[int, int, int]] = {
    "share.heartbeat.interval.ms": (5000, 5000, 15000),
    "share.session.timeout.ms": (45000, 45000, 60000),
    "share.record.lock.duration.ms": (30000, 15000, 60000),
    "streams.heartbeat.interval.ms": (5000, 5000, 15000),
    "streams.session.timeout.ms": (45000, 45000, 60000),
    "streams.num.standby.replicas": (0, 0, 2),
}
_BROKER_NAMES = {
    "consumer.session.timeout.ms": "group.consumer.{}session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.{}heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.{}session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.{}heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.{}record.lock.duration.ms",
    "streams.session.timeout.ms": "group.streams.{}session.timeout.ms",
    "streams.heartbeat.interval.ms": "group.streams.{}heartbeat.interval.ms",
    "streams.num.standby.replicas": "group.streams.{}standby.replicas",
}


def bounds(config: Any, name: str) -> tuple[int, int, int]:
    """(default, min, max) of an integer group config under this broker's settings."""
    if name == "consumer.session.timeout.ms":
        return (config.group_consumer_session_timeout_ms,
                config.group_consumer_min_session_timeout_ms,
                config.group_consumer_max_session_timeout_ms)
    if name == "consumer.heartbeat.interval.ms":
        return (config.group_consumer_heartbeat_interval_ms,
                config.group_consumer_min_heartbeat_interval_ms,
                config.group_consumer_max_heartbeat_interval_ms)
    return _FIXED_BOUNDS[name]


def default(config: Any, name: str) -> str:
    if name == "share.auto.offset.reset":
        return "latest"
    if name == "share.isolation.level":
        return "read_uncommitted"
    return str(bounds(config, name)[0])


def validate(config: Any, values: Mapping[str, str]) -> None:
    """Raise GroupConfigError unless Kafka would accept ``values`` as one group's configs."""
    for name, raw in values.items():
        d = BY_NAME.get(name)
        if d is None:
            raise GroupConfigError(f"Unknown group config name: {name}")
        if d.type == INT:
            try:
                value = int(raw.strip())
            except ValueError:
                raise GroupConfigError(f"Invalid value {raw} for configuration {name}: "
                                       "Not a number of type INT") from None
            _, low, high = bounds(config, name)
            if value < low:
                raise GroupConfigError(f"{name} must be greater than or equal to "
                                       f"{_BROKER_NAMES[name].format('min.')}")
            if value > high:
                raise GroupConfigError(f"{name} must be less than or equal to "
                                       f"{_BROKER_NAMES[name].format('max.')}")
        elif name == "share.isolation.level" and raw not in ("read_committed", "read_uncommitted"):
            raise GroupConfigError(f"Invalid value {raw} for configuration {name}: "
                                   "String must be one of: read_committed, read_uncommitted")
        elif name == "share.auto.offset.reset" and raw not in ("latest", "earliest") \
                and not raw.startswith("by_duration:"):
            raise GroupConfigError(f"Invalid value {raw} for configuration {name}: "
                                   "String must be one of: latest, earliest, by_duration:<PnDTnHnMn.nS.>")


class GroupConfigs:
    """Every group's configs that were set, persisted in the broker's state directory."""

    def __init__(self, state_dir: Path | None, config: Any) -> None:
        self.path = None if state_dir is None else state_dir / FILE_NAME
        self.config = config
        self._groups: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read the persisted configs (a bad file stops the broker, naming it)."""
        if self.path is None or not self.path.exists():
            return
        try:
            doc = json.loads(self.path.read_text())
            groups = {str(g): {str(k): str(v) for k, v in values.items()}
                      for g, values in doc.get("groups", {}).items()}
            for values in groups.values():
                validate(self.config, values)
        except (ValueError, TypeError, AttributeError) as exc:
            raise RuntimeError(f"group configs {self.path} are unreadable: {exc}") from exc
        self._groups = groups

    def values(self, group_id: str) -> dict[str, str]:
        """The configs set on this group (none set: empty)."""
        return dict(self._groups.get(group_id, {}))

    def replace(self, group_id: str, values: Mapping[str, str], *,
                validate_only: bool = False) -> None:
        """Make ``values`` the group's whole set of configs; validate, persist, then keep."""
        validate(self.config, values)
        if validate_only:
            return
        groups = {g: dict(v) for g, v in self._groups.items()}
        if values:
            groups[group_id] = dict(values)
        else:
            groups.pop(group_id, None)
        if self.path is not None:
            atomic_write_text(self.path, json.dumps({"version": 1, "groups": groups},
                                                    indent=1, sort_keys=True))
        self._groups = groups
