"""OffsetFetch (key 9), versions 1-9: read committed offsets back.

A partition without a committed offset answers offset -1, leader epoch -1,
metadata "" and error NONE, as Kafka does (also for unknown groups and topics:
never GROUP_ID_NOT_FOUND). Null topics (v2+) mean every partition the group has
offsets for. v8 batches several groups; v9 names the member (MemberId, MemberEpoch),
which a group may check (``validate_offset_fetch``: KIP-848 groups answer 25/113;
classic groups accept anyone). A group error is the group's error code (v8+), the
top-level one (v2-7), or on every partition (v1, KAFKA-19246). RequireStable (v7+):
a partition with offsets pending in an open transaction (TxnOffsetCommit not yet
committed or aborted) answers UNSTABLE_OFFSET_COMMIT (88), offset -1, as Kafka does;
the client retries.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import DESCRIBE, GROUP, TOPIC
from broker.acl.check import allowed, error
from broker.groups.coordinator import GroupCoordinator
from broker.groups.store import GroupStore
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _group_topics(store: GroupStore, group: str, topics: Any, leader_epoch: bool,
                  error: int, ctx: Any, unstable: frozenset[tuple[str, int]] = frozenset(),
                  topic_cls: Any = m.OffsetFetchResponseTopics,
                  partition_cls: Any = m.OffsetFetchResponseTopicsPartitions,
                  ) -> list[Any]:
    """The committed offsets; with an authorizer, topics without DESCRIBE are left out
    of an all-topics answer and get TOPIC_AUTHORIZATION_FAILED when named."""
    authz = ctx.broker.authorizer
    if topics is None:
        wanted: dict[str, list[int]] = {}
        if not error:
            for (t, p) in store.fetch_group(group):
                wanted.setdefault(t, []).append(p)
        requested = list(wanted.items())
    else:
        requested = [(t.name, list(t.partition_indexes)) for t in topics]
    out = []
    for name, partitions in requested:
        code = error
        if authz is not None and not allowed(ctx, DESCRIBE, TOPIC, name):
            if topics is None:
                continue
            code = code or int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        parts = []
        for p in partitions:
            pending = bool(unstable) and (name, p) in unstable
            c = None if code or pending else store.fetch(group, name, p)
            parts.append(partition_cls(
                partition_index=p,
                committed_offset=c.offset if c else -1,
                committed_leader_epoch=c.leader_epoch if c and leader_epoch else -1,
                metadata=(c.metadata or "") if c else "",
                error_code=int(ErrorCode.UNSTABLE_OFFSET_COMMIT) if pending else code,
            ))
        out.append(topic_cls(name=name, partitions=parts))
    return out


def _unstable(ctx: Any, request: Any, group: str) -> frozenset[tuple[str, int]]:
    if request.api_version < 7 or not request.body.require_stable:
        return frozenset()
    txns = getattr(ctx.broker, "txns", None)
    return txns.coordinator.pending_partitions(group) if txns is not None else frozenset()


def _group_error(coord: GroupCoordinator, group_id: str, member_id: str | None, epoch: int) -> int:
    group = coord.group(group_id)
    return 0 if group is None else group.validate_offset_fetch(member_id, epoch)


async def handle(request: Request[m.OffsetFetchRequest], ctx: Any) -> m.OffsetFetchResponse:
    body = request.body
    v = request.api_version
    coord: GroupCoordinator = ctx.broker.groups
    store = coord.store
    if v >= 8:
        groups = []
        for g in body.groups:
            err = (error(ctx, DESCRIBE, GROUP, g.group_id)
                   or _group_error(coord, g.group_id, g.member_id, g.member_epoch))
            groups.append(m.OffsetFetchResponseGroups(
                group_id=g.group_id,
                topics=[] if err else _group_topics(store, g.group_id, g.topics, True, 0, ctx,
                                                    _unstable(ctx, request, g.group_id),
                                                    m.OffsetFetchResponseGroupsTopics,
                                                    m.OffsetFetchResponseGroupsTopicsPartitions),
                error_code=err,
            ))
        return m.OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    err = error(ctx, DESCRIBE, GROUP, body.group_id) or _group_error(coord, body.group_id, None, -1)
    if err and v >= 2:
        return m.OffsetFetchResponse(throttle_time_ms=0, topics=[], error_code=err)
    return m.OffsetFetchResponse(
        throttle_time_ms=0,
        topics=_group_topics(store, body.group_id, body.topics, v >= 5, err, ctx,
                             _unstable(ctx, request, body.group_id)),
        error_code=err,
    )


def error_body(request: Request[m.OffsetFetchRequest], code: int) -> m.OffsetFetchResponse:
    body = request.body
    if request.api_version >= 8:
        return m.OffsetFetchResponse(throttle_time_ms=0, groups=[
            m.OffsetFetchResponseGroups(group_id=g.group_id, topics=[], error_code=code) for g in body.groups])
    topics = [
        m.OffsetFetchResponseTopics(name=t.name, partitions=[
            m.OffsetFetchResponseTopicsPartitions(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                                  metadata="", error_code=code)
            for p in t.partition_indexes])
        for t in (body.topics or [])
    ]
    return m.OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=code)
