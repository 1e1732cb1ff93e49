"""``chronolog serve --read-replica URL``: serve the topics of a remote tier read-only
(Redpanda's remote read replicas, over Chronolog's bucket layout).

A read replica owns no data: for every topic it finds in the bucket
(``topics/<topic>/topic.json``) it keeps an empty local log per partition that starts
where the tier ends, with the partition's remote tier attached, so Metadata, ListOffsets
(every special value and timestamps), Fetch, PlanTimeWindow / CountTimeWindows and the
console are served by the same handlers as on the leader, from the bucket.

Invariants:
- It never writes to the bucket, by construction: its store is opened read-only
  (``open_store(..., read_only=True)`` refuses every put and delete before a request
  goes out) and every tier is a read-only one (``RemoteTier.read_replica_of``: no
  recovery at open, so a copy the leader has not finished is left alone, and any
  write raises); only COPY_SEGMENT_FINISHED segments are ever read.
- Every ``remote.log.manager.task.interval.ms`` it re-reads the topic list and each
  partition's manifest (``RemoteTier.fetch_manifest``, in its thread pool): a newer
  manifest (higher generation) is taken on the event loop (``RemoteTier.follow``, no
  I/O): the local log moves to the new remote end (fetches parked on the partition
  wake) and a log start raised by the leader (retention, DeleteRecords) is taken
  over; a topic whose topic.json is gone (deleted on the leader) stops being served,
  and a topic.json with more partitions or other configs (the leader's
  CreatePartitions / AlterConfigs; the leader rewrites it at its next pass) grows the
  local topic and changes its configs. The topic list is a listing of ``topics/``
  (every object of the bucket: ``ObjectStore`` has no delimiter listing yet), the one
  cost that grows with the bucket.
- Writes are refused with POLICY_VIOLATION (44) and a log line: non-retriable, so a
  producer pointed at a replica fails at once with "policy violation" instead of
  retrying NOT_LEADER_OR_FOLLOWER until its delivery timeout (every client surfaces 44
  as a permanent error). Groups and offset commits work (consumer state is local).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from broker.config import ConfigError
from broker.dispatch import RequestContext, Route
from broker.tier import Key, RemoteLogManager
from protocol.errors import ErrorCode, KafkaError
from storage.remote import manifest as mf
from storage.remote.index_cache import DIR_NAME as INDEX_CACHE_DIR
from storage.remote.index_cache import RemoteIndexCache
from storage.remote.manifest import TopicManifest
from storage.remote.store import RemoteObjectNotFound, open_store
from storage.remote.tier import RemoteTier

log = logging.getLogger("chronolog.read_replica")

#: APIs that write (API key -> name): refused on a read replica.
WRITE_APIS = {
    0: "Produce", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords",
    22: "InitProducerId", 24: "AddPartitionsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    33: "AlterConfigs",
    37: "CreatePartitions", 43: "ElectLeaders", 44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
}


def read_only_routes(routes: dict[int, Route]) -> dict[int, Route]:
    """The routing table of a read replica: every write API answers POLICY_VIOLATION."""
    out = dict(routes)
    for key, name in WRITE_APIS.items():
        route = routes.get(key)
        if route is None or route.error_body is None:
            continue
        out[key] = Route(route.name, _refuse(name, route), route.error_body)
    return out


def _refuse(name: str, route: Route) -> Any:
    error_body = route.error_body
    assert error_body is not None

    async def handle(request: Any, ctx: RequestContext) -> Any:
        log.info("read replica: refused %s from %s (this broker serves %s read-only)",
                 name, ctx.peer, ctx.config.remote_url)
        return error_body(request, int(ErrorCode.POLICY_VIOLATION))

    return handle


class ReadReplica(RemoteLogManager):
    """Follows a bucket instead of copying to it (module docstring)."""

    async def open(self) -> None:
        #: topic -> the leader's configs this broker refused (warned about once)
        self._refused: dict[str, dict[str, str]] = {}
        loop = asyncio.get_running_loop()
        self.store = await loop.run_in_executor(
            self.executor, lambda: open_store(self.config.rsm_options, read_only=True))
        self.cache = RemoteIndexCache(Path(self.config.log_dirs) / INDEX_CACHE_DIR,
                                      self.config.remote_log_index_file_cache_total_size_bytes)
        self.chunks = self.open_chunk_cache()
        await self.follow()
        log.info("read replica of %s: %d topic(s), %d partition(s); following every %d ms",
                 self.config.remote_url, len({k[0] for k in self.tiers}), len(self.tiers),
                 self.config.remote_log_manager_task_interval_ms)

    async def run_once(self) -> int:
        self.passes += 1
        await self.follow()
        return 0

    async def follow(self) -> None:
        """One look at the bucket: new topics, new manifests."""
        loop = asyncio.get_running_loop()
        topics = await loop.run_in_executor(self.executor, self._read_topics)
        self._drop_gone({tm.topic for tm in topics})
        for tm in topics:
            if not self._ensure_topic(tm):
                continue
            for p in range(tm.partitions):
                key = (tm.topic, p)
                try:
                    await self._follow_partition(key)
                except Exception as exc:  # one bad partition must not stop the others
                    self._failed(key, exc)

    def _drop_gone(self, present: set[str]) -> None:
        """Topics the leader deleted (their topic.json is gone) stop being served."""
        for name in sorted({k[0] for k in self.tiers} - present):
            for key in [k for k in self.tiers if k[0] == name]:
                del self.tiers[key]
            if name in self.partitions.topics:
                self.partitions.delete_topic(name)
            log.info("read replica: %s is no longer in %s; not served any more", name,
                     self.config.remote_url)

    def _read_topics(self) -> list[TopicManifest]:
        assert self.store is not None
        out = []
        for obj in self.store.list("topics/"):
            if not obj.key.endswith("/topic.json") or obj.key.count("/") != 2:
                continue
            try:
                out.append(mf.decode_topic(self.store.get(obj.key)))
            except RemoteObjectNotFound:
                continue  # deleted between the list and the get
            except Exception as exc:
                log.warning("read replica: skipping unreadable %s: %s", obj.key, exc)
        return out

    def _ensure_topic(self, tm: TopicManifest) -> bool:
        """A local (empty) topic for a topic of the bucket, grown to its partition count
        and given its configs when the leader changed them; False if it cannot be served."""
        pm = self.partitions
        t = pm.topics.get(tm.topic)
        if t is None:
            # The leader's configs as DescribeConfigs will show them; a set this broker
            # refuses (another version's names) falls back to the defaults.
            for configs in (dict(tm.configs), {"remote.storage.enable": "true"}):
                try:
                    pm.create_topic(tm.topic, tm.partitions, dict(configs))
                    return True
                except (KafkaError, ConfigError) as exc:
                    log.warning("read replica: topic %s configs refused (%s)", tm.topic, exc)
            return False
        if tm.partitions > t.partitions:
            try:
                pm.create_partitions(tm.topic, tm.partitions)
                log.info("read replica: %s now has %d partitions, as in %s", tm.topic,
                         tm.partitions, self.config.remote_url)
            except KafkaError as exc:
                log.warning("read replica: %s cannot grow to %d partitions (%s); serving %d",
                            tm.topic, tm.partitions, exc, t.partitions)
        tm.partitions = min(tm.partitions, t.partitions)
        configs = dict(tm.configs)
        if configs != t.configs and self._refused.get(tm.topic) != configs:
            try:
                pm.alter_topic_configs(tm.topic, configs)
                log.info("read replica: %s configs now %s, as in %s", tm.topic, configs,
                         self.config.remote_url)
            except (KafkaError, ConfigError) as exc:
                self._refused[tm.topic] = configs  # said once, not at every pass
                log.warning("read replica: %s keeps its configs; the leader's are refused "
                            "here (%s)", tm.topic, exc)
        return True

    async def _follow_partition(self, key: Key) -> None:
        """Store I/O (opening the tier, reading a newer manifest) in the thread pool; the
        log follows on the loop."""
        plog = self.partitions.get_log(*key)
        tier = self.tiers.get(key)
        loop = asyncio.get_running_loop()
        store, cache = self.store, self.cache
        assert store is not None
        if tier is None:
            chunks = self.chunks
            tier = await loop.run_in_executor(self.executor, lambda: RemoteTier.read_replica_of(
                plog, store, key[0], key[1], cache=cache, chunks=chunks))
            self.tiers[key] = tier
            m = None
        else:
            m = await loop.run_in_executor(self.executor, tier.fetch_manifest)
            if m is None:
                return  # nothing new (or a stale read): keep ours
        if tier.follow(m):
            self.partitions.notify_grown(*key)
            log.info("read replica: %s-%d now [%d, %d) (manifest generation %d)", key[0],
                     key[1], plog.log_start_offset, plog.log_end_offset,
                     tier.manifest.generation)
