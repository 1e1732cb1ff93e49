"""ListOffsets (2), v0-10: offsets by timestamp, exactly as Kafka answers them.

Invariants (kafka-facts §4 and §6):
- T >= 0: the smallest offset in [log start, high watermark) whose record
  timestamp >= T, with that record's timestamp and its batch's leader epoch;
  no such record: error NONE with timestamp -1, offset -1 (leader epoch -1).
- Special timestamps are gated by version as Kafka gates them: -1 LATEST and
  -2 EARLIEST from v0 (v0 uses the legacy "offsets before" answer), -3
  MAX_TIMESTAMP from v7, -4 EARLIEST_LOCAL from v8, -5 LATEST_TIERED from v9,
  -6 EARLIEST_PENDING_UPLOAD from v11; below its version a partition gets
  UNSUPPORTED_VERSION (35). v11 is not advertised (protocol/api.py: 0-10), so every -6
  gets 35, as Kafka's gate answers a v10 request (storage answers -6 already:
  ``Log.offset_for_timestamp``). Other negative timestamps are INVALID_REQUEST.
- READ_COMMITTED (IsolationLevel 1, v2+) bounds every answer by the last stable
  offset (Kafka's lastFetchableOffset): LATEST is the LSO, and a timestamp or
  MAX_TIMESTAMP answer at or after the LSO becomes "none" (NONE, -1/-1). The search
  itself runs over every batch, control markers and aborted data included, exactly as
  under READ_UNCOMMITTED. EARLIEST is never filtered. With no open transaction the
  LSO is the high watermark and both levels agree.
- A tiered partition (KIP-405): -4 EARLIEST_LOCAL is the local log start, -5
  LATEST_TIERED the highest offset copied (-1 when none); a timestamp is searched in
  the remote segments first (Kafka's algorithm, in the tier's thread pool, never on the
  event loop), then in the local ones.
- A partition named twice in one request is INVALID_REQUEST (42) each time (v1+).
- CurrentLeaderEpoch (v4+) other than -1: above ours is UNKNOWN_LEADER_EPOCH (75),
  below is FENCED_LEADER_EPOCH (74). This broker's leader epoch is always 0.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from broker.acl.authorizer import DESCRIBE, TOPIC
from broker.acl.check import allowed
from broker.dispatch import RequestContext
from broker.errors import partition_error
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError
from storage.log import Log, TimestampOffset
from storage.remote.chunk_cache import NotCached, cached_only

LEADER_EPOCH = 0
LATEST = -1
EARLIEST = -2
# Special timestamp -> first ListOffsets version that may use it.
MIN_VERSION = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9, -6: 11}
_perf = time.perf_counter


def _metrics() -> Any:
    from broker.metrics import METRICS

    return METRICS


METRICS = _metrics()


Answer = m.ListOffsetsResponseTopicsPartitions
#: ``_lookup``'s default: the remote tier was not asked (no tier, or nothing remote).
_NOT_ASKED: Any = object()
#: The timestamp under which ``remote_lookups`` files a partition whose tier is down.
UNAVAILABLE = -(1 << 62)


def _answer(index: int, error: int, timestamp: int = -1, offset: int = -1,
            leader_epoch: int = -1) -> Answer:
    return Answer(partition_index=index, error_code=error, timestamp=timestamp, offset=offset,
                  leader_epoch=leader_epoch)


def legacy_offsets(plog: Log, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """ListOffsets v0's answer (Kafka's old ``fetchOffsetsBefore``): segment base offsets
    (and the log end, if the active segment holds data) whose file was last modified at
    or before ``timestamp``, newest first, at most ``max_num_offsets`` of them; LATEST
    starts at the log end, EARLIEST answers the log start alone."""
    start_offset = plog.log_start_offset
    points = [(max(seg.base_offset, start_offset), seg.mtime_ms()) for seg in plog.segments]
    if plog.segments and plog.segments[-1].size > 0:
        points.append((plog.log_end_offset, now_ms))
    if timestamp == LATEST:
        i = len(points) - 1
    elif timestamp == EARLIEST:
        i = 0
    else:
        i = len(points) - 1
        while i >= 0 and points[i][1] > timestamp:
            i -= 1
    out: list[int] = []
    while i >= 0 and len(out) < max_num_offsets:
        out.append(points[i][0])
        i -= 1
    if timestamp == EARLIEST:
        out = out[:1]
    hw = plog.high_watermark
    if any(o > hw for o in out):
        out = [hw] + [o for o in out if o <= hw]
    return out


async def remote_lookups(ctx: RequestContext, body: m.ListOffsetsRequest
                         ) -> dict[tuple[str, int, int], TimestampOffset | None | Exception]:
    """Kafka's remote part of a timestamp lookup (RemoteLogManager.findOffsetByTimestamp)
    for every tiered partition asked about a timestamp >= 0: on the loop when the
    indexes are in memory and the batches in the chunk cache (a local disk read, as a
    local lookup), else in the tier's thread pool (it fetches from the store):
    (topic, partition, timestamp) -> the remote hit, None (search the local segments),
    or the error."""
    tier = ctx.broker.tier
    out: dict[tuple[str, int, int], TimestampOffset | None | Exception] = {}
    if tier is None:
        return out
    for topic in body.topics:
        for p in topic.partitions:
            down = tier.unavailable(topic.name, p.partition_index)
            if down is not None:
                out[(topic.name, p.partition_index, UNAVAILABLE)] = down
                continue
            if p.timestamp < 0:
                continue
            try:
                plog = ctx.partitions.get_log(topic.name, p.partition_index)
            except KafkaError:
                continue
            remote = plog.tier
            if remote is None or not remote.readable():
                continue
            ts = p.timestamp
            try:
                try:  # answered from memory and the chunk cache: here, as a local lookup
                    with cached_only():
                        hit = remote.offset_for_timestamp(ts)
                    tier.counters.remote_lookups += 1
                except NotCached:
                    hit = await tier.call(functools.partial(remote.offset_for_timestamp, ts))
                out[(topic.name, p.partition_index, ts)] = (
                    None if hit is None else TimestampOffset(*hit))
            except Exception as exc:
                out[(topic.name, p.partition_index, ts)] = exc
    return out


def _lookup(plog: Log, timestamp: int, remote: Any = _NOT_ASKED) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) of one partition, for v1+; ``remote`` is the
    tier's answer when ``remote_lookups`` asked it (None: search locally)."""
    metrics = METRICS
    if isinstance(remote, Exception):
        raise remote
    if remote is not None and remote is not _NOT_ASKED:
        return remote.timestamp, remote.offset, remote.leader_epoch
    if timestamp >= 0:
        t0 = _perf()
        hit = plog.offset_for_timestamp(timestamp)
        if metrics is not None:
            metrics.lookup(_perf() - t0)
        if hit is None:
            return -1, -1, -1
        return hit.timestamp, hit.offset, hit.leader_epoch
    hit = plog.offset_for_timestamp(timestamp)
    if hit is None:
        return -1, -1, -1
    epoch = hit.leader_epoch
    if epoch < 0 and hit.offset >= 0 and timestamp in (LATEST, EARLIEST, -4):
        epoch = LEADER_EPOCH  # the epoch this broker leads in, as Kafka's epoch cache says
    return hit.timestamp, hit.offset, epoch


def _duplicates(topics: list[m.ListOffsetsRequestTopics]) -> set[tuple[str, int]]:
    """(topic, partition) pairs named more than once in the request."""
    if len(topics) == 1 and len(topics[0].partitions) == 1:
        return _NO_DUPLICATES
    seen: set[tuple[str, int]] = set()
    dups: set[tuple[str, int]] = set()
    for t in topics:
        name = t.name
        for p in t.partitions:
            key = (name, p.partition_index)
            if key in seen:
                dups.add(key)
            seen.add(key)
    return dups


_NO_DUPLICATES: set[tuple[str, int]] = set()


async def handle(request: Request[m.ListOffsetsRequest], ctx: RequestContext) -> m.ListOffsetsResponse:
    body = request.body
    version = request.api_version
    pm = ctx.partitions
    requested = body.topics
    duplicates = _duplicates(requested) if version >= 1 else _NO_DUPLICATES
    committed = version >= 2 and body.isolation_level == 1
    authz = ctx.broker.authorizer
    remote = await remote_lookups(ctx, body) if ctx.broker.tier is not None and version >= 1 \
        else None
    topics = []
    for topic in requested:
        name = topic.name
        if authz is not None and not allowed(ctx, DESCRIBE, TOPIC, name):
            denied = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            topics.append(m.ListOffsetsResponseTopics(name=name, partitions=[
                _answer(p.partition_index, denied) for p in topic.partitions]))
            continue
        topics.append(m.ListOffsetsResponseTopics(
            name=name,
            partitions=[_partition(pm, name, p, version, duplicates, committed, remote)
                        for p in topic.partitions],
        ))
    return m.ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _partition(pm: Any, name: str, p: m.ListOffsetsRequestTopicsPartitions, version: int,
               duplicates: set[tuple[str, int]], committed: bool = False,
               remote: dict[tuple[str, int, int], Any] | None = None) -> Answer:
    index = p.partition_index
    if duplicates and (name, index) in duplicates:
        return _answer(index, int(ErrorCode.INVALID_REQUEST))
    timestamp = p.timestamp
    if timestamp < 0:
        min_version = MIN_VERSION.get(timestamp)
        if min_version is None:
            return _answer(index, int(ErrorCode.INVALID_REQUEST))
        if version < min_version:
            return _answer(index, int(ErrorCode.UNSUPPORTED_VERSION))
    try:
        plog = pm.get_log(name, index)
    except KafkaError as exc:
        return _answer(index, int(exc.code))
    if remote is not None and isinstance(down := remote.get((name, index, UNAVAILABLE)),
                                         Exception):
        return _answer(index, int(partition_error(down, f"list offsets of {name}-{index}").code))
    if version >= 4:
        epoch = p.current_leader_epoch
        if epoch != -1 and epoch != LEADER_EPOCH:
            code = (ErrorCode.UNKNOWN_LEADER_EPOCH if epoch > LEADER_EPOCH
                    else ErrorCode.FENCED_LEADER_EPOCH)
            return _answer(index, int(code))
    try:
        if version == 0:
            answer = _answer(index, 0)
            answer.old_style_offsets = legacy_offsets(
                plog, timestamp, p.max_num_offsets, int(time.time() * 1000))
            return answer
        ts, offset, leader_epoch = _lookup(
            plog, timestamp, remote.get((name, index, timestamp), _NOT_ASKED) if remote
            else _NOT_ASKED)
        if committed and offset >= 0 and timestamp not in (EARLIEST, -4):
            lso = pm.last_stable_offset(name, index, plog)
            if timestamp == LATEST:
                offset = lso
            elif offset >= lso:
                ts, offset, leader_epoch = -1, -1, -1
    except Exception as exc:
        err = partition_error(exc, f"list offsets of {name}-{index}")
        return _answer(index, int(err.code))
    return _answer(index, 0, ts, offset, leader_epoch)


def error_body(request: Request[m.ListOffsetsRequest], code: int) -> m.ListOffsetsResponse:
    return m.ListOffsetsResponse(throttle_time_ms=0, topics=[
        m.ListOffsetsResponseTopics(name=t.name, partitions=[_answer(p.partition_index, code) for p in t.partitions])
        for t in request.body.topics
    ])
