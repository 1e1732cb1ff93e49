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
#: Kafka's ``cleanup.policy`` list items (``TopicConfig.CLEANUP_POLICY_*``).
CLEANUP_POLICIES = ("compact", "delete")


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
    sensitive: bool = False,
) -> Any:
    return field(
        default=default,
        metadata={
            "kafka": kafka,
            "doc": doc,
            "choices": choices,
            "minimum": minimum,
            "nullable": nullable,
            "sensitive": sensitive,
        },
    )


@dataclass
class BrokerConfig:
    """The broker's settings; build with :meth:`load` or :meth:`from_properties`."""

    # --- listeners and identity ---
    listeners: str = _setting(
        "listeners", "PLAINTEXT://127.0.0.1:9092",
        "Where the Kafka protocol listens: NAME://host:port[,...] (unique names and ports; "
        "empty host or 0.0.0.0 = all interfaces). A NAME other than a protocol needs "
        "listener.security.protocol.map.",
    )
    advertised_listeners: str = _setting(
        "advertised.listeners", "",
        "NAME://host:port[,...] clients are told in Metadata and FindCoordinator, per "
        "listener they came in on; a listener not named here advertises itself.",
    )
    listener_security_protocol_map: str = _setting(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "NAME:PROTOCOL pairs: the security protocol of each listener name.",
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
    # --- compaction (storage/cleaner.py, broker/cleaner_task.py) ---
    log_cleanup_policy: str = _setting(
        "log.cleanup.policy", "delete",
        "Default cleanup.policy of topics: delete, compact, or compact,delete.",
        choices=("delete", "compact", "compact,delete", "delete,compact"),
    )
    log_cleaner_enable: bool = _setting(
        "log.cleaner.enable", True, "Run the log cleaner, which compacts cleanup.policy=compact topics."
    )
    log_cleaner_threads: int = _setting(
        "log.cleaner.threads", 1, "Worker threads cleaning logs at once (0 = no cleaning).", minimum=0
    )
    log_cleaner_backoff_ms: int = _setting(
        "log.cleaner.backoff.ms", 15000, "Sleep this long when no log needs cleaning.", minimum=0
    )
    log_cleaner_io_max_bytes_per_second: float = _setting(
        "log.cleaner.io.max.bytes.per.second", 1.7976931348623157e308,
        "Bytes per second the cleaner reads plus writes, over all its threads.",
    )
    log_cleaner_dedupe_buffer_size: int = _setting(
        "log.cleaner.dedupe.buffer.size", 134217728,
        "Memory for the cleaners' key maps, shared by all threads (bytes; see docs/storage.md).",
        minimum=0,
    )
    log_cleaner_io_buffer_load_factor: float = _setting(
        "log.cleaner.io.buffer.load.factor", 0.9,
        "How full a key map may get before a clean stops at the offset it covers.",
    )
    log_cleaner_min_cleanable_ratio: float = _setting(
        "log.cleaner.min.cleanable.ratio", 0.5,
        "Default min.cleanable.dirty.ratio: clean a log once dirty / total bytes exceeds it.",
    )
    log_cleaner_delete_retention_ms: int = _setting(
        "log.cleaner.delete.retention.ms", 86400000,
        "Default delete.retention.ms: how long a tombstone outlives its first clean.", minimum=0,
    )
    log_cleaner_min_compaction_lag_ms: int = _setting(
        "log.cleaner.min.compaction.lag.ms", 0,
        "Default min.compaction.lag.ms: records younger than this are never compacted.", minimum=0,
    )
    log_cleaner_max_compaction_lag_ms: int = _setting(
        "log.cleaner.max.compaction.lag.ms", LONG_MAX,
        "Default max.compaction.lag.ms: a dirty record older than this forces a clean.", minimum=1,
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
    max_connections_per_ip: int = _setting(
        "max.connections.per.ip", INT_MAX,
        "Connections accepted at once from one IP address; more are closed at once.", minimum=0,
    )
    queued_max_requests: int = _setting(
        "queued.max.requests", 500,
        "Requests being served at once across all connections (those waiting, e.g. Fetch "
        "long-polls); at the limit no connection's further requests are read until one "
        "finishes.", minimum=1,
    )
    queued_max_request_bytes: int = _setting(
        "queued.max.request.bytes", -1,
        "Bytes of the requests being served at once across all connections; at the limit "
        "no further requests are read until one finishes (-1 = no limit).", minimum=-1,
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
    transaction_max_timeout_ms: int = _setting(
        "transaction.max.timeout.ms", 900000,
        "Largest transaction.timeout.ms a transactional producer may ask for "
        "(InitProducerId answers INVALID_TRANSACTION_TIMEOUT above it).", minimum=1,
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000,
        "How often transactions open longer than their timeout are aborted.", minimum=1,
    )
    offset_metadata_max_bytes: int = _setting(
        "offset.metadata.max.bytes", 4096, "Largest metadata string of a committed offset.",
        minimum=0,
    )
    # --- KIP-848 consumer groups (ConsumerGroupHeartbeat) ---
    group_consumer_session_timeout_ms: int = _setting(
        "group.consumer.session.timeout.ms", 45000,
        "A KIP-848 member that sends no heartbeat for this long is removed from its group.",
        minimum=1,
    )
    group_consumer_min_session_timeout_ms: int = _setting(
        "group.consumer.min.session.timeout.ms", 45000,
        "Lowest allowed group.consumer.session.timeout.ms.", minimum=1,
    )
    group_consumer_max_session_timeout_ms: int = _setting(
        "group.consumer.max.session.timeout.ms", 60000,
        "Highest allowed group.consumer.session.timeout.ms.", minimum=1,
    )
    group_consumer_heartbeat_interval_ms: int = _setting(
        "group.consumer.heartbeat.interval.ms", 5000,
        "How often KIP-848 members are told to heartbeat.", minimum=1,
    )
    group_consumer_min_heartbeat_interval_ms: int = _setting(
        "group.consumer.min.heartbeat.interval.ms", 5000,
        "Lowest allowed group.consumer.heartbeat.interval.ms.", minimum=1,
    )
    group_consumer_max_heartbeat_interval_ms: int = _setting(
        "group.consumer.max.heartbeat.interval.ms", 15000,
        "Highest allowed group.consumer.heartbeat.interval.ms.", minimum=1,
    )
    group_consumer_max_size: int = _setting(
        "group.consumer.max.size", INT_MAX,
        "Most members a KIP-848 consumer group may have (GROUP_MAX_SIZE_REACHED beyond).",
        minimum=1,
    )
    group_consumer_assignors: str = _setting(
        "group.consumer.assignors", "uniform,range",
        "Server-side assignors KIP-848 members may name; the first is the default "
        "(short names or Kafka's class names).",
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
    # --- security: TLS (SSL and SASL_SSL listeners; listener.name.<name>.ssl.* overrides) ---
    ssl_keystore_type: str = _setting(
        "ssl.keystore.type", "JKS",
        "Key store format; Chronolog reads PEM only (set PEM for SSL listeners).",
        choices=("JKS", "PKCS12", "PEM"),
    )
    ssl_keystore_location: str = _setting(
        "ssl.keystore.location", "",
        "PEM file holding the private key (PKCS#8) and the certificate chain.",
    )
    ssl_keystore_password: str | None = _setting(
        "ssl.keystore.password", None, "Not used with PEM key stores (Kafka rejects it there).",
        nullable=True, sensitive=True,
    )
    ssl_keystore_key: str | None = _setting(
        "ssl.keystore.key", None, "The private key inline (PEM, PKCS#8).",
        nullable=True, sensitive=True,
    )
    ssl_keystore_certificate_chain: str = _setting(
        "ssl.keystore.certificate.chain", "", "The certificate chain inline (PEM).",
    )
    ssl_key_password: str | None = _setting(
        "ssl.key.password", None, "Password of an encrypted private key.",
        nullable=True, sensitive=True,
    )
    ssl_truststore_type: str = _setting(
        "ssl.truststore.type", "JKS",
        "Trust store format; Chronolog reads PEM only.", choices=("JKS", "PKCS12", "PEM"),
    )
    ssl_truststore_location: str = _setting(
        "ssl.truststore.location", "", "PEM file of the CA certificates that client certificates "
        "must chain to.",
    )
    ssl_truststore_certificates: str = _setting(
        "ssl.truststore.certificates", "", "The trusted CA certificates inline (PEM).",
    )
    ssl_truststore_password: str | None = _setting(
        "ssl.truststore.password", None, "Not used with PEM trust stores.",
        nullable=True, sensitive=True,
    )
    ssl_client_auth: str = _setting(
        "ssl.client.auth", "none",
        "Ask TLS clients for a certificate: none, requested (verified if sent) or required. "
        "On SASL_SSL only the listener-prefixed form applies, as in Kafka.",
        choices=("none", "requested", "required"),
    )
    ssl_enabled_protocols: str = _setting(
        "ssl.enabled.protocols", "TLSv1.2,TLSv1.3", "TLS versions accepted (TLSv1.2, TLSv1.3).",
    )
    ssl_protocol: str = _setting(
        "ssl.protocol", "TLSv1.3", "Accepted for compatibility; ssl.enabled.protocols decides.",
    )
    ssl_cipher_suites: str = _setting(
        "ssl.cipher.suites", "",
        "Cipher suites for TLS 1.2 (OpenSSL or IANA names); empty = OpenSSL's defaults. "
        "TLS 1.3 suites cannot be restricted from Python.",
    )
    ssl_principal_mapping_rules: str = _setting(
        "ssl.principal.mapping.rules", "DEFAULT",
        "Only DEFAULT: the principal of a TLS client is User:<its certificate's DN>.",
    )
    # --- security: SASL (listener.name.<name>.sasl.* and .<mech>.sasl.jaas.config overrides) ---
    sasl_enabled_mechanisms: str = _setting(
        "sasl.enabled.mechanisms", "GSSAPI",
        "SASL mechanisms offered: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default "
        "GSSAPI is not implemented: set this for SASL listeners).",
    )
    sasl_jaas_config: str | None = _setting(
        "sasl.jaas.config", None,
        "JAAS for PLAIN: org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_NAME="password" ...;', nullable=True, sensitive=True,
    )
    sasl_server_max_receive_size: int = _setting(
        "sasl.server.max.receive.size", 524288,
        "Largest SASL token accepted before authentication.", minimum=1,
    )
    connections_max_reauth_ms: int = _setting(
        "connections.max.reauth.ms", 0,
        "Lifetime of a SASL session (KIP-368): clients re-authenticate before it ends, a "
        "connection that does not is closed at its next request (0 = forever).", minimum=0,
    )
    connection_failed_authentication_delay_ms: int = _setting(
        "connection.failed.authentication.delay.ms", 100,
        "Delay the answer and the close after a failed authentication.", minimum=0,
    )
    sasl_kerberos_min_time_before_relogin: int = _setting(
        "sasl.kerberos.min.time.before.relogin", 60000,
        "Kerberos login thread sleep between refreshes. Kept, reported and dynamically "
        "settable as in Kafka (admin tools set it), but without effect: GSSAPI is not "
        "implemented.", minimum=0,
    )

    def __post_init__(self) -> None:
        # listener.name.<name>.<setting> overrides, as given (not a field: every field
        # is one Kafka-named setting; these names are open-ended).
        self.listener_overrides: dict[str, str] = {}
        # rsm.config.<name> settings (the remote storage manager's, KIP-405's
        # remote.log.storage.manager.impl.prefix), as given, prefix included: passed to
        # storage.remote.store.open_store without the prefix (``rsm_options``).
        self.rsm_config: dict[str, str] = {}
        # ``chronolog serve --read-replica URL``: serve the bucket at URL read-only
        # (broker/read_replica.py); empty for a normal broker.
        self.read_replica: str = ""
    # --- tiered storage (KIP-405; broker/tier.py, storage/remote/) ---
    remote_log_storage_system_enable: bool = _setting(
        "remote.log.storage.system.enable", False,
        "Turn the remote tier on: topics with remote.storage.enable=true copy sealed "
        "segments to the object store named by rsm.config.url and serve reads below the "
        "local log start from it.",
    )
    remote_log_manager_task_interval_ms: int = _setting(
        "remote.log.manager.task.interval.ms", 30000,
        "How often the remote-log-manager task copies eligible segments and applies local "
        "and remote retention; a read replica re-reads the bucket's manifests this often.",
        minimum=1,
    )
    remote_log_manager_task_retry_backoff_ms: int = _setting(
        "remote.log.manager.task.retry.backoff.ms", 500,
        "First wait before retrying a partition whose copy or delete failed.", minimum=1,
    )
    remote_log_manager_task_retry_backoff_max_ms: int = _setting(
        "remote.log.manager.task.retry.backoff.max.ms", 30000,
        "Longest wait between retries (the wait doubles after each failure up to this).",
        minimum=1,
    )
    remote_log_manager_task_retry_jitter: float = _setting(
        "remote.log.manager.task.retry.jitter", 0.2,
        "Random share (0 .. 0.5) added to or taken from each retry wait.",
    )
    remote_log_index_file_cache_total_size_bytes: int = _setting(
        "remote.log.index.file.cache.total.size.bytes", 1073741824,
        "Bytes of remote segments' index files kept on local disk for lookups "
        "(least recently used dropped first).", minimum=1,
    )
    remote_log_chunk_cache_total_size_bytes: int = _setting(
        "remote.log.chunk.cache.total.size.bytes", 1073741824,
        "Bytes of remote segments' data kept on local disk in 4 MiB chunks for reads and "
        "lookups below the local log start (least recently used dropped first).", minimum=1,
    )
    log_local_retention_ms: int = _setting(
        "log.local.retention.ms", -2,
        "Default local.retention.ms: how long copied segments stay on local disk "
        "(-2 = retention.ms, -1 = forever).", minimum=-2,
    )
    log_local_retention_bytes: int = _setting(
        "log.local.retention.bytes", -2,
        "Default local.retention.bytes: local size kept per partition once copied "
        "(-2 = retention.bytes, -1 = no limit).", minimum=-2,
    )
    # --- authorization and quotas ---
    authorizer_class_name: str = _setting(
        "authorizer.class.name", "",
        "Empty = no authorization; org.apache.kafka.metadata.authorizer.StandardAuthorizer "
        "turns on Kafka's ACLs (kafka.security.authorizer.AclAuthorizer is accepted as the same).",
        choices=("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "kafka.security.authorizer.AclAuthorizer"),
    )
    super_users: str = _setting(
        "super.users", "", "Principals allowed everything, ';'-separated (User:admin;User:ops)."
    )
    allow_everyone_if_no_acl_found: bool = _setting(
        "allow.everyone.if.no.acl.found", False,
        "With an authorizer: allow an operation on a resource that has no ACL at all.",
    )
    quota_window_num: int = _setting(
        "quota.window.num", 11, "Samples kept for client quota rates.", minimum=1
    )
    quota_window_size_seconds: int = _setting(
        "quota.window.size.seconds", 1, "Length of one client quota sample.", minimum=1
    )

    # ------------------------------------------------------------------ loading

    @classmethod
    def settings(cls) -> dict[str, dataclasses.Field[Any]]:
        """Kafka name -> dataclass field, for every setting."""
        return {f.metadata["kafka"]: f for f in dataclasses.fields(cls)}

    @classmethod
    def from_properties(cls, values: Mapping[str, str], *, read_replica: str = "") -> BrokerConfig:
        """Build from Kafka-named string values; unknown names or bad values raise ConfigError.

        ``read_replica``: the bucket URL of ``--read-replica`` (it becomes ``rsm.config.url``).
        """
        known = cls.settings()
        kwargs: dict[str, Any] = {}
        prefixed: dict[str, str] = {}
        rsm: dict[str, str] = {}
        for name, raw in values.items():
            if name.startswith(LISTENER_PREFIX):
                prefixed[name] = raw.strip()
                continue
            if name.startswith(RSM_PREFIX):
                rsm[name] = raw.strip()
                continue
            f = known.get(name)
            if f is None:
                raise ConfigError(f"unknown broker setting {name!r}")
            kwargs[f.name] = _parse(name, f, raw)
        cfg = cls(**kwargs)
        cfg.listener_overrides = prefixed
        cfg.rsm_config = rsm
        cfg.read_replica = read_replica
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
        read_replica: str | None = None,
    ) -> BrokerConfig:
        """The command line's view: a properties file, then ``name=value`` overrides, then flags."""
        values: dict[str, str] = {}
        if properties_file is not None:
            values.update(read_properties(Path(properties_file)))
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                # Not echoed: the text may be a secret given in the wrong form.
                raise ConfigError("--override expects name=value, got text without '='")
            values[name.strip()] = value.strip()
        if data_dir is not None:
            values["log.dirs"] = data_dir
        given = parse_listener_items(values.get("listeners", cls.listeners))
        if (host is not None or port is not None) and len(given) == 1 and given[0][0] == "PLAINTEXT":
            # --host/--port: the shorthand for one PLAINTEXT listener. ``listeners`` naming
            # several listeners or a secure one wins over them.
            _, cur_host, cur_port = given[0]
            values["listeners"] = (
                f"PLAINTEXT://{host if host is not None else cur_host}:"
                f"{port if port is not None else cur_port}"
            )
        if read_replica:
            values[RSM_PREFIX + "url"] = read_replica
        return cls.from_properties(values, read_replica=read_replica or "")

    def validate(self) -> None:
        from broker.security.listeners import check_listener_settings

        check_listener_settings(self)
        if "," in self.log_dirs:
            raise ConfigError("log.dirs: Chronolog uses one data directory, got a list")
        if self.udp_listeners:
            for item in self.udp_listeners.split(","):
                parse_host_port(item.strip(), "udp.listeners")
        if self.metrics_listener:
            parse_host_port(self.metrics_listener, "metrics.listener")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if not 0.0 <= self.log_cleaner_io_buffer_load_factor <= 1.0:
            raise ConfigError("log.cleaner.io.buffer.load.factor: must be in [0, 1]")
        if self.log_cleaner_io_max_bytes_per_second <= 0:
            raise ConfigError("log.cleaner.io.max.bytes.per.second: must be above 0")
        self._validate_remote()
        self.topic_config()  # the broker defaults must make a valid topic config
        self._validate_consumer_groups()

    def _validate_remote(self) -> None:
        """Kafka's RemoteLogManagerConfig and LogConfig.validateBrokerLogConfigValues checks."""
        if not 0.0 <= self.remote_log_manager_task_retry_jitter <= 0.5:
            raise ConfigError("remote.log.manager.task.retry.jitter: must be in [0, 0.5], got "
                              f"{self.remote_log_manager_task_retry_jitter}")
        if self.remote_log_manager_task_retry_backoff_ms > self.remote_log_manager_task_retry_backoff_max_ms:
            raise ConfigError("remote.log.manager.task.retry.backoff.ms must not exceed "
                              "remote.log.manager.task.retry.backoff.max.ms")
        if self.read_replica:
            # A read replica serves the tier only: tiering is on by definition, and a
            # Metadata request must not create a topic the bucket does not have.
            self.remote_log_storage_system_enable = True
            self.auto_create_topics_enable = False
        if self.remote_log_storage_system_enable:
            check_local_retention("ms", self.retention_ms, self.log_local_retention_ms,
                                  "log.retention.ms", "log.local.retention.ms")
            check_local_retention("bytes", self.log_retention_bytes, self.log_local_retention_bytes,
                                  "log.retention.bytes", "log.local.retention.bytes")
            scheme = self.remote_url.partition("://")[0]
            if scheme not in ("file", "s3"):
                raise ConfigError(f"rsm.config.url: expected file:///a/dir or s3://bucket/prefix, "
                                  f"got {self.remote_url!r}")

    @property
    def rsm_options(self) -> dict[str, str]:
        """The rsm.config.* settings without the prefix, with ``url`` always set (what
        ``storage.remote.store.open_store`` takes)."""
        out = {k[len(RSM_PREFIX):]: v for k, v in self.rsm_config.items()}
        out["url"] = self.remote_url
        return out

    @property
    def remote_url(self) -> str:
        """``rsm.config.url``, or by default ``file://<log.dirs>-remote``: a directory beside
        the data directory (not inside it, where every subdirectory is read as a
        partition), so the embedded case needs no server and no setting."""
        url = self.rsm_config.get(RSM_PREFIX + "url", "")
        if url:
            return url
        return "file://" + str(Path(self.log_dirs).resolve()) + "-remote"

    def _validate_consumer_groups(self) -> None:
        """Kafka's GroupCoordinatorConfig checks for the KIP-848 settings."""
        for what, value, lo, hi in (
            ("group.consumer.session.timeout.ms", self.group_consumer_session_timeout_ms,
             self.group_consumer_min_session_timeout_ms, self.group_consumer_max_session_timeout_ms),
            ("group.consumer.heartbeat.interval.ms", self.group_consumer_heartbeat_interval_ms,
             self.group_consumer_min_heartbeat_interval_ms,
             self.group_consumer_max_heartbeat_interval_ms),
        ):
            if not lo <= value <= hi:
                raise ConfigError(f"{what} must be between {lo} and {hi} (its min/max settings), got {value}")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be less than "
                              "group.consumer.session.timeout.ms")
        from broker.groups.assignors import assignor_names

        assignor_names(self.group_consumer_assignors)  # raises ConfigError for an unknown name

    # ------------------------------------------------------------------ derived

    @property
    def host(self) -> str:
        """The first listener's host."""
        return _first_listener(self.listeners)[0]

    @property
    def port(self) -> int:
        """The first listener's port."""
        return _first_listener(self.listeners)[1]

    def for_listener(self, listener: str, name: str) -> Any:
        """A setting as it applies on one listener: ``listener.name.<lower>.<name>`` if
        given (as text), else the broker-wide value."""
        override = self.listener_overrides.get(f"{LISTENER_PREFIX}{listener.lower()}.{name}")
        if override is not None:
            return override
        f = self.settings().get(name)
        return None if f is None else getattr(self, f.name)

    def is_sensitive(self, name: str) -> bool:
        """Whether a setting holds a secret (never logged, described or returned)."""
        if name.startswith(RSM_PREFIX):
            return name in RSM_SECRETS
        if name.startswith(LISTENER_PREFIX):
            return name.endswith("sasl.jaas.config") or any(
                name.endswith("." + n) for n, f in self.settings().items()
                if f.metadata["sensitive"])
        f = self.settings().get(name)
        return f is not None and bool(f.metadata["sensitive"])

    @property
    def data_dir(self) -> Path:
        return Path(self.log_dirs)

    def advertised(self) -> tuple[str, int]:
        """``advertised_host_port`` without a bound port (port 0 stays 0)."""
        return self.advertised_host_port(None)

    def advertised_host_port(self, bound_port: int | None = None,
                             listener: str | None = None) -> tuple[str, int]:
        """The (host, port) that Metadata tells a client of ``listener`` (default: the
        first) to connect to: its ``advertised.listeners`` entry if any, else the
        listener itself, with a wildcard host shown as 127.0.0.1 and port 0 replaced by
        the port actually bound."""
        from broker.security.listeners import advertised_address

        return advertised_address(self, listener, bound_port)

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
            "cleanup.policy": self.log_cleanup_policy,
            "delete.retention.ms": str(self.log_cleaner_delete_retention_ms),
            "min.compaction.lag.ms": str(self.log_cleaner_min_compaction_lag_ms),
            "max.compaction.lag.ms": str(self.log_cleaner_max_compaction_lag_ms),
            "min.cleanable.dirty.ratio": repr(float(self.log_cleaner_min_cleanable_ratio)),
        }

    def tiered_topic_defaults(self) -> dict[str, str]:
        """The remote tier's topic configs (KIP-405, KIP-950) with the default each topic
        gets: kept out of ``topic_defaults`` because a topic lists them only when set
        (local.retention.* inherit log.local.retention.*; -2 = the total retention's)."""
        return {
            "remote.storage.enable": "false",
            "local.retention.ms": str(self.log_local_retention_ms),
            "local.retention.bytes": str(self.log_local_retention_bytes),
            "remote.log.copy.disable": "false",
            "remote.log.delete.on.disable": "false",
        }

    def topic_config(self, overrides: Mapping[str, str] | None = None, *,
                     previous: Mapping[str, str] | None = None,
                     stored: bool = False) -> LogConfig:
        """The ``storage.config.LogConfig`` of a topic: broker defaults plus its overrides.

        Raises ConfigError for an unknown topic config name or a value storage rejects,
        and for remote-storage settings Kafka refuses (``check_remote_topic``):
        ``previous`` = the overrides being replaced (AlterConfigs), ``stored`` = read
        back from the topic registry at start.
        """
        from storage.config import LogConfig

        values = self.topic_defaults()
        # log.local.retention.* are the defaults of local.retention.*; passed only when
        # set, so a topic lists them (DescribeConfigs) as Kafka's UNLISTED rule expects.
        for local_name, local in (("local.retention.ms", self.log_local_retention_ms),
                                  ("local.retention.bytes", self.log_local_retention_bytes)):
            if local != -2:
                values[local_name] = str(local)
        for name, value in (overrides or {}).items():
            check_topic_config(name, value)
            values[name] = value
        self.check_remote_topic(values, previous, stored=stored)
        try:
            return LogConfig.from_kafka(values)
        except ValueError as exc:
            raise ConfigError(f"invalid topic config: {exc}") from exc

    def describe(self) -> dict[str, str]:
        """Kafka name -> current value as text (for logs and docs); secrets are masked."""
        out = {}
        for name, f in self.settings().items():
            value = getattr(self, f.name)
            if f.metadata["sensitive"] and value is not None:
                out[name] = SECRET_MASK
                continue
            out[name] = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
        for name, value in sorted({**self.listener_overrides, **self.rsm_config}.items()):
            out[name] = SECRET_MASK if self.is_sensitive(name) else value
        return out


    def local_retention(self, values: Mapping[str, str]) -> tuple[int, int]:
        """(local.retention.ms, local.retention.bytes) of a topic's configs (overrides
        over ``topic_defaults``), each -2 resolved to the total retention as Kafka does."""
        ms = int(values.get("local.retention.ms", self.log_local_retention_ms))
        size = int(values.get("local.retention.bytes", self.log_local_retention_bytes))
        return (int(values.get("retention.ms", self.retention_ms)) if ms == -2 else ms,
                int(values.get("retention.bytes", self.log_retention_bytes)) if size == -2 else size)

    def check_remote_topic(self, values: Mapping[str, str], previous: Mapping[str, str] | None,
                           *, stored: bool = False) -> None:
        """Kafka's LogConfig rules for remote.storage.enable and its companions, with
        Kafka's messages (LogConfig.validateTopicLogConfigValues,
        validateTurningOffRemoteStorageWithDelete,
        validateRetentionConfigsWhenRemoteCopyDisabled)."""
        enabled = flag(values, "remote.storage.enable")
        if previous is not None and flag(previous, "remote.storage.enable") and not enabled \
                and not flag(values, "remote.log.delete.on.disable"):
            raise ConfigError(
                "It is invalid to disable remote storage without deleting remote data. If you "
                "want to keep the remote data and turn to read only, please set "
                "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to "
                "disable remote storage and delete all remote data, please set "
                "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")
        if not enabled:
            return
        if not self.remote_log_storage_system_enable:
            raise ConfigError(
                "You have to delete all topics with the property remote.storage.enable=true "
                "before disabling tiered storage cluster-wide" if stored else
                "Tiered Storage functionality is disabled in the broker. Topic cannot be "
                "configured with remote log storage.")
        if "compact" in values.get("cleanup.policy", "delete").lower():
            raise ConfigError("Remote log storage is unsupported for the compacted topics")
        local_ms = int(values.get("local.retention.ms", self.log_local_retention_ms))
        local_bytes = int(values.get("local.retention.bytes", self.log_local_retention_bytes))
        total_ms = int(values.get("retention.ms", self.retention_ms))
        total_bytes = int(values.get("retention.bytes", self.log_retention_bytes))
        check_local_retention("bytes", total_bytes, local_bytes, "retention.bytes",
                              "local.retention.bytes")
        check_local_retention("ms", total_ms, local_ms, "retention.ms", "local.retention.ms")
        if flag(values, "remote.log.copy.disable"):
            for unit, total, local in (("bytes", total_bytes, local_bytes), ("ms", total_ms, local_ms)):
                if local != -2 and local != total:
                    raise ConfigError(
                        f"When `remote.log.copy.disable` is set to true, the `local.retention.{unit}` "
                        f"and `retention.{unit}` must be set to the identical value because there "
                        "will be no more logs copied to the remote storage.")


def flag(values: Mapping[str, str], name: str) -> bool:
    """A boolean topic config (checked by ``check_topic_config``); absent = false."""
    return values.get(name, "false").strip().lower() == "true"


def check_local_retention(unit: str, total: int, local: int, total_name: str, local_name: str) -> None:
    """Kafka's validateRemoteStorageRetentionSize / ...Time: local retention is -2 (inherit)
    or at most the total one (which must then not be unlimited locally)."""
    unlimited = -1
    if total == unlimited or local == -2:
        return
    if local == -1:
        raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value must not "
                          f"be -1 as {total_name} value is set as {total}.")
    if local > total:
        raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value must not "
                          f"be more than {total_name} property value: {total}")


#: Topic configs of the remote tier that are booleans / longs of at least -2.
REMOTE_TOPIC_BOOLEANS = ("remote.storage.enable", "remote.log.copy.disable",
                         "remote.log.delete.on.disable")
LOCAL_RETENTION_TOPIC = ("local.retention.ms", "local.retention.bytes")


def check_topic_config(name: str, value: str | None) -> None:
    """Raise ConfigError unless ``name`` is a Kafka topic config and ``value`` fits it."""
    from storage.config import LogConfig

    if value is None:
        raise ConfigError(f"Null value not supported for topic config {name}")
    if name in REMOTE_TOPIC_BOOLEANS and value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"Invalid value {value} for configuration {name}: Expected value to be "
                          "either true or false")
    if name in LOCAL_RETENTION_TOPIC:
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Not a number of "
                              "type LONG") from None
        if number < -2:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at "
                              "least -2")
    if name == "cleanup.policy":
        bad = [v for v in value.split(",") if v.strip() not in CLEANUP_POLICIES]
        if bad:
            raise ConfigError(f"Invalid value {value} for configuration cleanup.policy: String must "
                              f"be one of: {', '.join(CLEANUP_POLICIES)}")
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
    if str(f.type).startswith("str"):  # text (nullable text: None when empty), never a number
        if meta["choices"] and raw not in meta["choices"]:
            raise ConfigError(f"{name}: must be one of {', '.join(meta['choices'])}, got {raw!r}")
        return raw
    if isinstance(default, bool):
        low = raw.lower()
        if low not in ("true", "false"):
            raise ConfigError(f"{name}: expected true or false, got {raw!r}")
        return low == "true"
    if isinstance(default, float):
        try:
            number = float(raw)
        except ValueError:
            raise ConfigError(f"{name}: expected a number, got {raw!r}") from None
        if not number >= 0.0:
            raise ConfigError(f"{name}: must be at least 0, got {raw}")
        return number
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


_LISTENER = re.compile(r"^(?:(?P<proto>[A-Za-z0-9_]+)://)?(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")
#: Prefix of the remote storage manager's settings (Kafka's remote.log.storage.manager.impl.prefix).
RSM_PREFIX = "rsm.config."
#: rsm.config.* settings holding a secret (never logged, described or returned).
RSM_SECRETS = frozenset({RSM_PREFIX + "s3.secret.access.key"})
#: Prefix of per-listener overrides (``listener.name.<name>.<setting>``).
LISTENER_PREFIX = "listener.name."
#: What a secret's value is shown as wherever settings are printed.
SECRET_MASK = "[hidden]"


def parse_listener_items(value: str, what: str = "listeners") -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` (or ``host:port``, meaning PLAINTEXT) -> [(NAME, host, port)]."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None:
            raise ConfigError(f"{what}: expected PLAINTEXT://host:port (or NAME://host:port), got {item!r}")
        port = int(m.group("port"))
        if not 0 <= port <= 65535:
            raise ConfigError(f"{what}: port {port} out of range")
        out.append(((m.group("proto") or "PLAINTEXT").upper(), m.group("host").strip("[]"), port))
    return out


def _first_listener(value: str) -> tuple[str, int]:
    items = parse_listener_items(value)
    if not items:
        raise ConfigError("listeners: no listener given")
    return items[0][1], items[0][2]


def parse_listener(value: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` (or ``host:port``) -> (host, port); exactly one listener."""
    items = parse_listener_items(value)
    if len(items) != 1:
        raise ConfigError(f"listeners: expected exactly one listener, got {value!r}")
    return items[0][1], items[0][2]


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
            # The line itself is not echoed: it may hold a secret.
            raise ConfigError(f"{path}:{lineno}: expected name=value")
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
    parser.add_argument("--read-replica", default=None, metavar="URL",
                        help="serve the remote tier at URL (file:///dir or s3://bucket/prefix; "
                        "rsm.config.* settings apply) read-only, as a read replica")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="log lines as text or one JSON object per line")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
