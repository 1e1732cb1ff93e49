"""``chronolog serve --read-replica URL``: serve the topics of a remote tier read-only
(Redpanda's remote read replicas, over Chronolog's bucket layout).

A read replica owns no data: for every topic it finds in the bucket
(``topics/<topic>/topic.json``) it keeps an empty local log per partition that starts
where the tier ends, with the partition's remote tier attached, so Metadata, ListOffsets
(every special value and timestamps), Fetch, PlanTimeWindow / CountTimeWindows and the
console are served by the same handlers as on the leader, from the bucket.

Invariants:
- It never writes to the bucket: its store drops every put and delete (logged at
  debug), so the recovery a tier runs when it opens (deleting a copy the leader has
  not finished) cannot touch the leader's data; only COPY_SEGMENT_FINISHED segments
  are ever read.
- Every ``remote.log.manager.task.interval.ms`` it re-reads the topic list and each
  partition's manifest (in its thread pool): a newer manifest (higher generation)
  replaces the one it holds, its local log moves to the new remote end (fetches
  parked on the partition wake), and a log start raised by the leader (retention,
  DeleteRecords) is taken over; a topic whose topic.json is gone (deleted on the
  leader) stops being served. The topic list is a listing of ``topics/`` (every object
  of the bucket: ``ObjectStore`` has no delimiter listing yet), the one cost that grows
  with the bucket.
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
from storage.remote.manifest import PartitionManifest, TopicManifest
from storage.remote.store import ObjectInfo, ObjectStore, RemoteObjectNotFound, open_store
from storage.remote.tier import RemoteTier

log = logging.getLogger("chronolog.read_replica")

#: APIs that write (API key -> name): refused on a read replica.
WRITE_APIS = {
    0: "Produce", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords",
    22: "InitProducerId", 24: "AddPartitionsToTxn", 26: "EndTxn", 33: "AlterConfigs",
    37: "CreatePartitions", 43: "ElectLeaders", 44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
}


class ReadOnlyStore(ObjectStore):
    """An ObjectStore whose writes are dropped: a read replica must never change the
    bucket it follows."""

    def __init__(self, inner: ObjectStore) -> None:  # wraps inner: no super().__init__
        self.url = inner.url
        self._inner = inner

    def put(self, key: str, data: Any) -> None:
        log.debug("read replica: not writing %s", key)

    def delete(self, key: str) -> None:
        log.debug("read replica: not deleting %s", key)

    def get(self, key: str) -> bytes:
        return self._inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self._inner.get_range(key, start, end)

    def list(self, prefix: str) -> list[ObjectInfo]:
        return self._inner.list(prefix)


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
        loop = asyncio.get_running_loop()
        inner = await loop.run_in_executor(self.executor, open_store, self.config.rsm_options)
        self.store = ReadOnlyStore(inner)
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
                    m = await loop.run_in_executor(self.executor, self._read_manifest, key)
                    if m is not None:
                        await self._follow_partition(key, m)
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

    def _read_manifest(self, key: Key) -> PartitionManifest | None:
        assert self.store is not None
        try:
            return mf.decode_partition(self.store.get(mf.manifest_key(*key)))
        except RemoteObjectNotFound:
            return None  # nothing copied yet

    def _ensure_topic(self, tm: TopicManifest) -> bool:
        """A local (empty) topic for a topic of the bucket; False if it cannot be served."""
        pm = self.partitions
        t = pm.topics.get(tm.topic)
        if t is not None:
            if t.partitions < tm.partitions:
                log.warning("read replica: %s has %d partitions in the bucket, %d here; "
                            "serving the first %d", tm.topic, tm.partitions, t.partitions,
                            t.partitions)
                tm.partitions = t.partitions
            return True
        # The leader's configs as DescribeConfigs will show them; a set this broker
        # refuses (another version's names) falls back to the defaults.
        for configs in (dict(tm.configs), {"remote.storage.enable": "true"}):
            try:
                pm.create_topic(tm.topic, tm.partitions, dict(configs))
                return True
            except (KafkaError, ConfigError) as exc:
                log.warning("read replica: topic %s configs refused (%s)", tm.topic, exc)
        return False

    async def _follow_partition(self, key: Key, m: PartitionManifest) -> None:
        plog = self.partitions.get_log(*key)
        tier = self.tiers.get(key)
        loop = asyncio.get_running_loop()
        if tier is None:
            assert self.store is not None
            store = self.store
            tier = await loop.run_in_executor(self.executor, lambda: RemoteTier(
                plog, store, key[0], key[1], topic_id=m.topic_id, cache=self.cache,
                attach=False, chunks=self.chunks))
            self.tiers[key] = tier
        if m.generation < tier.manifest.generation:
            return  # an older manifest than the one held (a stale read): keep ours
        tier.manifest = m
        done = tier.finished()
        end = done[-1].next_offset if done else m.log_start_offset
        grew = end > plog.log_end_offset
        if grew:
            # The local log is only the place where the tier ends: empty, at its end.
            plog.truncate_fully_and_start_at(end)
        plog.attach_tier(tier)
        start = min(m.log_start_offset, plog.log_end_offset)
        if start > plog.log_start_offset:
            plog.advance_log_start_offset(start)
        if grew:
            self.partitions.notify_grown(*key)
            log.info("read replica: %s-%d now [%d, %d) (manifest generation %d)", key[0],
                     key[1], plog.log_start_offset, plog.log_end_offset, m.generation)
