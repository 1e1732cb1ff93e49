"""Topic-level log settings under Kafka's topic config names and defaults.

Invariants: every field is validated when a ``LogConfig`` is built, so the rest of
``storage/`` can trust it; attribute names are Kafka's topic config names in snake
case (``segment.bytes`` -> ``segment_bytes``); defaults are Apache Kafka 4.0's.
Kafka topic configs that storage does not act on (``compression.type``,
``min.insync.replicas``, ...) are accepted by :meth:`LogConfig.from_kafka` and kept
in ``extra`` so the broker can echo them. The compaction settings
(``cleanup.policy``, ``delete.retention.ms``, ``min.compaction.lag.ms``,
``max.compaction.lag.ms``, ``min.cleanable.dirty.ratio``) are typed fields, read by
``storage.cleaner``; ``cleanup.policy`` is kept as Kafka's comma-separated list,
normalised to sorted, distinct names. The remote tier's settings
(``remote.storage.enable``, ``local.retention.ms``/``.bytes``, -2 = the total
retention's, ``remote.log.copy.disable``, ``remote.log.delete.on.disable``) are typed
fields validated as Kafka does (no compaction with remote storage; local <= total).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

CLEANUP_POLICIES = ("compact", "delete")

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

# Kafka topic configs that are valid but have no effect on the storage layer.
_PASS_THROUGH = frozenset({
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.downconversion.enable",
    "message.format.version",
    "min.insync.replicas",
    "preallocate",
    "unclean.leader.election.enable",
    "message.timestamp.difference.max.ms",
})

# The remote tier's topic configs (KIP-405, KIP-950): typed fields, and echoed back as
# given (kept in ``extra`` too, so ``to_kafka`` lists them only when set).
_TIERED_BOOLS = {
    "remote.storage.enable": "remote_storage_enable",
    "remote.log.copy.disable": "remote_log_copy_disable",
    "remote.log.delete.on.disable": "remote_log_delete_on_disable",
}
_TIERED_LONGS = {
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
}


@dataclass(frozen=True)
class LogConfig:
    """One partition log's settings (Kafka topic configs)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    max_message_bytes: int = 1_048_588
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    remote_storage_enable: bool = False
    local_retention_ms: int = -2  # -2: retention.ms
    local_retention_bytes: int = -2  # -2: retention.bytes
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    # Kafka name -> (attribute, minimum, maximum).
    _RANGES = {
        "segment.bytes": ("segment_bytes", 14, INT_MAX),
        "segment.ms": ("segment_ms", 1, LONG_MAX),
        "segment.jitter.ms": ("segment_jitter_ms", 0, LONG_MAX),
        # Kafka allows 4; 24 keeps room for two time entries, so a sealed segment can
        # always store its final (max timestamp) entry.
        "segment.index.bytes": ("segment_index_bytes", 24, INT_MAX),
        "index.interval.bytes": ("index_interval_bytes", 0, INT_MAX),
        "retention.ms": ("retention_ms", -1, LONG_MAX),
        "retention.bytes": ("retention_bytes", -1, LONG_MAX),
        "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", 0, LONG_MAX),
        "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", 0, LONG_MAX),
        "max.message.bytes": ("max_message_bytes", 0, INT_MAX),
        "flush.messages": ("flush_messages", 1, LONG_MAX),
        "flush.ms": ("flush_ms", 0, LONG_MAX),
        "file.delete.delay.ms": ("file_delete_delay_ms", 0, LONG_MAX),
        "delete.retention.ms": ("delete_retention_ms", 0, LONG_MAX),
        "min.compaction.lag.ms": ("min_compaction_lag_ms", 0, LONG_MAX),
        "max.compaction.lag.ms": ("max_compaction_lag_ms", 1, LONG_MAX),
    }

    def __post_init__(self) -> None:
        for kafka_name, (attr, lo, hi) in self._RANGES.items():
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{kafka_name} must be an integer, got {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"{kafka_name}={value} is out of range [{lo}, {hi}]")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(
                f"message.timestamp.type={self.message_timestamp_type!r} must be "
                f"{CREATE_TIME!r} or {LOG_APPEND_TIME!r}"
            )
        policies = self.cleanup_policy.split(",")
        if not policies or any(p not in CLEANUP_POLICIES for p in policies) \
                or len(set(policies)) != len(policies):
            raise ValueError(
                f"cleanup.policy={self.cleanup_policy!r} must be a list of {', '.join(CLEANUP_POLICIES)}")
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= ratio <= 1.0:
            raise ValueError(f"min.cleanable.dirty.ratio={ratio!r} is out of range [0, 1]")
        for kafka_name, attr in _TIERED_LONGS.items():
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int) or value < -2:
                raise ValueError(f"{kafka_name}={value!r} must be an integer >= -2")
        if self.remote_storage_enable:
            self._validate_remote()
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            # Kafka's LogConfig.validateValues
            raise ValueError(
                f"conflict: min.compaction.lag.ms={self.min_compaction_lag_ms} is greater than "
                f"max.compaction.lag.ms={self.max_compaction_lag_ms}")

    def _validate_remote(self) -> None:
        """Kafka's LogConfig checks for a topic with remote storage enabled."""
        if self.compact:
            raise ValueError("Remote log storage is unsupported for the compacted topics")
        for local_name, local, total_name, total in (
                ("local.retention.ms", self.local_retention_ms, "retention.ms", self.retention_ms),
                ("local.retention.bytes", self.local_retention_bytes, "retention.bytes",
                 self.retention_bytes)):
            if local == -2 or total == -1:
                continue
            if local == -1:
                raise ValueError(f"{local_name}=-1 is not allowed when {total_name}={total} "
                                 f"(local retention must be <= total retention)")
            if local > total:
                raise ValueError(f"{local_name}={local} must be <= {total_name}={total}")
        if self.remote_log_copy_disable and (
                self.effective_local_retention_ms != self.retention_ms
                or self.effective_local_retention_bytes != self.retention_bytes):
            raise ValueError("with remote.log.copy.disable=true, local.retention.ms/bytes must "
                             "equal retention.ms/bytes (or be -2)")

    @property
    def effective_local_retention_ms(self) -> int:
        """local.retention.ms, with -2 meaning retention.ms."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """local.retention.bytes, with -2 meaning retention.bytes."""
        return (self.retention_bytes if self.local_retention_bytes == -2
                else self.local_retention_bytes)

    @property
    def compact(self) -> bool:
        """cleanup.policy includes compact: the cleaner keeps the latest record per key."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete_enabled(self) -> bool:
        """cleanup.policy includes delete: time and size retention apply."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def max_segment_ms(self) -> int:
        """Kafka's LogConfig.maxSegmentMs: a compacted topic rolls by
        max.compaction.lag.ms too, so a quiet partition's records become cleanable."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps every batch with its own clock."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """Kafka's per-segment roll jitter: uniform in [0, min(segment.jitter.ms, segment.ms))."""
        bound = min(self.segment_jitter_ms, self.segment_ms)
        if bound <= 0:
            return 0
        return (rng or random).randrange(bound)

    @classmethod
    def from_kafka(cls, props: dict[str, str], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka topic config strings, over ``base`` (default: Kafka's defaults).

        Raises ValueError naming the offending key for an unknown name or a bad value.
        """
        changes: dict[str, Any] = {}
        extra = dict(base.extra) if base is not None else {}
        for name, raw in props.items():
            if name in cls._RANGES:
                attr = cls._RANGES[name][0]
                try:
                    changes[attr] = int(str(raw).strip())
                except ValueError:
                    raise ValueError(f"{name} must be an integer, got {raw!r}") from None
            elif name == "message.timestamp.type":
                changes["message_timestamp_type"] = str(raw).strip()
            elif name == "cleanup.policy":
                items = [p.strip().lower() for p in str(raw).split(",") if p.strip()]
                # Kafka keeps a list config in the order given ("delete,compact" after an
                # APPEND of compact to delete); only repeats are dropped here.
                changes["cleanup_policy"] = ",".join(dict.fromkeys(items))
            elif name == "min.cleanable.dirty.ratio":
                try:
                    changes["min_cleanable_dirty_ratio"] = float(str(raw).strip())
                except ValueError:
                    raise ValueError(f"{name} must be a number, got {raw!r}") from None
            elif name in _TIERED_BOOLS:
                text = str(raw).strip().lower()
                if text not in ("true", "false"):
                    raise ValueError(f"{name} must be true or false, got {raw!r}")
                changes[_TIERED_BOOLS[name]] = text == "true"
                extra[name] = text
            elif name in _TIERED_LONGS:
                try:
                    changes[_TIERED_LONGS[name]] = int(str(raw).strip())
                except ValueError:
                    raise ValueError(f"{name} must be an integer, got {raw!r}") from None
                extra[name] = str(raw).strip()
            elif name in _PASS_THROUGH:
                extra[name] = str(raw)
            else:
                raise ValueError(f"unknown topic config {name!r}")
        changes["extra"] = extra
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def to_kafka(self) -> dict[str, str]:
        """Every setting under its Kafka name, as strings (the inverse of from_kafka)."""
        out = {name: str(getattr(self, attr)) for name, (attr, _, _) in self._RANGES.items()}
        out["message.timestamp.type"] = self.message_timestamp_type
        out["cleanup.policy"] = self.cleanup_policy
        out["min.cleanable.dirty.ratio"] = repr(float(self.min_cleanable_dirty_ratio))
        out.update(self.extra)
        default = _DEFAULTS
        for name, attr in (*_TIERED_BOOLS.items(), *_TIERED_LONGS.items()):
            value = getattr(self, attr)
            if name in self.extra or value != getattr(default, attr):
                out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


_DEFAULTS = LogConfig()
