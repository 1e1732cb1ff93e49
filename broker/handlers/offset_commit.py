"""OffsetCommit (key 8), versions 2-8: store a simple group's committed offsets.

Without the group membership protocol every group is a "simple" group (no members,
generation -1), and the rules are Kafka's for such groups
(``OffsetMetadataManager.validateOffsetCommit``):
- generation < 0: accepted whatever the member id (the admin client, librdkafka's
  and kafka-python's manual/auto commits with ``assign``);
- generation >= 0: the request claims a membership that cannot exist here, so every
  partition gets UNKNOWN_MEMBER_ID (25) when the group already has offsets, else
  ILLEGAL_GENERATION (22), which is what Kafka answers before v9.
Per partition: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (3);
metadata longer than ``offset.metadata.max.bytes`` (4096) is OFFSET_METADATA_TOO_LARGE
(12). The accepted partitions of one request are stored atomically and durably
(fsync, in a worker thread) before the response. A null metadata is stored as "" as Kafka does.
RetentionTimeMs (v2-4) is not honoured per request; offsets.retention.minutes is.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from broker.group_offsets import (
    DEFAULT_OFFSET_METADATA_MAX_BYTES,
    CommittedOffset,
    GroupOffsetStore,
)
from protocol.errors import ErrorCode

log = logging.getLogger("chronolog.broker")


def offset_store(ctx: Any) -> GroupOffsetStore:
    """The committed-offset store of this broker's data directory."""
    return ctx.partitions.group_offsets  # type: ignore[no-any-return]


def partition_exists(ctx: Any, topic: str, partition: int) -> bool:
    """Whether the broker has this topic-partition (OffsetCommit refuses unknown ones)."""
    return bool(ctx.partitions.has_partition(topic, partition))


async def handle(request: Any, ctx: Any) -> dict[str, Any]:
    body = request.body
    group = body.group_id
    store = offset_store(ctx)
    max_meta = getattr(ctx.config, "offset_metadata_max_bytes", DEFAULT_OFFSET_METADATA_MAX_BYTES)
    group_error: ErrorCode | None = None
    if body.generation_id_or_member_epoch >= 0:
        group_error = (
            ErrorCode.UNKNOWN_MEMBER_ID if store.has_group(group) else ErrorCode.ILLEGAL_GENERATION
        )
        log.info("OffsetCommit from %s for group %r refused with %s: generation %d / member %r "
                 "(Chronolog has no group membership; commit with generation -1)",
                 ctx.peer, group, group_error.name, body.generation_id_or_member_epoch,
                 body.member_id)
    now = int(time.time() * 1000)
    accepted: list[tuple[str, int, CommittedOffset]] = []
    topics_out: list[dict[str, Any]] = []
    codes: list[list[Any]] = []
    for topic in body.topics:
        parts_out: list[dict[str, Any]] = []
        for p in topic.partitions:
            meta = p.committed_metadata if p.committed_metadata is not None else ""
            if group_error is not None:
                code = group_error
            elif not partition_exists(ctx, topic.name, p.partition_index):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(meta.encode()) > max_meta:
                code = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                code = ErrorCode.NONE
                accepted.append((
                    topic.name, p.partition_index,
                    CommittedOffset(p.committed_offset, p.committed_leader_epoch, meta, now),
                ))
            out = {"partition_index": p.partition_index, "error_code": int(code)}
            parts_out.append(out)
            codes.append([out, code])
        topics_out.append({"name": topic.name, "partitions": parts_out})
    if accepted:
        try:
            await store.commit_async(group, accepted)
        except OSError as exc:
            # Kafka maps a storage failure of the offsets log to NOT_COORDINATOR.
            log.error("OffsetCommit for group %r could not be stored: %s", group, exc)
            for out, code in codes:
                if code == ErrorCode.NONE:
                    out["error_code"] = int(ErrorCode.NOT_COORDINATOR)
    return {"throttle_time_ms": 0, "topics": topics_out}


def error_body(request: Any, code: int) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t.name,
             "partitions": [{"partition_index": p.partition_index, "error_code": code}
                            for p in t.partitions]}
            for t in request.body.topics
        ],
    }
