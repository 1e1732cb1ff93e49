"""Every broker setting, under its Kafka name, in one typed place.

Invariants:
- ``BrokerConfig`` is the only place a broker setting is read from; each field's
  metadata carries its Kafka name (``log.segment.bytes``), the attribute is the
  snake-case form (``log_segment_bytes``), and the default is Kafka's (4.x).
- A value is validated when it is loaded: an unknown name or a bad value raises
  :class:`ConfigError` naming the setting, so the broker never starts half-configured.
- Topic settings are derived from the broker defaults plus the topic's own
  overrides (Kafka's topic config names) by :meth:`BrokerConfig.topic_config`;
  a topic never reads a broker setting directly.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.config import LogConfig

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


class ConfigError(ValueError):
    """A setting that is unknown or whose value cannot be used."""


def _setting(
    kafka: str,
    default: Any,
    doc: str,
    *,
    choices: tuple[str, ...] = (),
    minimum: int | None = None,
    nullable: bool = False,
) -> Any:
    return field(
        default=default,
        metadata={
            "kafka": kafka,
            "doc": doc,
            "choices": choices,
            "minimum": minimum,
            "nullable": nullable,
        },
    )


@dataclass
class BrokerConfig:
    """The broker's settings; build with :meth:`load` or :meth:`from_properties`."""

    # --- listeners and identity ---
    listeners: str = _setting(
        "listeners", "PLAINTEXT://127.0.0.1:9092",
        "Where the Kafka protocol listens (one PLAINTEXT listener; host 0.0.0.0 allowed).",
    )
    advertised_listeners: str = _setting(
        "advertised.listeners", "",
        "The host:port clients are told in Metadata; empty = the listener itself.",
    )
    node_id: int = _setting("node.id", 0, "This broker's id (also the controller id).", minimum=0)
    log_dirs: str = _setting("log.dirs", "./data", "The data directory (one directory).")
    # --- segments and indexes ---
    log_segment_bytes: int = _setting(
        "log.segment.bytes", 1073741824, "Roll a segment when it reaches this size.", minimum=14
    )
    log_index_interval_bytes: int = _setting(
        "log.index.interval.bytes", 4096, "Bytes between index entries.", minimum=0
    )
    log_index_size_max_bytes: int = _setting(
        "log.index.size.max.bytes", 10485760,
        "Preallocated size of each index file (at least 24: room for the final time entry).",
        minimum=24,
    )
    log_roll_ms: int | None = _setting(
        "log.roll.ms", None, "Roll a segment after this long (overrides log.roll.hours).",
        minimum=1, nullable=True,
    )
    log_roll_hours: int = _setting("log.roll.hours", 168, "Roll a segment after this long.", minimum=1)
    log_roll_jitter_ms: int | None = _setting(
        "log.roll.jitter.ms", None, "Random jitter subtracted from the roll time.",
        minimum=0, nullable=True,
    )
    log_roll_jitter_hours: int = _setting(
        "log.roll.jitter.hours", 0, "Random jitter subtracted from the roll time.", minimum=0
    )
    # --- retention ---
    log_retention_ms: int | None = _setting(
        "log.retention.ms", None, "Delete segments older than this (-1 = forever).",
        minimum=-1, nullable=True,
    )
    log_retention_minutes: int | None = _setting(
        "log.retention.minutes", None, "Retention in minutes (if log.retention.ms is unset).",
        minimum=-1, nullable=True,
    )
    log_retention_hours: int = _setting(
        "log.retention.hours", 168, "Retention in hours (if neither ms nor minutes is set).",
        minimum=-1,
    )
    log_retention_bytes: int = _setting(
        "log.retention.bytes", -1, "Delete old segments while a partition is larger (-1 = off).",
        minimum=-1,
    )
    log_retention_check_interval_ms: int = _setting(
        "log.retention.check.interval.ms", 300000, "How often retention runs.", minimum=1
    )
    log_segment_delete_delay_ms: int = _setting(
        "log.segment.delete.delay.ms", 60000,
        "Accepted for compatibility; Chronolog removes deleted segments at once.", minimum=0,
    )
    # --- timestamps ---
    log_message_timestamp_type: str = _setting(
        "log.message.timestamp.type", "CreateTime", "Default timestamp type of topics.",
        choices=("CreateTime", "LogAppendTime"),
    )
    log_message_timestamp_before_max_ms: int = _setting(
        "log.message.timestamp.before.max.ms", LONG_MAX,
        "Reject CreateTime records older than now minus this.", minimum=0,
    )
    log_message_timestamp_after_max_ms: int = _setting(
        "log.message.timestamp.after.max.ms", 3600000,
        "Reject CreateTime records newer than now plus this (Kafka 4 default: 1 hour).", minimum=0,
    )
    # --- topics ---
    num_partitions: int = _setting("num.partitions", 1, "Partitions of a new topic.", minimum=1)
    default_replication_factor: int = _setting(
        "default.replication.factor", 1, "Replication factor of a new topic (only 1 exists).",
        minimum=1,
    )
    auto_create_topics_enable: bool = _setting(
        "auto.create.topics.enable", True, "Create a topic on Metadata/Produce for an unknown name."
    )
    delete_topic_enable: bool = _setting("delete.topic.enable", True, "Allow DeleteTopics.")
    # --- limits ---
    message_max_bytes: int = _setting(
        "message.max.bytes", 1048588, "Largest record batch a topic accepts.", minimum=0
    )
    fetch_max_bytes: int = _setting(
        "fetch.max.bytes", 57671680,
        "Most record bytes one Fetch response carries (with the request's MaxBytes, the "
        "lower wins; the first batch is returned even if larger, KIP-74).", minimum=0,
    )
    socket_request_max_bytes: int = _setting(
        "socket.request.max.bytes", 104857600, "Largest request frame; larger closes the connection.",
        minimum=1,
    )
    max_connections: int = _setting(
        "max.connections", INT_MAX, "Connections accepted at once; more are closed at once.",
        minimum=0,
    )
    idle_poll_us: int = _setting(
        "idle.poll.us", 200,
        "After each request, keep polling the sockets this long before the event loop "
        "sleeps (Seastar's idle-poll-time; 0 = sleep at once). Spares a request that "
        "follows soon the cost of waking a sleeping CPU; spins at most this long per gap.",
        minimum=0,
    )
    connections_max_idle_ms: int = _setting(
        "connections.max.idle.ms", 600000, "Close a connection idle this long (-1 = never).",
        minimum=-1,
    )
    # --- flush ---
    log_flush_interval_messages: int = _setting(
        "log.flush.interval.messages", LONG_MAX, "fsync a partition after this many records.",
        minimum=1,
    )
    log_flush_interval_ms: int | None = _setting(
        "log.flush.interval.ms", None, "fsync a partition this long after its last flush.",
        minimum=0, nullable=True,
    )
    log_flush_scheduler_interval_ms: int = _setting(
        "log.flush.scheduler.interval.ms", LONG_MAX, "How often the time-based flush runs.",
        minimum=1,
    )
    log_flush_offset_checkpoint_interval_ms: int = _setting(
        "log.flush.offset.checkpoint.interval.ms", 60000,
        "How often the recovery-point checkpoint is written.", minimum=1,
    )
    # --- consumer groups and committed offsets (the group coordinator) ---
    group_initial_rebalance_delay_ms: int = _setting(
        "group.initial.rebalance.delay.ms", 3000,
        "How long the first rebalance of an empty group waits for more members, extended by "
        "this much per new arrival while the rebalance timeout allows.", minimum=0,
    )
    group_min_session_timeout_ms: int = _setting(
        "group.min.session.timeout.ms", 6000,
        "Smallest session timeout a classic member may ask for (else INVALID_SESSION_TIMEOUT).",
        minimum=0,
    )
    group_max_session_timeout_ms: int = _setting(
        "group.max.session.timeout.ms", 1800000,
        "Largest session timeout a classic member may ask for (else INVALID_SESSION_TIMEOUT).",
        minimum=0,
    )
    group_max_size: int = _setting(
        "group.max.size", INT_MAX,
        "Most members (and pending member ids) of one classic group; more get "
        "GROUP_MAX_SIZE_REACHED.", minimum=1,
    )
    offsets_retention_minutes: int = _setting(
        "offsets.retention.minutes", 10080,
        "Keep committed offsets this long after the group became Empty (KIP-211), or after "
        "the last commit for groups without members.", minimum=1
    )
    offsets_retention_check_interval_ms: int = _setting(
        "offsets.retention.check.interval.ms", 600000,
        "How often expired committed offsets (and unused empty groups) are removed.", minimum=1,
    )
    producer_id_expiration_ms: int = _setting(
        "producer.id.expiration.ms", 86400000,
        "Forget an idempotent producer's sequence state after this long without a write.",
        minimum=1,
    )
    offset_metadata_max_bytes: int = _setting(
        "offset.metadata.max.bytes", 4096, "Largest metadata string of a committed offset.",
        minimum=0,
    )
    # --- UDP ingest and metrics (operations) ---
    udp_listeners: str = _setting(
        "udp.listeners", "", "host:port[,host:port] to receive records as UDP datagrams."
    )
    udp_topic: str = _setting("udp.topic", "udp", "Topic that UDP datagrams are appended to.")
    udp_partitioning: str = _setting(
        "udp.partitioning", "hash", "How datagrams pick a partition.",
        choices=("hash", "round-robin"),
    )
    udp_format: str = _setting(
        "udp.format", "raw", "How a datagram is parsed into a record.",
        choices=("raw", "tsv", "json"),
    )
    udp_linger_ms: int = _setting("udp.linger.ms", 5, "Batch datagrams for this long.", minimum=0)
    udp_batch_bytes: int = _setting(
        "udp.batch.bytes", 1048576, "Append a UDP batch once it reaches this size.", minimum=1
    )
    udp_max_datagram_bytes: int = _setting(
        "udp.max.datagram.bytes", 65507, "Largest datagram accepted.", minimum=1
    )
    udp_socket_receive_buffer_bytes: int = _setting(
        "udp.socket.receive.buffer.bytes", 16777216,
        "SO_RCVBUF of the UDP sockets (16 MiB kept 100k datagrams/s loss-free here).",
        minimum=0,
    )
    metrics_listener: str = _setting(
        "metrics.listener", "", "host:port of the Prometheus /metrics endpoint; empty = off."
    )

    # ------------------------------------------------------------------ loading

    @classmethod
    def settings(cls) -> dict[str, dataclasses.Field[Any]]:
        """Kafka name -> dataclass field, for every setting."""
        return {f.metadata["kafka"]: f for f in dataclasses.fields(cls)}

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> BrokerConfig:
        """Build from Kafka-named string values; unknown names or bad values raise ConfigError."""
        known = cls.settings()
        kwargs: dict[str, Any] = {}
        for name, raw in values.items():
            f = known.get(name)
            if f is None:
                raise ConfigError(f"unknown broker setting {name!r}")
            kwargs[f.name] = _parse(name, f, raw)
        cfg = cls(**kwargs)
        cfg.validate()
        return cfg

    @classmethod
    def load(
        cls,
        properties_file: str | Path | None = None,
        overrides: Iterable[str] = (),
        *,
        data_dir: str | None = None,
        host: str | None = None,
        port: int | None = None,
    ) -> BrokerConfig:
        """The command line's view: a properties file, then ``name=value`` overrides, then flags."""
        values: dict[str, str] = {}
        if properties_file is not None:
            values.update(read_properties(Path(properties_file)))
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"--override expects name=value, got {item!r}")
            values[name.strip()] = value.strip()
        if data_dir is not None:
            values["log.dirs"] = data_dir
        if host is not None or port is not None:
            cur_host, cur_port = parse_listener(values.get("listeners", cls.listeners))
            values["listeners"] = (
                f"PLAINTEXT://{host if host is not None else cur_host}:"
                f"{port if port is not None else cur_port}"
            )
        return cls.from_properties(values)

    def validate(self) -> None:
        parse_listener(self.listeners)
        if self.advertised_listeners:
            parse_listener(self.advertised_listeners)
        if "," in self.log_dirs:
            raise ConfigError("log.dirs: Chronolog uses one data directory, got a list")
        if self.udp_listeners:
            for item in self.udp_listeners.split(","):
                parse_host_port(item.strip(), "udp.listeners")
        if self.metrics_listener:
            parse_host_port(self.metrics_listener, "metrics.listener")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        self.topic_config()  # the broker defaults must make a valid topic config

    # ------------------------------------------------------------------ derived

    @property
    def host(self) -> str:
        return parse_listener(self.listeners)[0]

    @property
    def port(self) -> int:
        return parse_listener(self.listeners)[1]

    @property
    def data_dir(self) -> Path:
        return Path(self.log_dirs)

    def advertised(self) -> tuple[str, int]:
        """``advertised_host_port`` without a bound port (port 0 stays 0)."""
        return self.advertised_host_port(None)

    def advertised_host_port(self, bound_port: int | None = None) -> tuple[str, int]:
        """The (host, port) that Metadata tells clients to connect to.

        ``advertised.listeners`` if set, else the listener itself, with a wildcard
        host shown as 127.0.0.1 and port 0 replaced by the port actually bound.
        """
        if self.advertised_listeners:
            return parse_listener(self.advertised_listeners)
        host, port = parse_listener(self.listeners)
        if port == 0 and bound_port is not None:
            port = bound_port
        return ("127.0.0.1" if host in ("", "0.0.0.0", "::") else host), port

    @property
    def roll_ms(self) -> int:
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * 3_600_000

    @property
    def retention_ms(self) -> int:
        """Kafka's precedence: ms, then minutes, then hours; any negative means forever."""
        if self.log_retention_ms is not None:
            ms = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            ms = self.log_retention_minutes * 60_000
        else:
            ms = self.log_retention_hours * 3_600_000
        return -1 if ms < 0 else ms

    @property
    def flush_ms(self) -> int:
        """log.flush.interval.ms falls back to the scheduler interval, as in Kafka."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    def topic_defaults(self) -> dict[str, str]:
        """Every topic config name this broker knows, with the broker-level default as a string."""
        return {
            "segment.bytes": str(self.log_segment_bytes),
            "segment.ms": str(self.roll_ms),
            "segment.jitter.ms": str(self.roll_jitter_ms),
            "segment.index.bytes": str(self.log_index_size_max_bytes),
            "index.interval.bytes": str(self.log_index_interval_bytes),
            "retention.ms": str(self.retention_ms),
            "retention.bytes": str(self.log_retention_bytes),
            "message.timestamp.type": self.log_message_timestamp_type,
            "message.timestamp.before.max.ms": str(self.log_message_timestamp_before_max_ms),
            "message.timestamp.after.max.ms": str(self.log_message_timestamp_after_max_ms),
            "max.message.bytes": str(self.message_max_bytes),
            "flush.messages": str(self.log_flush_interval_messages),
            "flush.ms": str(self.flush_ms),
            "file.delete.delay.ms": str(self.log_segment_delete_delay_ms),
        }

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """The ``storage.config.LogConfig`` of a topic: broker defaults plus its overrides.

        Raises ConfigError for an unknown topic config name or a value storage rejects.
        """
        from storage.config import LogConfig

        values = self.topic_defaults()
        for name, value in (overrides or {}).items():
            check_topic_config(name, value)
            values[name] = value
        try:
            return LogConfig.from_kafka(values)
        except ValueError as exc:
            raise ConfigError(f"invalid topic config: {exc}") from exc

    def describe(self) -> dict[str, str]:
        """Kafka name -> current value as text (for logs and docs)."""
        out = {}
        for name, f in self.settings().items():
            value = getattr(self, f.name)
            out[name] = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
        return out


def check_topic_config(name: str, value: str | None) -> None:
    """Raise ConfigError unless ``name`` is a Kafka topic config and ``value`` fits it."""
    from storage.config import LogConfig

    if value is None:
        raise ConfigError(f"Null value not supported for topic config {name}")
    try:
        LogConfig.from_kafka({name: value})
    except ValueError as exc:
        raise ConfigError(f"Invalid config {name}={value}: {exc}") from None


def _parse(name: str, f: dataclasses.Field[Any], raw: str) -> Any:
    raw = raw.strip()
    meta = f.metadata
    default = f.default
    if meta["nullable"] and raw == "":
        return None
    if isinstance(default, bool):
        low = raw.lower()
        if low not in ("true", "false"):
            raise ConfigError(f"{name}: expected true or false, got {raw!r}")
        return low == "true"
    if isinstance(default, int) or (meta["nullable"] and default is None):
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {raw!r}") from None
        if meta["minimum"] is not None and value < meta["minimum"]:
            raise ConfigError(f"{name}: must be at least {meta['minimum']}, got {value}")
        if value > LONG_MAX:
            raise ConfigError(f"{name}: {value} does not fit a 64-bit long")
        return value
    if meta["choices"] and raw not in meta["choices"]:
        raise ConfigError(f"{name}: must be one of {', '.join(meta['choices'])}, got {raw!r}")
    return raw


_LISTENER = re.compile(r"^(?:(?P<proto>[A-Za-z_]+)://)?(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


def parse_listener(value: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` (or ``host:port``) -> (host, port); one listener only."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if len(items) != 1:
        raise ConfigError(f"listeners: expected exactly one listener, got {value!r}")
    m = _LISTENER.match(items[0])
    if m is None:
        raise ConfigError(f"listeners: expected PLAINTEXT://host:port, got {value!r}")
    proto = (m.group("proto") or "PLAINTEXT").upper()
    if proto != "PLAINTEXT":
        raise ConfigError(f"listeners: only PLAINTEXT is supported, got {proto}")
    port = int(m.group("port"))
    if not 0 <= port <= 65535:
        raise ConfigError(f"listeners: port {port} out of range")
    return m.group("host").strip("[]"), port


def parse_host_port(value: str, name: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{name}: expected host:port, got {value!r}")
    return host or "127.0.0.1", int(port)


def read_properties(path: Path) -> dict[str, str]:
    """Java-properties subset: ``name=value`` or ``name: value`` lines, ``#``/``!`` comments,
    trailing-backslash continuation."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    out: dict[str, str] = {}
    pending = ""
    for lineno, line in enumerate(text.splitlines(), 1):
        line = pending + line.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m is None:
            raise ConfigError(f"{path}:{lineno}: expected name=value, got {line!r}")
        out[m.group(1)] = m.group(2)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` arguments, shared by ``python -m broker`` and ``chronolog serve``."""
    parser.add_argument("properties", nargs="?", default=None, metavar="server.properties",
                        help="a Kafka-style properties file (optional)")
    parser.add_argument("--data-dir", default=None, help="data directory (log.dirs; default ./data)")
    parser.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="listen port (default 9092)")
    parser.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                        help="set a broker setting by its Kafka name; repeatable")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="log lines as text or one JSON object per line")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
