"""The consumer-groups pages: list, one group's members and lag, and (with
``--allow-writes``) resetting a group's offsets to a time.

The work is ``client.groups``' (the same calls as ``chronolog groups``); this module
adds the time dimension and the pages. Invariants:
- Members come from ``client.groups.describe_group``: DescribeGroups for a classic
  group, ConsumerGroupDescribe for a KIP-848 one (then with the group and assignment
  epochs and each member's epoch and target assignment); each partition's row names
  the member that owns it.
- A partition's lag is shown in records (log end − committed) and in time: now
  minus the timestamp of the first uncommitted record, read with one bounded Fetch
  per lagging partition (at most MAX_TIME_LAGS partitions per page); per topic, a
  chart of the unread records by time whose bars add up to the lag (one timeline,
  from ListOffsets alone).
- A reset is previewed before it is applied, with ``kafka-consumer-groups
  --reset-offsets --to-time`` rules (``client.groups.plan_reset``: first offset at or
  after the time, else the log end; only an inactive group). Applying it is a POST
  that carries the app's secret form token, so another site cannot make a
  visitor's browser reset a group; a read-only console refuses it (403).
- ``/api/groups`` and ``/api/groups/{group}`` answer the same data as JSON: the
  listing, and the description with each partition's first unread record's
  timestamp (the time lag's base; null when nothing is unread, nothing is committed,
  or past MAX_TIME_LAGS lagging partitions) and the server's ``now_ms``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from client.aio import MAX_TIMESTAMP, Client, TopicPartition
from client.groups import ActiveGroupError, apply_plan, describe_group, list_groups, plan_reset
from client.timeparse import format_time, parse_time
from console import browse, timeline
from console.writeguard import checked_form
from protocol.errors import KafkaError

__all__ = ["routes"]

MAX_TIME_LAGS = 200
MAX_BACKLOG_TOPICS = 5


async def _time_lags(client: Client, partitions: list[Any]) -> dict[tuple[str, int], int]:
    """Per lagging partition, the timestamp of the first record not yet committed."""
    lagging = [p for p in partitions if p.committed is not None and p.lag][:MAX_TIME_LAGS]
    reads = await asyncio.gather(
        *(browse.read_partition(client, p.topic, p.partition, p.committed, 1) for p in lagging)
    )
    return {(p.topic, p.partition): r.records[0].timestamp
            for p, r in zip(lagging, reads, strict=True) if r.records}


async def backlogs(client: Client, partitions: list[Any], firsts: Mapping[tuple[str, int], int]
                   ) -> list[dict[str, Any]]:
    """Per topic (at most MAX_BACKLOG_TOPICS), the group's unread records by time.

    The buckets run from the oldest first-unread record's timestamp to the largest
    timestamp, so every partition's committed offset is at or after the first
    boundary's offset and the bars add up to the lag exactly (the timeline's rule,
    offsets below the committed one left out).
    """
    by_topic: dict[str, dict[int, int]] = {}
    for p in partitions:
        if (p.topic, p.partition) in firsts:
            by_topic.setdefault(p.topic, {})[p.partition] = p.committed
    out = []
    for topic, floors in sorted(by_topic.items())[:MAX_BACKLOG_TOPICS]:
        start = min(firsts[(topic, p)] for p in floors)
        tps = {TopicPartition(topic, p): MAX_TIMESTAMP for p in floors}
        try:
            end = max(ts for _, ts in (await client.list_offsets(tps)).values()) + 1
        except KafkaError:
            end = time.time_ns() // 1_000_000
        tl = await timeline.compute_timeline(client, topic, timeline.boundaries(start, max(end, start + 1)),
                                             sorted(floors))
        out.append({"topic": topic, "bounds": tl.bounds, "counts": tl.counts_from(floors),
                    "lag": sum(p.lag for p in partitions if p.topic == topic and p.lag)})
    return out


def routes(app_keys: dict[str, Any]) -> list[web.RouteDef]:
    """The groups routes; ``app_keys`` gives the app's client (a function of the request), config and page renderer."""
    client_of, page, token_key = app_keys["client"], app_keys["page"], app_keys["token"]

    async def groups_page(request: web.Request) -> web.Response:
        groups = await list_groups(client_of(request))
        return page(request, "groups.html", groups=groups)

    async def _reset_plan(request: web.Request, group: str, form: Any) -> tuple[int, str, list[Any]]:
        at = parse_time(str(form.get("time", "")).strip() or "(empty)",
                        now_ms=time.time_ns() // 1_000_000)
        topic = str(form.get("topic", "")).strip()
        plan = await plan_reset(client_of(request), group, {topic: None} if topic else None,
                                to_time=at)
        return at, topic, plan

    async def group_page(request: web.Request) -> web.Response:
        client = client_of(request)
        group = request.match_info["group"]
        desc = await describe_group(client, group)
        now = time.time_ns() // 1_000_000
        firsts = await _time_lags(client, desc.partitions)
        charts = await backlogs(client, desc.partitions, firsts)
        preview = None
        if request.query.get("time"):
            at, topic, plan = await _reset_plan(request, group, request.query)
            preview = {"at": at, "topic": topic, "plan": plan}
        return page(request, "group.html", desc=desc, firsts=firsts, now=now, preview=preview,
                    charts=charts, charts_json=json.dumps(charts).replace("</", "<\\/"),
                    token=request.app[token_key], done=request.query.get("done"),
                    topics=sorted({p.topic for p in desc.partitions}))

    async def groups_api(request: web.Request) -> web.Response:
        groups = await list_groups(client_of(request))
        return web.json_response({"groups": [asdict(g) for g in groups]})

    async def group_api(request: web.Request) -> web.Response:
        client = client_of(request)
        desc = await describe_group(client, request.match_info["group"])
        firsts = await _time_lags(client, desc.partitions)
        out = asdict(desc)
        for p in out["partitions"]:
            p["first_unread_timestamp"] = firsts.get((p["topic"], p["partition"]))
        out["now_ms"] = time.time_ns() // 1_000_000
        return web.json_response(out)

    async def reset(request: web.Request) -> web.Response:
        group = request.match_info["group"]
        form = await checked_form(request, app_keys, "reset offsets")
        if isinstance(form, web.Response):
            return form
        at, _, plan = await _reset_plan(request, group, form)
        try:
            await apply_plan(client_of(request), group, plan)
        except ActiveGroupError as e:
            return page(request, "error.html", 409, title="Group is active", message=str(e))
        q = urlencode({"done": f"reset {len(plan)} partitions to {format_time(at)}"})
        raise web.HTTPSeeOther(f"/groups/{quote(group, safe='')}?{q}")

    return [
        web.get("/groups", groups_page),
        web.get("/groups/{group}", group_page),
        web.post("/groups/{group}/reset", reset),
        web.get("/api/groups", groups_api),
        web.get("/api/groups/{group}", group_api),
    ]
