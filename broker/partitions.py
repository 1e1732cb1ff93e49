"""Topics and partitions over one ``storage.logdir.LogDir``.

Invariants:
- A topic exists when it is in the registry (``<data>/__chronolog/topics.json``,
  rewritten atomically on every change): its partition count and its config
  overrides (Kafka topic config names). Partition logs found on disk without a
  registry entry (a data dir written by Kafka or by an older Chronolog) are
  adopted as topics with broker defaults, so nothing on disk is ever hidden.
- A topic's ``LogConfig`` is always ``BrokerConfig.topic_config(overrides)``;
  the logs are given it when opened and when it changes.
- ``append`` is synchronous from the idempotence check to the producer-state
  update, so no other batch of the partition can slip in between (the event
  loop is single-threaded): a retried idempotent batch is appended once.
- Every append wakes the Fetch long-polls waiting on that partition; nothing
  else does, except shutdown (``wake_all``), which lets long-polls answer early.
- The high watermark is the log end offset (one replica); nothing beyond it is
  ever returned to a consumer.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig, ConfigError
from broker.dynamic_config import DynamicBrokerConfigs
from broker.group_commit import GroupCommit
from broker.groups.store import GroupStore, store_for
from broker.metrics import METRICS
from broker.producers import ProducerStateManager
from broker.retention_notice import OldTimestampRetention
from protocol.errors import ErrorCode, KafkaError
from storage.config import LogConfig
from storage.fsutil import atomic_write_text
from storage.log import AppendResult, Log
from storage.logdir import LogDir
from storage.records import BatchHeader, control_type
from storage.txnindex import TxnIndexEntry

log = logging.getLogger("chronolog.broker")

STATE_DIR = "__chronolog"
TOPICS_FILE = "topics.json"
META_FILE = "meta.properties"
MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_PARTITIONS = 10_000


def validate_topic_name(name: str | None) -> str:
    """Kafka's ``Topic.validate``: 1..249 chars of [a-zA-Z0-9._-], not "." or ".."."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters",
        )
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )
    return name


@dataclass
class Topic:
    """A topic as the registry records it."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    log_config: LogConfig | None = None


class PartitionManager:
    """Owns the data directory while the broker runs; see the module docstring."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.data_dir = Path(config.log_dirs)
        self.state_dir = self.data_dir / STATE_DIR
        self.topics: dict[str, Topic] = {}
        self.logdir: LogDir | None = None
        self.producers: ProducerStateManager | None = None
        self._waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = {}
        # Set by the broker: how a woken long-poll gets its turn (broker/pump.py).
        self.defer_wake: Callable[[Callable[[], None]], None] | None = None
        self._unflushed: dict[tuple[str, int], int] = {}
        self._last_flush_ms: dict[tuple[str, int], int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._default_log_config = config.topic_config()
        self.dynamic = DynamicBrokerConfigs(self.state_dir, config)
        self._metrics = METRICS
        self.cluster_id = ""
        # Partitions whose newest batches may lack lookup summaries (see summarize_step).
        self._unsummarised: set[tuple[str, int]] = set()
        # Partitions an event-time request has asked since the start: only theirs are
        # sorted-timestamp indexed in the background (see event_time_ready).
        self._event_time: set[tuple[str, int]] = set()
        # Partitions whose roll fsyncs run on a worker thread right now (one at a time each).
        self._roll_flushing: set[tuple[str, int]] = set()
        # fsyncs owed to flush.messages, batched per event-loop pass (made on first use).
        self._commit: GroupCommit | None = None
        # Set by the transaction coordinator: raises KafkaError unless (topic, partition,
        # producer id, epoch) belongs to an ongoing transaction (KIP-890 part 1's check).
        self.txn_verifier: Any = None
        # Says once per partition when retention deletes just-written old-timestamped data.
        self._old_timestamps = OldTimestampRetention()

    # ------------------------------------------------------------ lifecycle

    def open(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Load the registry, open every log (recovering after a crash), restore producer state."""
        self._loop = loop
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._read_or_create_meta()
        self.dynamic.load()  # before any topic config is derived from the broker defaults
        self._default_log_config = self.config.topic_config()
        self.topics = self._read_registry()
        started = time.monotonic()
        self.logdir = LogDir(self.data_dir, self._default_log_config, config_for=self._config_for)
        adopted = False
        for (topic, partition) in sorted(self.logdir.logs()):
            t = self.topics.get(topic)
            if t is None:
                log.warning("adopting topic %r found on disk without a registry entry", topic)
                t = self.topics[topic] = Topic(topic, 0, {}, self._default_log_config)
                adopted = True
            if partition >= t.partitions:
                t.partitions = partition + 1
                adopted = True
        for t in self.topics.values():
            for p in range(t.partitions):
                self.logdir.get_or_create(t.name, p, self.log_config(t.name))
        if adopted:
            self._write_registry()
        self.producers = ProducerStateManager(
            self.state_dir, producer_id_expiration_ms=self.config.producer_id_expiration_ms
        )
        for (topic, partition), plog in self.logdir.logs().items():
            self.producers.restore_partition(
                topic, partition, plog.log_start_offset, plog.log_end_offset,
                functools.partial(_headers_from, plog),
                functools.partial(_control_type_of, plog),
            )
            # The .txnindex files say what the log says (storage/txnindex.py).
            rewritten = plog.sync_aborted_txns(self.producers.aborted_list(topic, partition))
            if rewritten:
                log.info("rewrote %d .txnindex file(s) of %s-%d from the log",
                         rewritten, topic, partition)
        for (topic, partition), plog in sorted(self.logdir.logs().items()):
            if plog.recovered_bytes_cut:
                log.warning(
                    "recovery of %s-%d removed a damaged or torn tail of %d bytes; "
                    "the log now ends at offset %d",
                    topic, partition, plog.recovered_bytes_cut, plog.log_end_offset,
                )
        now = int(time.time() * 1000)
        for key in self.logdir.logs():
            self._last_flush_ms[key] = now
            self._unsummarised.add(key)
        log.info(
            "opened %d topics, %d partitions in %s in %.2f s%s",
            len(self.topics), len(self.logdir.logs()), self.data_dir, time.monotonic() - started,
            "" if self.logdir.clean_shutdown or not self.logdir.logs()
            else " (no clean-shutdown marker: logs were recovered)",
        )

    def close(self) -> None:
        """Snapshot producer state, then seal every log and write the clean-shutdown marker."""
        self.wake_all()
        if self.logdir is None:
            return
        if self.producers is not None:
            ends = {k: plog.log_end_offset for k, plog in self.logdir.logs().items()}
            try:
                self.producers.write_snapshot(ends)
            except OSError:
                log.exception("producer state snapshot not written; it will be rebuilt from the logs")
        self.logdir.close()
        self.logdir = None

    # ------------------------------------------------------------ registry

    def _registry_path(self) -> Path:
        return self.state_dir / TOPICS_FILE

    def _read_registry(self) -> dict[str, Topic]:
        path = self._registry_path()
        if not path.exists():
            return {}
        try:
            doc = json.loads(path.read_text())
            out: dict[str, Topic] = {}
            for entry in doc["topics"]:
                name = str(entry["name"])
                configs = {str(k): str(v) for k, v in entry.get("configs", {}).items()}
                out[name] = Topic(name, int(entry["partitions"]), configs,
                                  self.config.topic_config(configs, stored=True))
            return out
        except (ValueError, KeyError, TypeError, ConfigError) as exc:
            raise RuntimeError(f"topic registry {path} is unreadable: {exc}") from exc

    def _write_registry(self) -> None:
        doc = {
            "version": 1,
            "topics": [
                {"name": t.name, "partitions": t.partitions, "configs": t.configs}
                for t in sorted(self.topics.values(), key=lambda t: t.name)
            ],
        }
        atomic_write_text(self._registry_path(), json.dumps(doc, indent=1, sort_keys=True))

    def _read_or_create_meta(self) -> str:
        """The cluster id from ``meta.properties`` (Kafka's file), written on first start."""
        path = self.data_dir / META_FILE
        if path.exists():
            for line in path.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and key.strip() == "cluster.id" and value.strip():
                    return value.strip()
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        text = (
            "#Written by Chronolog\n"
            f"cluster.id={cluster_id}\nnode.id={self.config.node_id}\nversion=1\n"
        )
        atomic_write_text(path, text)
        return cluster_id

    def _config_for(self, topic: str) -> LogConfig | None:
        t = self.topics.get(topic)
        return t.log_config if t is not None else None

    # ------------------------------------------------------------ topics

    def log_config(self, topic: str) -> LogConfig:
        t = self.topics.get(topic)
        if t is None or t.log_config is None:
            return self._default_log_config
        return t.log_config

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic``; 0 when it does not exist."""
        t = self.topics.get(topic)
        return t.partitions if t is not None else 0

    def topic_id(self, topic: str) -> bytes:
        """The topic's persistent id (``partition.metadata``); zeros if it does not exist."""
        topic_id = self.logdir.topic_id(topic) if self.logdir is not None else None
        return topic_id if topic_id is not None else bytes(16)

    def topic_by_id(self, topic_id: bytes) -> str | None:
        """The name of the topic with ``topic_id``; None if there is none."""
        if self.logdir is None:
            return None
        name = self.logdir.topic_by_id(topic_id)
        return name if name in self.topics else None

    def has_partition(self, topic: str, partition: int) -> bool:
        return 0 <= partition < self.partition_count(topic)

    def topic_names(self) -> list[str]:
        return sorted(self.topics)

    def resolve_create(
        self, name: str, num_partitions: int, replication_factor: int,
        configs: dict[str, str | None],
    ) -> tuple[int, LogConfig, dict[str, str]]:
        """Validate a CreateTopics entry; returns (partitions, log config, overrides).

        Raises KafkaError with Kafka's code (17, 36, 37, 38, 40) and a message.
        """
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        partitions = self.config.num_partitions if num_partitions == -1 else num_partitions
        if partitions <= 0 or partitions > MAX_PARTITIONS:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {num_partitions}.",
            )
        rf = self.config.default_replication_factor if replication_factor == -1 else replication_factor
        if rf <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default.")
        if rf > 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor "
                f"of {rf} cannot be reached because only 1 broker(s) are registered.",
            )
        overrides: dict[str, str] = {}
        for key, value in configs.items():
            if value is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Null value not supported for topic configs: {key}")
            overrides[key] = value
        try:
            log_config = self.config.topic_config(overrides)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return partitions, log_config, overrides

    def create_topic(
        self, name: str, num_partitions: int = -1, configs: dict[str, str | None] | None = None,
        replication_factor: int = -1,
    ) -> Topic:
        """Create a topic and its partition logs; raises KafkaError if it cannot be created."""
        assert self.logdir is not None, "partition manager is not open"
        partitions, log_config, overrides = self.resolve_create(
            name, num_partitions, replication_factor, configs or {}
        )
        t = Topic(name, partitions, overrides, log_config)
        self.topics[name] = t
        try:
            for p in range(partitions):
                self.logdir.get_or_create(name, p, log_config)
                self._last_flush_ms[(name, p)] = int(time.time() * 1000)
            self._write_registry()
        except BaseException:
            self.topics.pop(name, None)
            for p in range(partitions):
                self.logdir.delete(name, p)
            raise
        log.info("created topic %r with %d partitions%s", name, partitions,
                 f" and configs {overrides}" if overrides else "")
        return t

    def ensure_topic(self, name: str, num_partitions: int | None = None) -> Topic:
        """The topic, created with defaults if missing (auto-create and UDP ingest)."""
        t = self.topics.get(name)
        if t is not None:
            return t
        return self.create_topic(name, -1 if num_partitions is None else num_partitions)

    def auto_create(self, name: str) -> Topic | None:
        """Create ``name`` if auto.create.topics.enable allows; None when it does not."""
        if not self.config.auto_create_topics_enable:
            return None
        return self.ensure_topic(name)

    @property
    def group_offsets(self) -> GroupStore:
        """Committed offsets and group state, beside the other broker state files (opened on first use)."""
        return store_for(self.state_dir)

    def delete_topic(self, name: str) -> None:
        """Delete a topic, its logs and its producer state; raises KafkaError(3) if unknown."""
        assert self.logdir is not None, "partition manager is not open"
        t = self.topics.get(name)
        if t is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        # Logs first, registry last: a crash in between leaves the topic registered but
        # empty (recreated on start), never its deleted data adopted back.
        del self.topics[name]
        metrics = self._metrics
        for p in range(t.partitions):
            key = (name, p)
            self.logdir.delete(name, p)
            if self.producers is not None:
                self.producers.drop_partition(name, p)
            self._unflushed.pop(key, None)
            self._last_flush_ms.pop(key, None)
            for fut in self._waiters.pop(key, ()):
                if not fut.done():
                    fut.set_result(None)
            if metrics is not None:
                metrics.forget_partition(name, p)
        self._write_registry()
        # Kafka forgets a deleted topic's committed offsets; a topic recreated under
        # the same name must not resume from them.
        self.group_offsets.delete_topic(name)
        log.info("deleted topic %r (%d partitions)", name, t.partitions)

    # ------------------------------------------------------------ online changes (admin APIs)

    def alter_topic_configs(
        self, name: str, overrides: dict[str, str], *, validate_only: bool = False
    ) -> LogConfig:
        """Make ``overrides`` the topic's whole set of config overrides, without a restart:
        validated as CreateTopics validates them (INVALID_CONFIG, 40), written to the
        registry (atomic rename) and then handed to every partition log, so a new
        ``retention.ms`` counts at the next retention check and a new ``segment.bytes``
        at the next roll. Raises KafkaError 17 / 3 / 40."""
        validate_topic_name(name)
        t = self.topics.get(name)
        if t is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {name!r} does not exist on this broker")
        try:
            log_config = self.config.topic_config(overrides, previous=t.configs)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if validate_only:
            return log_config
        previous = (t.configs, t.log_config)
        t.configs, t.log_config = dict(overrides), log_config
        try:
            self._write_registry()
        except BaseException:
            t.configs, t.log_config = previous
            raise
        self._push_log_config(t)
        log.info("topic %r configs are now %s", name, t.configs)
        return log_config

    def alter_broker_configs(
        self, resource_name: str, values: dict[str, str], *, validate_only: bool = False
    ) -> None:
        """Replace one dynamic broker-config level ("" = cluster default, else this node's
        id): persisted first, then applied to the live config and to every topic that
        takes a default from it. Raises ConfigError for what Kafka refuses."""
        self.dynamic.replace(resource_name, values, validate_only=validate_only)
        if validate_only:
            return
        self._default_log_config = self.config.topic_config()
        for t in self.topics.values():
            t.log_config = self.config.topic_config(t.configs)
            self._push_log_config(t)
        if self.producers is not None:
            self.producers.producer_id_expiration_ms = self.config.producer_id_expiration_ms
        log.info("dynamic broker configs (%s) are now %s",
                 "cluster default" if resource_name == "" else f"broker {resource_name}", values)

    def _push_log_config(self, t: Topic) -> None:
        if self.logdir is None or t.log_config is None:
            return
        for p in range(t.partitions):
            plog = self.logdir.get(t.name, p)
            if plog is not None:
                plog.update_config(t.log_config)

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        """Grow ``name`` to ``count`` partitions (never shrink, as Kafka): the new logs are
        created, then the registry records the new count. Raises KafkaError 3 / 37."""
        assert self.logdir is not None, "partition manager is not open"
        t = self.topics.get(name)
        if t is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"This server does not host this topic ID or name: {name}")
        if count < t.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {t.partitions} partitions, which is higher "
                             f"than the requested {count}.")
        if count == t.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic already has {t.partitions} partitions.")
        if count > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions must be at most {MAX_PARTITIONS}, got {count}.")
        if validate_only:
            return
        before = t.partitions
        now = int(time.time() * 1000)
        for p in range(before, count):
            self.logdir.get_or_create(name, p, self.log_config(name))
            self._last_flush_ms[(name, p)] = now
        t.partitions = count
        try:
            self._write_registry()
        except BaseException:
            t.partitions = before  # the new (empty) logs are adopted back on the next start
            raise
        log.info("topic %r now has %d partitions (was %d)", name, count, before)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """KIP-107: move the log start of one partition up to ``offset`` (-1 = the high
        watermark), delete the segments wholly below it and checkpoint the new start at
        once; returns the log start afterwards (the answer's low watermark). A lower
        offset than the current start changes nothing. Raises KafkaError 3 / 1 / 44."""
        plog = self.get_log(topic, partition)
        policy = self.log_config(topic).to_kafka().get("cleanup.policy", "delete")
        if "delete" not in [p.strip() for p in policy.split(",")]:
            raise KafkaError(ErrorCode.POLICY_VIOLATION,
                             f"Records of partition {topic}-{partition} can not be deleted "
                             f"while cleanup.policy={policy}")
        hw = plog.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Cannot increment the log start offset to {offset} of partition "
                             f"{topic}-{partition} since it is larger than the high watermark {hw}")
        if target > plog.log_start_offset:
            plog.advance_log_start_offset(target)
            deleted = plog.delete_segments_below_log_start()
            if self.producers is not None:
                self.producers.on_log_start_moved(topic, partition, plog.log_start_offset)
            self.checkpoint()
            log.info("delete-records moved the log start of %s-%d to %d (%d segment(s) deleted)",
                     topic, partition, plog.log_start_offset, deleted)
        return plog.log_start_offset

    # ------------------------------------------------------------ partitions

    def logs(self) -> dict[tuple[str, int], Log]:
        """Every partition's log (the metrics collector reads this at scrape time)."""
        return self.logdir.logs() if self.logdir is not None else {}

    def get_log(self, topic: str, partition: int) -> Log:
        """The log of an existing partition, else KafkaError UNKNOWN_TOPIC_OR_PARTITION."""
        plog = self.logdir.get(topic, partition) if self.logdir is not None else None
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        return plog

    def append(
        self, topic: str, partition: int, batch: bytes | bytearray | memoryview,
        now_ms: int | None = None, syncs: list[asyncio.Future[None]] | None = None,
    ) -> AppendResult:
        """Append one client batch: idempotence check, validate + write, producer state, wake fetches.

        Raises KafkaError or a storage exception (mapped by broker.errors); on any
        error nothing was appended. A retried idempotent batch already in the log is
        answered with the original offsets and not appended again. When the append
        reaches the topic's ``flush.messages`` and the caller passes ``syncs``, the
        fsync joins the next group commit and its future is added to ``syncs`` (the
        caller answers once it completes); otherwise the log is flushed inline.
        """
        plog = self.get_log(topic, partition)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        producers = self.producers
        header: BatchHeader | None = None
        duplicate: AppendResult | None = None

        def producer_state(h: BatchHeader) -> AppendResult | None:
            # Runs inside Log.append once the batch is validated (CRC, counts,
            # timestamps) and before it is written, so a damaged batch gets its
            # record error, never a sequence error.
            nonlocal header, duplicate
            header = h
            if producers is not None and (h.producer_id >= 0 or h.attributes & 0x10):
                dup = producers.check_batch(topic, partition, h)
                if dup is None and h.attributes & 0x10 and self.txn_verifier is not None:
                    self.txn_verifier(topic, partition, h.producer_id, h.producer_epoch)
                if dup is not None:
                    duplicate = AppendResult(dup.base_offset, dup.last_offset, -1,
                                             dup.log_append_time_ms, plog.log_start_offset)
            return duplicate

        result = plog.append(batch, now_ms=now, precheck=producer_state)
        if duplicate is not None:
            return duplicate
        assert header is not None
        if producers is not None and header.producer_id >= 0:
            producers.record_batch(topic, partition, header, result.base_offset,
                                   result.log_append_time_ms, now_ms=now)
        key = (topic, partition)
        count = result.last_offset - result.base_offset + 1
        self._unsummarised.add(key)
        if plog.roll_flush_pending and key not in self._roll_flushing:
            self._start_roll_flush(key, plog)
        unflushed = self._unflushed.get(key, 0) + count
        if unflushed >= plog.config.flush_messages:
            commit = self._group_commit()
            if syncs is not None and commit is not None:
                syncs.append(commit.join(key, plog))
            else:
                plog.flush()
            unflushed = 0
            self._last_flush_ms[key] = now
        self._unflushed[key] = unflushed
        if self._metrics is not None:
            self._metrics.records_appended(topic, partition, count)
        waiters = self._waiters.pop(key, None)
        if waiters:
            self._wake(waiters)
        return result

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int, now_ms: int | None = None) -> int:
        """Append a COMMIT/ABORT marker to one partition, update the open/aborted
        transactions and wake fetches; returns its offset. The marker is flushed by
        the log's flush policy like any append, as Kafka appends markers: by default
        no fsync (the page cache survives kill -9); with ``flush.messages`` reached
        (e.g. 1) it is fsynced before this returns, so EndTxn is answered after it."""
        plog = self.get_log(topic, partition)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        result = plog.append_control(commit, producer_id=producer_id,
                                     producer_epoch=producer_epoch,
                                     coordinator_epoch=coordinator_epoch, now_ms=now)
        if self.producers is not None:
            aborted = self.producers.complete_txn(topic, partition, producer_id, producer_epoch,
                                                  commit, result.base_offset, now_ms=now,
                                                  coordinator_epoch=coordinator_epoch)
            if aborted is not None:
                plog.append_aborted_txn(aborted)
        key = (topic, partition)
        unflushed = self._unflushed.get(key, 0) + 1
        if unflushed >= plog.config.flush_messages:
            plog.flush()
            unflushed = 0
            self._last_flush_ms[key] = now
        self._unflushed[key] = unflushed
        self._unsummarised.add(key)
        waiters = self._waiters.pop(key, None)
        if waiters:
            self._wake(waiters)
        return result.base_offset

    def last_stable_offset(self, topic: str, partition: int, plog: Log) -> int:
        """The partition's LSO (the high watermark when no transaction is open)."""
        hw = plog.high_watermark
        producers = self.producers
        if producers is None:
            return hw
        return producers.last_stable_offset(topic, partition, hw, plog.log_start_offset)

    def _group_commit(self) -> GroupCommit | None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return None
        if self._commit is None:
            self._commit = GroupCommit(loop)
        return self._commit

    def _start_roll_flush(self, key: tuple[str, int], plog: Log) -> None:
        """fsync what a roll sealed on a worker thread, as Kafka's scheduled flush-log
        task does: the append that rolled is answered without waiting for the disk.
        Without a running loop (tools, tests) it is left to the next flush()."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            work = plog.take_roll_flush()
        except OSError:  # e.g. out of descriptors: the batch is appended; flush() syncs later
            log.exception("cannot start the fsync after rolling %s-%d", key[0], key[1])
            return
        if work is None:
            return
        self._roll_flushing.add(key)
        fut = loop.run_in_executor(None, work.run)

        def done(f: asyncio.Future[None]) -> None:
            self._roll_flushing.discard(key)
            exc = f.exception() if not f.cancelled() else None
            if f.cancelled() or exc is not None:
                log.error("fsync after rolling %s-%d failed; the next flush retries it",
                          key[0], key[1], exc_info=exc)
                plog.roll_flush_failed(work)
                return
            plog.roll_flush_done(work)
            if plog.roll_flush_pending and self.logdir is not None:
                self._start_roll_flush(key, plog)  # rolled again meanwhile

        fut.add_done_callback(done)

    # ------------------------------------------------------------ fetch waiters

    async def wait_for_append(self, keys: Iterable[tuple[str, int]], timeout_s: float) -> None:
        """Return after an append to any of ``keys``, after ``timeout_s``, or on shutdown."""
        if timeout_s <= 0:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        handle = loop.call_later(timeout_s, _resolve, fut)
        try:
            await fut
        finally:
            handle.cancel()
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(fut)
                    if not waiting:
                        del self._waiters[key]

    def _wake(self, waiters: set[asyncio.Future[None]]) -> None:
        """Wake the long-polls of one appended partition, through ``defer_wake`` when
        the broker paces them (its pump), else at once."""
        defer = self.defer_wake
        for fut in waiters:
            if defer is None:
                _resolve(fut)
            else:
                defer(functools.partial(_resolve, fut))

    def notify_grown(self, topic: str, partition: int) -> None:
        """Wake the long-polling fetches of a partition whose end moved without an
        append here (a read replica that saw a new remote segment)."""
        waiters = self._waiters.pop((topic, partition), None)
        if waiters:
            self._wake(waiters)

    def wake_all(self) -> None:
        """Wake every waiting long-poll (shutdown: they answer with what they have)."""
        waiters, self._waiters = self._waiters, {}
        for futs in waiters.values():
            for fut in futs:
                _resolve(fut)

    # ------------------------------------------------------------ background jobs

    def enforce_retention(self, now_ms: int) -> int:
        """One retention pass over every partition; returns segments deleted."""
        deleted = 0
        for (topic, partition), plog in self.logs().items():
            try:
                doomed = self._old_timestamps.before((topic, partition), plog, now_ms)
                n = plog.delete_old_segments(now_ms)
            except OSError:
                log.exception("retention failed for %s-%d", topic, partition)
                continue
            if n:
                self._old_timestamps.after((topic, partition), plog, doomed, n, now_ms)
                log.info("retention deleted %d segment(s) of %s-%d; log start is now %d",
                         n, topic, partition, plog.log_start_offset)
                if self.producers is not None:
                    # As Kafka on a log-start move: forget the aborted transactions
                    # wholly below the new start (producers stay until they expire).
                    self.producers.on_log_start_moved(topic, partition, plog.log_start_offset)
            deleted += n
        return deleted

    def flush_due(self, now_ms: int) -> int:
        """fsync partitions whose flush.ms elapsed since their last flush; returns how many."""
        flushed = 0
        for key, plog in self.logs().items():
            if self._unflushed.get(key, 0) == 0:
                continue
            if now_ms - self._last_flush_ms.get(key, 0) >= plog.config.flush_ms:
                plog.flush()
                self._unflushed[key] = 0
                self._last_flush_ms[key] = now_ms
                flushed += 1
        return flushed

    async def event_time_ready(self, topic: str, partition: int, *, sorted_index: bool) -> None:
        """Build what an event-time request reads before it reads it: the zone maps and
        disorder counts, and with ``sorted_index`` (CountTimeWindows) the sorted-timestamp
        indexes, in slices of EVENT_TIME_SLICE_MS with the event loop free between them:
        the resumable steps of the background task (summarize_step). Right after a start,
        a kill -9 without sidecars or a burst of appends, a first request would otherwise
        decode the .log in one go and hold every other connection meanwhile. Stops
        waiting after EVENT_TIME_WAIT_S (a partition appended to faster than it is
        indexed): the request then reads the rest from the .log itself.

        The sorted-timestamp index is built on demand: the first event-time request of
        a partition (since the start) marks it, and from then on the background step
        keeps its index up to date with appends. A partition nobody asks in event time
        costs no index work (decoding every record a second time after the append:
        0.4-0.7 µs of CPU a record, docs/benchmarks.md); a PlanTimeWindow before its
        index is built plans from the zone maps alone (exact, looser)."""
        key = (topic, partition)
        if self.logdir is None:
            return
        plog = self.logdir.get(topic, partition)
        if plog is None:
            return  # the handler answers UNKNOWN_TOPIC_OR_PARTITION
        if key not in self._event_time:
            self._event_time.add(key)
            self._unsummarised.add(key)  # the background step starts its index
        elif key not in self._unsummarised:
            return  # summarised and indexed since its last append: nothing to build
        deadline = time.monotonic() + EVENT_TIME_WAIT_S
        while not (plog.build_zone_maps(EVENT_TIME_SLICE_MS)
                   and (not sorted_index or plog.build_ts_indexes(EVENT_TIME_SLICE_MS))):
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(0)
            if self.logdir.get(topic, partition) is not plog:
                return  # deleted or recreated meanwhile

    def summarize_step(self, budget_ms: float) -> bool:
        """One slice of background work: load or rebuild timestamp zone maps (storage's
        ``Log.build_zone_maps``: the first event-time plan then reads no .log) and, for
        the partitions an event-time request has asked (event_time_ready), the
        sorted-timestamp indexes (``Log.build_ts_indexes``: CountTimeWindows then decodes
        only the newest blocks), then build
        block summaries of large batches (``Log.build_summaries``) so that even the first
        lookup in a 10,000-record batch walks one small block. Only partitions opened or
        appended to since they were last summarised are visited; at most one spends the
        budget per call. Returns True when every partition is summarised."""
        if not self._unsummarised or self.logdir is None:
            return True
        for key in sorted(self._unsummarised):
            plog = self.logdir.get(*key)
            if plog is None:
                self._unsummarised.discard(key)
                self._event_time.discard(key)
                continue
            # The indexes do not wait for the disorder counts (build_zone_maps' last step):
            # each part progresses on its own budget.
            zones = plog.build_zone_maps(budget_ms)
            indexed = key not in self._event_time or plog.build_ts_indexes(budget_ms)
            if not indexed or not zones or not plog.build_summaries(budget_ms):
                return False
            self._unsummarised.discard(key)
        return True

    def segments_replaced(self, key: tuple[str, int],
                          aborted: Iterable[tuple[int, int, list[TxnIndexEntry]]]) -> None:
        """The cleaner swapped segments of ``key`` in: summarise the new ones, and take
        each cleaned range's (low, high, entries) aborted transactions as what Fetch
        serves (storage/cleaner.py removes the entries whose data went)."""
        self._unsummarised.add(key)
        if self.producers is None:
            return
        for low, high, entries in aborted:
            self.producers.replace_aborted(key[0], key[1], low, high, entries)

    def checkpoint(self, now_ms: int | None = None) -> None:
        """Write the recovery-point and log-start-offset checkpoint files."""
        if self.logdir is not None:
            self.logdir.checkpoint()


#: event_time_ready's slice of work between two turns of the event loop, and how long
#: a request waits for the slices before reading what is left itself.
EVENT_TIME_SLICE_MS = 20.0
EVENT_TIME_WAIT_S = 30.0


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _control_type_of(plog: Log, header: Any) -> int | None:
    """The marker type of the control batch ``header`` heads (recovery replay)."""
    raw = plog.read(header.base_offset, header.batch_length + 12,
                    max_offset=header.base_offset + 1)
    return control_type(raw) if raw else None


def _headers_from(plog: Log, offset: int) -> Iterator[Any]:
    """Batch headers of ``plog`` in offset order, from the batch containing ``offset``."""
    for seg in plog.segments:
        if seg.next_offset <= offset:
            continue
        start = 0
        if seg.base_offset < offset:
            info = seg.find_batch(offset)
            if info is None:
                continue
            start = info.position
        for info in seg.iter_batches(start):
            yield info.header
