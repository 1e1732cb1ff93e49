"""OffsetFetch (key 9), versions 1-8: read committed offsets back.

A partition without a committed offset answers offset -1, leader epoch -1,
metadata "" and error NONE, as Kafka does (also for topics it does not know).
Null topics (v2+) mean every partition the group has offsets for. v8 batches
several groups. RequireStable (v7+) needs no waiting: without transactions no
offset is ever pending.
"""

from __future__ import annotations

from typing import Any

from broker.group_offsets import GroupOffsetStore
from broker.handlers.offset_commit import offset_store


def _group_topics(store: GroupOffsetStore, group: str, topics: Any, leader_epoch: bool) -> list[dict[str, Any]]:
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for (t, p) in store.fetch_group(group):
            wanted.setdefault(t, []).append(p)
        requested = list(wanted.items())
    else:
        requested = [(t.name, list(t.partition_indexes)) for t in topics]
    out = []
    for name, partitions in requested:
        parts = []
        for p in partitions:
            c = store.fetch(group, name, p)
            parts.append({
                "partition_index": p,
                "committed_offset": c.offset if c else -1,
                "committed_leader_epoch": c.leader_epoch if c and leader_epoch else -1,
                "metadata": (c.metadata or "") if c else "",
                "error_code": 0,
            })
        out.append({"name": name, "partitions": parts})
    return out


async def handle(request: Any, ctx: Any) -> dict[str, Any]:
    body = request.body
    store = offset_store(ctx)
    if request.api_version >= 8:
        return {
            "throttle_time_ms": 0,
            "groups": [
                {"group_id": g.group_id,
                 "topics": _group_topics(store, g.group_id, g.topics, True),
                 "error_code": 0}
                for g in body.groups
            ],
        }
    return {
        "throttle_time_ms": 0,
        "topics": _group_topics(store, body.group_id, body.topics, request.api_version >= 5),
        "error_code": 0,
    }


def error_body(request: Any, code: int) -> dict[str, Any]:
    body = request.body
    if request.api_version >= 8:
        return {"throttle_time_ms": 0,
                "groups": [{"group_id": g.group_id, "topics": [], "error_code": code}
                           for g in body.groups]}
    topics = [
        {"name": t.name,
         "partitions": [{"partition_index": p, "committed_offset": -1,
                         "committed_leader_epoch": -1, "metadata": "", "error_code": code}
                        for p in t.partition_indexes]}
        for t in (body.topics or [])
    ]
    return {"throttle_time_ms": 0, "topics": topics, "error_code": code}
