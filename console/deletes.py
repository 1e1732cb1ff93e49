"""Deleting a topic's records before a time (with ``--allow-writes``), from its page.

The rule and the work are ``client.admin``'s, the same as ``chronolog delete-records
--before-time``: per partition the new log start is the first offset whose timestamp
is at or after the time (``offsets_before_time``, ListOffsets by timestamp), or the
partition's end when every record is older; ``delete_records`` applies it.
Invariants: the page previews the plan (a GET, nothing written); applying is a POST
that carries the app's secret form token (another site cannot make a visitor's
browser delete records); a read-only console refuses it (403). The time is resolved
again when applied, so what is deleted is exactly what the rule says at that moment.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from client import admin
from client.aio import EARLIEST, Client, TopicPartition
from client.timeparse import format_time, parse_time
from console.writeguard import checked_form

__all__ = ["PlannedCut", "plan", "routes"]


@dataclass(frozen=True)
class PlannedCut:
    partition: int
    log_start: int  # now
    new_log_start: int  # after the delete (a log start never moves back)

    @property
    def deleted(self) -> int:
        return self.new_log_start - self.log_start


def parse_at(text: str) -> int:
    return parse_time(text.strip() or "(empty)", now_ms=time.time_ns() // 1_000_000)


async def plan(client: Client, topic: str, at: int) -> list[PlannedCut]:
    parts = await client.partitions_for(topic)
    cuts = await admin.offsets_before_time(client, topic, at, parts)
    starts = await client.list_offsets({TopicPartition(topic, p): EARLIEST for p in parts})
    return [PlannedCut(p, starts[TopicPartition(topic, p)][0],
                       max(cuts[p], starts[TopicPartition(topic, p)][0])) for p in parts]


def routes(app_keys: dict[str, Any]) -> list[web.RouteDef]:
    """The write route; ``app_keys`` gives the app's client (a function of the request), config, page renderer and token."""
    client_of = app_keys["client"]

    async def delete_before(request: web.Request) -> web.Response:
        topic = request.match_info["topic"]
        form = await checked_form(request, app_keys, "delete records")
        if isinstance(form, web.Response):
            return form
        at = parse_at(str(form.get("before", "")))
        client = client_of(request)
        offsets = await admin.offsets_before_time(client, topic, at)
        result = await admin.delete_records(client, topic, offsets)
        q = urlencode({"done": f"deleted the records before {format_time(at)}; log starts now "
                       + ", ".join(f"p{r.partition}: {r.low_watermark}" for r in result)})
        raise web.HTTPSeeOther(f"/topics/{quote(topic, safe='')}?{q}")

    return [web.post("/topics/{topic}/delete-records", delete_before)]
