"""One Kafka-format data directory: every ``<topic>-<partition>`` log in it.

Layout (as Apache Kafka's ``LogManager``):
- ``<topic>-<partition>/`` one directory per partition log;
- ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``
  (see :mod:`storage.checkpoint`);
- ``<topic>-<partition>/partition.metadata``: the topic's id (see
  :mod:`storage.partition_metadata`); every partition of a topic holds the same
  id. A topic found without one (written by an older Chronolog) gets one new id
  on open, written into each of its directories; directories that disagree take
  the id of the topic's lowest partition that has one;
- ``remote-log-index-cache/``: indexes of remote segments (storage/remote/index_cache.py);
- ``.kafka_cleanshutdown``: written last by :meth:`LogDir.close` after every log was
  flushed and sealed; when present at startup recovery is skipped; it is deleted
  once the logs are open, so a crash from then on is treated as unclean.

Other files and directories are ignored; ``<topic>-<partition>.<id>-delete``
directories (a deletion interrupted by a crash) are removed.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from storage.checkpoint import read_checkpoint, write_checkpoint
from storage.config import LogConfig
from storage.fsutil import fsync_dir
from storage.log import Log
from storage.partition_metadata import new_topic_id, read_topic_id, write_topic_id
from storage.remote.index_cache import DIR_NAME as INDEX_CACHE_DIR
from storage.remote.index_cache import RemoteIndexCache

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"  # written by the broker's cleaner task

_PARTITION_DIR = re.compile(r"^([a-zA-Z0-9._-]+)-(\d+)$")
_DELETE_DIR = re.compile(r"^.+-\d+\.[0-9a-f]+-delete$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogDir:
    """Opens, creates, deletes and checkpoints the partition logs of one directory."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        default_config: LogConfig,
        *,
        config_for: Callable[[str], LogConfig | None] | None = None,
    ) -> None:
        """Open every partition log; ``config_for(topic)`` gives a topic's settings
        (None or a missing callable means ``default_config``)."""
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.default_config = default_config
        self._config_for = config_for
        self._logs: dict[tuple[str, int], Log] = {}
        self._topic_ids: dict[str, bytes] = {}
        self._topics_by_id: dict[bytes, str] = {}
        self._partition_counts: dict[str, int] = {}
        self._index_cache: RemoteIndexCache | None = None
        marker = self.path / CLEAN_SHUTDOWN_FILE
        self.clean_shutdown = marker.exists()
        recovery = read_checkpoint(self.path / RECOVERY_POINT_CHECKPOINT)
        starts = read_checkpoint(self.path / LOG_START_OFFSET_CHECKPOINT)
        cleaned = read_checkpoint(self.path / CLEANER_OFFSET_CHECKPOINT)
        for entry in sorted(os.scandir(self.path), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if _DELETE_DIR.match(entry.name):
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            m = _PARTITION_DIR.match(entry.name)
            if not m:
                continue
            key = (m.group(1), int(m.group(2)))
            self._logs[key] = Log(
                entry.path,
                self._config(key[0]),
                log_start_offset=starts.get(key),
                recovery_point=recovery.get(key),
                clean_shutdown=self.clean_shutdown,
                cleaned_offset=cleaned.get(key),
            )
        self._load_topic_ids()
        if marker.exists():
            marker.unlink()
        self._closed = False

    def _load_topic_ids(self) -> None:
        found: dict[str, bytes] = {}
        for (topic, _partition), log in sorted(self._logs.items()):
            self._partition_counts[topic] = self._partition_counts.get(topic, 0) + 1
            if topic not in found:
                topic_id = read_topic_id(log.dir)
                if topic_id is not None and topic_id not in self._topics_by_id:
                    found[topic] = topic_id
                    self._topics_by_id[topic_id] = topic
        for (topic, _partition), log in sorted(self._logs.items()):
            topic_id = found.get(topic)
            if topic_id is None:
                topic_id = found[topic] = self._new_id()
                self._topics_by_id[topic_id] = topic
            if read_topic_id(log.dir) != topic_id:
                write_topic_id(log.dir, topic_id)
        self._topic_ids = found

    def _new_id(self) -> bytes:
        while True:
            topic_id = new_topic_id()
            if topic_id not in self._topics_by_id:
                return topic_id

    def _config(self, topic: str) -> LogConfig:
        if self._config_for is not None:
            cfg = self._config_for(topic)
            if cfg is not None:
                return cfg
        return self.default_config

    # -- partitions -----------------------------------------------------------------
    def logs(self) -> dict[tuple[str, int], Log]:
        """Every open log by (topic, partition)."""
        return dict(self._logs)

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def topic_id(self, topic: str) -> bytes | None:
        """The topic's id (the same in every partition directory); None if it has no log."""
        return self._topic_ids.get(topic)

    def topic_by_id(self, topic_id: bytes) -> str | None:
        """The name of the topic with this id; None if no such topic is open."""
        return self._topics_by_id.get(bytes(topic_id))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The log of (topic, partition), created empty with ``config`` if missing; an
        existing log takes ``config`` when one is given."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            if not _PARTITION_DIR.match(partition_dir_name(topic, partition)):
                raise ValueError(f"illegal topic name {topic!r} or partition {partition}")
            log = Log(self.path / partition_dir_name(topic, partition),
                      config or self._config(topic))
            topic_id = self._topic_ids.get(topic)
            if topic_id is None:
                topic_id = self._topic_ids[topic] = self._new_id()
                self._topics_by_id[topic_id] = topic
            write_topic_id(log.dir, topic_id)
            self._logs[key] = log
            self._partition_counts[topic] = self._partition_counts.get(topic, 0) + 1
            fsync_dir(self.path)  # the new partition directory survives a power loss
        elif config is not None:
            log.update_config(config)
        return log

    def delete(self, topic: str, partition: int) -> bool:
        """Close and remove a partition log (renamed ``…-delete`` first, as Kafka)."""
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        for seg in log.segments:
            seg.release()
        doomed = self.path / f"{partition_dir_name(topic, partition)}.{uuid.uuid4().hex}-delete"
        os.replace(log.dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        self._partition_counts[topic] -= 1
        if not self._partition_counts[topic]:
            del self._partition_counts[topic]
            topic_id = self._topic_ids.pop(topic, None)  # a re-created topic gets a new id
            if topic_id is not None:
                self._topics_by_id.pop(topic_id, None)
        return True

    def remote_index_cache(self, budget_bytes: int) -> RemoteIndexCache:
        """The cache of remote segments' indexes (``remote-log-index-cache/`` in this
        directory, Kafka's place), bounded by
        ``remote.log.index.file.cache.total.size.bytes``; one per directory, shared by
        every partition's tier."""
        if self._index_cache is None:
            self._index_cache = RemoteIndexCache(self.path / INDEX_CACHE_DIR, budget_bytes)
        self._index_cache.budget = budget_bytes
        return self._index_cache

    # -- durability -------------------------------------------------------------------
    def checkpoint(self) -> None:
        """Write both checkpoint files from the logs' current recovery points and
        log start offsets (a start is recorded only when above the first segment, or
        always for a log with a remote tier, whose start may lie below it)."""
        recovery = {k: log.recovery_point for k, log in self._logs.items()}
        starts = {
            k: log.log_start_offset
            for k, log in self._logs.items()
            if log.segments and (log.log_start_offset > log.segments[0].base_offset
                                 or log.tier is not None)
        }
        write_checkpoint(self.path / RECOVERY_POINT_CHECKPOINT, recovery)
        write_checkpoint(self.path / LOG_START_OFFSET_CHECKPOINT, starts)

    def flush(self) -> None:
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        """Flush and seal every log, checkpoint, then write the clean-shutdown marker."""
        if self._closed:
            return
        for log in self._logs.values():
            log.close()
        self.checkpoint()
        marker = self.path / CLEAN_SHUTDOWN_FILE
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.path)
        self._closed = True
