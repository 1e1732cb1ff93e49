"""OffsetCommit (key 8), versions 2-9: store committed offsets, checked against the group.

Group checks (``ClassicGroup.validateOffsetCommit`` via the group's
``validate_offset_commit``; facts §1.4): generation -1 on an Empty or missing group
is accepted (a missing group becomes a "simple" group); -1 with no member id on an
active group is UNKNOWN_MEMBER_ID (25); an unknown member 25, a static id bound to
another member FENCED_INSTANCE_ID (82); a generation mismatch ILLEGAL_GENERATION (22);
CompletingRebalance REBALANCE_IN_PROGRESS (27) (PreparingRebalance with the current
generation is accepted, for cooperative rebalancing); an unknown group with
generation >= 0 is 22 before v9 and GROUP_ID_NOT_FOUND (69) from v9. A group error
goes on every partition.
Per partition: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (3);
metadata longer than ``offset.metadata.max.bytes`` is OFFSET_METADATA_TOO_LARGE (12)
(counted as Kafka does, in Java chars: UTF-16 code units).
The accepted partitions of one request are stored atomically and durably (fsync,
group-committed by the store's writer thread) before the answer. A null metadata
is stored as "". RetentionTimeMs (v2-4) is not honoured per request;
offsets.retention.minutes is (KIP-211).
"""

from __future__ import annotations

import logging
from typing import Any

from broker.acl.authorizer import READ, TOPIC
from broker.acl.check import allowed
from broker.groups.coordinator import GroupCoordinator
from broker.groups.store import CommittedOffset
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

log = logging.getLogger("chronolog.broker")
Answer = m.OffsetCommitResponseTopicsPartitions


def _java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units (characters beyond the BMP count twice)."""
    return len(text.encode("utf-16-le")) // 2


def group_error(coord: GroupCoordinator, body: Any, version: int) -> int:
    """The group-level verdict on a commit: 0, or the code every partition gets."""
    group = coord.group(body.group_id)
    generation = body.generation_id_or_member_epoch
    if group is None:
        if generation < 0:
            return 0
        return int(ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION)
    return group.validate_offset_commit(body.member_id, generation, body.group_instance_id, version)


async def handle(request: Request[m.OffsetCommitRequest], ctx: Any) -> m.OffsetCommitResponse:
    body = request.body
    group_id = body.group_id
    coord: GroupCoordinator = ctx.broker.groups
    max_meta = ctx.config.offset_metadata_max_bytes
    err = group_error(coord, body, request.api_version)
    if err:
        log.info("OffsetCommit from %s for group %r refused with %s (generation %d, member %r)",
                 ctx.peer, group_id, ErrorCode(err).name, body.generation_id_or_member_epoch,
                 body.member_id)
    now = coord.clock()
    accepted: list[tuple[str, int, CommittedOffset]] = []
    topics_out: list[m.OffsetCommitResponseTopics] = []
    outs: list[Answer] = []
    partitions = ctx.partitions
    authz = ctx.broker.authorizer
    for topic in body.topics:
        parts_out: list[Answer] = []
        for p in topic.partitions:
            meta = p.committed_metadata if p.committed_metadata is not None else ""
            if err:
                code = err
            elif authz is not None and not allowed(ctx, READ, TOPIC, topic.name):
                code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif not partitions.has_partition(topic.name, p.partition_index):
                code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif len(meta) * 2 > max_meta and _java_length(meta) > max_meta:
                code = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
            else:
                code = 0
                accepted.append((
                    topic.name, p.partition_index,
                    CommittedOffset(p.committed_offset, p.committed_leader_epoch, meta, now),
                ))
                outs.append(out := Answer(partition_index=p.partition_index, error_code=0))
                parts_out.append(out)
                continue
            parts_out.append(Answer(partition_index=p.partition_index, error_code=code))
        topics_out.append(m.OffsetCommitResponseTopics(name=topic.name, partitions=parts_out))
    if not err:
        group = coord.group(group_id)
        touch = getattr(group, "touch", None)
        if touch is not None and body.member_id:
            touch(now, body.member_id)
    if accepted:
        try:
            await coord.commit_offsets(group_id, accepted)
        except OSError as exc:
            # Kafka maps a failed append to the offsets log to COORDINATOR_NOT_AVAILABLE.
            log.error("OffsetCommit for group %r could not be stored: %s", group_id, exc)
            for out in outs:
                out.error_code = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return m.OffsetCommitResponse(throttle_time_ms=0, topics=topics_out)


def error_body(request: Request[m.OffsetCommitRequest], code: int) -> m.OffsetCommitResponse:
    return m.OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            m.OffsetCommitResponseTopics(name=t.name, partitions=[
                Answer(partition_index=p.partition_index, error_code=code) for p in t.partitions])
            for t in request.body.topics
        ],
    )
