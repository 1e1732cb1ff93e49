"""The console's web app (aiohttp): pages rendered server-side with jinja2, JSON and
server-sent events for the chart and the live tail.

Invariants: every handler's broker work is bounded (see ``timeline``, ``browse``,
``cluster`` and ``groups``); a Kafka error becomes a page naming Kafka's error code
(404 for an unknown topic), bad input a 400 page that says what was wrong, a broker
that cannot be reached (not yet, or no longer) a 503 page that says so and reloads
itself (``link``): never a stack trace; nothing
writes to the cluster unless the app was made with ``allow_writes``, and each
write (resetting a group's offsets, deleting a topic's records before a time) needs
the app's form token.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import jinja2
from aiohttp import web

from client.aio import EARLIEST, LATEST, MAX_TIMESTAMP, Client, TopicPartition
from client.model import EARLIEST_LOCAL, LATEST_TIERED, LIST_OFFSETS
from client.timeparse import TimeParseError, format_time, parse_time
from console import browse, deletes, eventtime, groups, timeline
from console.cluster import overview
from console.link import BrokerLink, BrokerUnreachable
from console.render import human_duration, human_size, preview, show_bytes
from console.settings import ClientSettings
from protocol.errors import ErrorCode, KafkaError

__all__ = ["ConsoleConfig", "make_app", "serve"]

log = logging.getLogger(__name__)

_HERE = Path(__file__).resolve().parent
DEFAULT_PAGE = 50
TAIL_MAX_PER_TICK = 200
TAIL_POLL_S = 0.5
RANGES = {"15m": 15 * 60_000, "1h": 3_600_000, "1d": 86_400_000, "1w": 7 * 86_400_000}


@dataclass(frozen=True)
class ConsoleConfig:
    bootstrap: str
    settings: ClientSettings
    allow_writes: bool = False
    #: The address served on; when it is a loopback address, only requests that name a
    #: loopback host are answered (a page on another site cannot rebind its own name
    #: to 127.0.0.1 and read the console through the visitor's browser).
    host: str = "127.0.0.1"


LINK = web.AppKey("link", BrokerLink)
CONFIG = web.AppKey("config", ConsoleConfig)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
#: A secret per console process that every write form carries (see console.groups).
FORM_TOKEN = web.AppKey("form_token", str)
#: Every record's timestamp per partition, for the event-time timeline (console.eventtime).
TIMESTAMPS = web.AppKey("timestamps", eventtime.TimestampCache)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
    )
    env.filters["iso"] = lambda ms: "—" if ms is None else format_time(int(ms))
    env.filters["num"] = lambda n: f"{n:,}"
    env.filters["duration"] = duration
    env.filters["size"] = human_size
    env.filters["human_duration"] = human_duration
    env.filters["setting_duration"] = setting_duration
    env.filters["cursor"] = browse.format_cursor
    return env


def duration(ms: float) -> str:
    """``93784000`` → ``1d 2h``: the two largest units, for lags and spans."""
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    out: list[str] = []
    rest = int(ms // 1000)
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or out:
            out.append(f"{rest // size}{unit}")
            rest %= size
        if len(out) == 2:
            break
    return " ".join(out)


def setting_duration(value: str | None) -> str:
    """A ``*.ms`` setting as it reads: ``604800000`` → ``7 days``, ``-1`` → ``forever``."""
    if value is None or value == "":
        return "—"
    try:
        ms = int(value)
    except ValueError:
        return value
    return "forever" if ms < 0 else human_duration(ms)


def _page(request: web.Request, template: str, status: int = 200, **ctx: Any) -> web.Response:
    env = request.app[TEMPLATES]
    cfg = request.app[CONFIG]
    html = env.get_template(template).render(
        bootstrap=cfg.bootstrap, allow_writes=cfg.allow_writes, **ctx
    )
    return web.Response(text=html, content_type="text/html", status=status)


def client_of(request: web.Request) -> Client:
    """The app's connected client; raises BrokerUnreachable while it waits for the broker."""
    return request.app[LINK].client


#: Seconds after which a "broker not reachable" page reloads itself.
RELOAD_S = 5


def _unreachable(request: web.Request, message: str) -> web.Response:
    if request.path.startswith("/api/"):
        resp = web.json_response({"error": "BROKER_NOT_REACHABLE", "message": message}, status=503)
    else:
        resp = _page(request, "error.html", 503, title="Broker not reachable", message=message,
                     reload_s=RELOAD_S)
    resp.headers["Retry-After"] = str(RELOAD_S)
    return resp


@web.middleware
async def _errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except BrokerUnreachable as e:
        return _unreachable(request, f"{e}: {request.app[LINK].cause}")
    except KafkaError as e:
        if e.code == ErrorCode.NETWORK_EXCEPTION:
            log.info("%s %s: %s", request.method, request.path_qs, e)
            return _unreachable(request, f"broker at {request.app[CONFIG].bootstrap} not reachable, "
                                         f"retrying: {e.message}")
        status = 404 if e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else 502
        log.info("%s %s: %s", request.method, request.path_qs, e)
        return _error(request, status, e.code.name, str(e))
    except (TimeParseError, ValueError) as e:
        log.info("%s %s: bad input: %s", request.method, request.path_qs, e)
        return _error(request, 400, "Bad request", str(e))


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


@web.middleware
async def _loopback_only(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """On a loopback address, refuse requests whose Host names anything else (DNS rebinding)."""
    try:
        name = urlsplit("//" + (request.host or "")).hostname or ""
    except ValueError:
        name = ""
    if not _is_loopback(name):
        log.warning("refused a request for host %r on a loopback console", request.host)
        return web.Response(status=403, text="this console answers only requests to localhost\n")
    return await handler(request)


def _error(request: web.Request, status: int, title: str, message: str) -> web.Response:
    """An error page, or for ``/api/`` a JSON body ``{"error", "message"}``."""
    if request.path.startswith("/api/"):
        return web.json_response({"error": title, "message": message}, status=status)
    return _page(request, "error.html", status, title=title, message=message)


def _int_arg(request: web.Request, name: str, default: int | None = None) -> int | None:
    text = request.query.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None


def _time_arg(request: web.Request, name: str, now_ms: int) -> int | None:
    text = request.query.get(name, "").strip()
    return parse_time(text, now_ms=now_ms) if text else None


# ---------------------------------------------------------------- overview


async def overview_page(request: web.Request) -> web.Response:
    q = request.query.get("q", "")
    ov = await overview(client_of(request), q)
    return _page(request, "overview.html", ov=ov, q=q)


# ---------------------------------------------------------------- timeline


async def _partitions(request: web.Request, topic: str) -> tuple[list[int], int | None]:
    parts = await client_of(request).partitions_for(topic)
    chosen = _int_arg(request, "partition")
    if chosen is not None and chosen not in parts:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic!r} has no partition {chosen}")
    return parts, chosen


async def _data_extent(client: Client, topic: str, parts: list[int]) -> tuple[int, int] | None:
    """[timestamp of the earliest first record, largest timestamp + 1), or None if empty."""
    tps = [TopicPartition(topic, p) for p in parts]
    first = await client.list_offsets(dict.fromkeys(tps, 0))
    firsts = [ts for off, ts in first.values() if off >= 0]
    if not firsts:
        return None
    try:
        mx = await client.list_offsets(dict.fromkeys(tps, MAX_TIMESTAMP))
        last = max(ts for off, ts in mx.values() if off >= 0)
    except KafkaError:
        last = max(firsts)
    return min(firsts), max(last, min(firsts)) + 1


#: The two meanings of a bucket (``?by=``): ``event`` counts records by their own
#: timestamps (console.eventtime, the default), ``offset`` counts the offsets a reader of
#: the window replays (console.timeline: Kafka's offsetsForTimes rule).
MEANINGS = ("event", "offset")


#: Seconds a timeline page waits for a first event-time chart (which reads every record)
#: before it shows the positional chart and reloads itself (``?wait=`` overrides it; the
#: JSON API waits for the chart unless asked not to).
PAGE_WAIT_S = 3.0
MAX_WAIT_S = 600.0


async def _timeline(
    request: web.Request, wait_s: float | None = None,
) -> tuple[timeline.Timeline | eventtime.EventTimeline, dict[str, Any]]:
    client = client_of(request)
    topic = request.match_info["topic"]
    parts, chosen = await _partitions(request, topic)
    used = parts if chosen is None else [chosen]
    by = asked = request.query.get("by", "").strip() or "event"
    if by not in MEANINGS:
        raise ValueError(f"by must be event or offset, got {by!r}")
    now = time.time_ns() // 1_000_000
    start, end = _time_arg(request, "from", now), _time_arg(request, "to", now)
    rng = request.query.get("range", "")
    # A range button wins over the from/to fields the same form also submits.
    if rng in RANGES:
        start, end = now - RANGES[rng], now
    elif rng != "all" and (start is not None or end is not None):
        rng = "custom"
        end = now if end is None else end
        start = end - RANGES["1h"] if start is None else start
    else:
        rng = "all"
        start = end = None
    buckets = _int_arg(request, "buckets")
    # The positional chart asks the broker one lookup per boundary and partition; the
    # event-time chart counts in memory, so only the bucket count's own cap applies.
    most = timeline.max_buckets_for(len(used)) if by == "offset" else timeline.MAX_BUCKETS
    if buckets is not None and buckets > most:
        raise ValueError(f"at most {most} buckets for {len(used)} partitions")
    max_bars = timeline.max_bars_for(len(used)) if by == "offset" else timeline.MAX_BARS
    span: dict[str, int] = {}

    def make_bounds(extent: tuple[int, int] | None) -> list[int]:
        lo, hi = (start, end) if start is not None and end is not None else (
            extent if extent else (now - RANGES["1h"], now))
        if hi <= lo:
            raise ValueError(f"the range must end after it starts: {format_time(lo)} .. {format_time(hi)}")
        span.update(start=lo, end=hi)
        return timeline.boundaries(lo, hi, buckets, max_bars=max_bars)

    wait_text = request.query.get("wait", "").strip()
    if wait_text:
        try:
            wait_s = float(wait_text)
        except ValueError:
            raise ValueError(f"wait must be a number of seconds, got {wait_text!r}") from None
        if not 0 <= wait_s <= MAX_WAIT_S:
            raise ValueError(f"wait must be between 0 and {MAX_WAIT_S:g} seconds, got {wait_text}")
    notice = None
    warming = None
    tl: timeline.Timeline | eventtime.EventTimeline
    if by == "event":
        try:
            tl = await request.app[TIMESTAMPS].timeline(client, topic, make_bounds, used,
                                                        wait_s=wait_s)
        except eventtime.TooLarge as e:
            notice = f"{e}: showing the positional count instead."
            by = "offset"
        except eventtime.Warming as e:
            warming = e
            by = "offset"
    if by == "offset":
        extent = await _data_extent(client, topic, used) if rng == "all" else None
        tl = await timeline.compute_timeline(client, topic, make_bounds(extent), used)
    ctx = {"topic": topic, "partitions": parts, "partition": chosen, "range_name": rng,
           "start": span["start"], "end": span["end"], "by": by, "asked": asked, "notice": notice,
           "warming": warming}
    return tl, ctx


async def timeline_page(request: web.Request) -> web.Response:
    tl, ctx = await _timeline(request, PAGE_WAIT_S)
    data = tl.as_json()
    states = (tl.states if isinstance(tl, eventtime.EventTimeline) else
              await eventtime.partition_states(client_of(request), ctx["topic"], tl.partitions))
    cut = None
    before = request.query.get("before", "").strip()
    if before and request.app[CONFIG].allow_writes:
        at = deletes.parse_at(before)
        cut = {"at": at, "plan": await deletes.plan(client_of(request), ctx["topic"], at)}
    tier = await tier_table(client_of(request), ctx["topic"], tl.partitions)
    resp = _page(request, "timeline.html", tl=tl, data_json=json.dumps(data).replace("</", "<\\/"),
                 cut=cut, tier=tier, token=request.app[FORM_TOKEN], done=request.query.get("done"),
                 disorder=states, late=sum(s.late_records or 0 for s in states.values()),
                 meaning_link=_meaning_link(request, "offset" if ctx["by"] == "event" else "event"),
                 **ctx)
    resp.headers["Server-Timing"] = f"timeline;dur={tl.server_ms:.1f}"
    return resp


async def tier_table(client: Client, topic: str, parts: list[int]) -> list[dict[str, int]] | None:
    """Per partition: log start, local log start (ListOffsets -4), last offset in the
    remote tier (-5) and log end; None when no partition has remote data or the broker
    cannot say (ListOffsets below v9: not a KIP-405 broker)."""
    if client.api_version(LIST_OFFSETS) < 9:
        return None
    tps = {p: TopicPartition(topic, p) for p in parts}
    start = await client.list_offsets(dict.fromkeys(tps.values(), EARLIEST))
    local = await client.list_offsets(dict.fromkeys(tps.values(), EARLIEST_LOCAL))
    tiered = await client.list_offsets(dict.fromkeys(tps.values(), LATEST_TIERED))
    end = await client.list_offsets(dict.fromkeys(tps.values(), LATEST))
    rows = [{"partition": p, "log_start": start[tp][0], "local_start": local[tp][0],
             "remote_end": tiered[tp][0], "log_end": end[tp][0]} for p, tp in sorted(tps.items())]
    if all(r["remote_end"] < 0 and r["local_start"] <= r["log_start"] for r in rows):
        return None
    return rows


def _meaning_link(request: web.Request, by: str) -> str:
    """This page's URL with the other meaning of a bucket."""
    q = dict(request.query)
    q.pop("by", None)
    return "?" + urlencode(q | ({"by": by} if by != "event" else {}))


async def timeline_api(request: web.Request) -> web.Response:
    tl, ctx = await _timeline(request)
    data = tl.as_json()
    if ctx["warming"] is not None:
        w = ctx["warming"]
        data["warming"] = {"read": w.done, "of": w.total}
    resp = web.json_response(data)
    resp.headers["Server-Timing"] = f"timeline;dur={tl.server_ms:.1f}"
    return resp


# ---------------------------------------------------------------- records


def _row(s: browse.ShownRecord, limit: int, needle: str = "", where: str = "both") -> dict[str, Any]:
    """A record as the pages show it; with a filter's ``needle`` the previews show the match."""
    r = s.record
    return {
        "partition": s.partition,
        "offset": s.offset,
        "timestamp": s.timestamp,
        "time": format_time(s.timestamp),
        "timestamp_type": s.timestamp_type,
        "key": (key := show_bytes(r.key, limit)),
        "value": (value := show_bytes(r.value, limit)),
        "key_preview": preview(r.key, key.kind, around=needle if where != "value" else ""),
        "value_preview": preview(r.value, value.kind, around=needle if where != "key" else ""),
        "headers": [(k, show_bytes(v, limit)) for k, v in r.headers],
    }


async def records_page(request: web.Request) -> web.Response:
    client = client_of(request)
    topic = request.match_info["topic"]
    t0 = time.perf_counter()
    parts, chosen = await _partitions(request, topic)
    used = parts if chosen is None else [chosen]
    limit = max(1, min(_int_arg(request, "limit", DEFAULT_PAGE) or DEFAULT_PAGE, browse.MAX_LIMIT))
    now = time.time_ns() // 1_000_000
    time_text = request.query.get("time", "").strip()
    at_ms = parse_time(time_text, now_ms=now) if time_text else None
    offset = _int_arg(request, "offset")
    cursor_text = request.query.get("cursor", "").strip()
    back = request.query.get("dir") == "back"
    if cursor_text:
        cursor = browse.parse_cursor(cursor_text)
        unknown = sorted(set(cursor) - set(parts))
        if unknown:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic!r} has no partition {unknown[0]}")
        used = sorted(cursor)
    elif offset is not None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        cursor = dict.fromkeys(used, offset)
    elif at_ms is not None:
        cursor = await browse.resolve_time(client, topic, used, at_ms)
    else:
        ls = await client.list_offsets({TopicPartition(topic, p): EARLIEST for p in used})
        cursor = {tp.partition: o for tp, (o, _) in ls.items()}
    needle = request.query.get("q", "")
    where = request.query.get("in", "both") or "both"
    budget = max(1, min(_int_arg(request, "scan", browse.DEFAULT_BUDGET) or browse.DEFAULT_BUDGET,
                        browse.MAX_BUDGET))
    base: dict[str, Any] = {"limit": limit} | ({"partition": chosen} if chosen is not None else {})
    # An event-time window (a timeline bar): only records with from <= timestamp < until,
    # read from the ranges the broker plans for it.
    from_text = request.query.get("from", "").strip()
    until_text = request.query.get("until", "").strip()
    window: tuple[int, int] | None = None
    if from_text or until_text:
        if not (from_text and until_text):
            raise ValueError("an event-time window needs both from and until")
        window = (parse_time(from_text, now_ms=now), parse_time(until_text, now_ms=now))
        if window[1] <= window[0]:
            raise ValueError(f"the window must end after it starts: {format_time(window[0])} .. "
                             f"{format_time(window[1])}")
    page: browse.Page
    if window is not None:
        plans = await client.plan_time_window(topic, window[0], window[1], used)
        if not cursor_text:
            cursor = {p: pl.ranges[0].start_offset if pl.ranges else pl.high_watermark
                      for p, pl in plans.items()}
        scan = max(1, min(_int_arg(request, "scan", browse.WINDOW_BUDGET) or browse.WINDOW_BUDGET,
                          browse.MAX_WINDOW_BUDGET))
        page = await browse.window_forward(client, topic, plans, cursor, *window, limit, scan,
                                           browse.text_matcher(needle, where) if needle else None)
        budget = scan
        base |= {"from": format_time(window[0]), "until": format_time(window[1]), "scan": scan}
        if needle:
            base |= {"q": needle, "in": where}
    elif needle:
        # A filter searches forward only: the page is exact for the range it examined.
        page = await browse.search_forward(client, topic, cursor, limit, budget,
                                           browse.text_matcher(needle, where))
        base |= {"q": needle, "in": where, "scan": budget}
    else:
        page = await (browse.page_back if back else browse.page_forward)(client, topic, cursor, limit)
    rows = [_row(s, 16 * 1024, needle, where) for s in page.records]
    nav = {
        "next": None if page.at_end or page.next == page.start else
        "?" + urlencode(base | {"cursor": browse.format_cursor(page.next)}),
        "prev": None if page.at_start or needle or window else
        "?" + urlencode(base | {"cursor": browse.format_cursor(page.start), "dir": "back"}),
        "here": "?" + urlencode(base | {"cursor": browse.format_cursor(page.start)}),
    }
    server_ms = (time.perf_counter() - t0) * 1000
    resp = _page(
        request, "records.html", topic=topic, partitions=parts, partition=chosen, rows=rows,
        page=page, nav=nav, limit=limit, time_text=time_text, at_ms=at_ms,
        offset=offset, cursor_text=browse.format_cursor(page.start), server_ms=server_ms,
        needle=needle, where=where, budget=budget, window=window,
        search=page if isinstance(page, browse.SearchPage) else None,
    )
    resp.headers["Server-Timing"] = f"records;dur={server_ms:.1f}"
    return resp


# ---------------------------------------------------------------- live tail


async def tail_page(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    parts, chosen = await _partitions(request, topic)
    return _page(request, "tail.html", topic=topic, partitions=parts, partition=chosen)


async def tail_events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``ready`` once, then ``record`` per new record, ``skipped`` when
    more than TAIL_MAX_PER_TICK arrived in one poll (the tail jumps to the newest)."""
    client = client_of(request)
    topic = request.match_info["topic"]
    parts, chosen = await _partitions(request, topic)
    used = parts if chosen is None else [chosen]
    tps = {p: TopicPartition(topic, p) for p in used}
    from_text = request.query.get("from", "").strip()
    if from_text:
        cursor = {p: o for p, o in browse.parse_cursor(from_text).items() if p in tps}
    else:
        latest = await client.list_offsets({tp: LATEST for tp in tps.values()})
        cursor = {p: latest[tp][0] for p, tp in tps.items()}
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
    })
    await resp.prepare(request)

    async def send(event: str, data: dict[str, Any]) -> None:
        await resp.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

    await send("ready", {"cursor": browse.format_cursor(cursor)})
    try:
        await _tail_loop(request, topic, tps, cursor, send, resp)
    except ConnectionResetError:
        pass  # the browser went away (tab closed or hidden)
    except KafkaError as e:
        # The headers are sent: say it in the stream; the page reconnects from its cursor.
        log.info("live tail of %s stopped: %s", topic, e)
        with contextlib.suppress(ConnectionResetError):
            await send("failed", {"error": str(e)})
    return resp


def _gone(request: web.Request) -> bool:
    """The browser closed the stream (the tab was hidden or closed): stop polling now
    rather than at the next write."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def _tail_loop(
    request: web.Request,
    topic: str,
    tps: dict[int, TopicPartition],
    cursor: dict[int, int],
    send: Callable[[str, dict[str, Any]], Awaitable[None]],
    resp: web.StreamResponse,
) -> None:
    client = client_of(request)
    idle = 0.0
    while not _gone(request):
        latest = await client.list_offsets({tp: LATEST for tp in tps.values()})
        behind = {p: o for p, o in cursor.items() if latest[tps[p]][0] > o}
        if behind:
            idle = 0.0
            skipped = 0
            for p in behind:
                hw = latest[tps[p]][0]
                if hw - behind[p] > TAIL_MAX_PER_TICK:
                    skipped += hw - TAIL_MAX_PER_TICK - behind[p]
                    behind[p] = hw - TAIL_MAX_PER_TICK
            if skipped:
                await send("skipped", {"count": skipped})
            page = await browse.page_forward(client, topic, behind, TAIL_MAX_PER_TICK)
            cursor.update(behind)
            for s in page.records:
                # Each event carries the position after it, so a page that stops
                # listening mid-way resumes at the first record it did not get.
                cursor[s.partition] = s.offset + 1
                row = _row(s, 2048)
                row["key"] = asdict(row["key"])
                row["value"] = asdict(row["value"])
                row["headers"] = [(k, asdict(v)) for k, v in row["headers"]]
                await send("record", row | {"cursor": browse.format_cursor(cursor)})
            cursor.update(page.next)
        else:
            idle += TAIL_POLL_S
            if idle >= 15:
                idle = 0.0
                await resp.write(b": keep-alive\n\n")
        await asyncio.sleep(TAIL_POLL_S)


# ---------------------------------------------------------------- app


def broker_link(config: ConsoleConfig) -> BrokerLink:
    """The console's connection to ``config.bootstrap`` with its client settings (not yet made)."""
    s = config.settings
    return BrokerLink(config.bootstrap, lambda: Client.connect(
        config.bootstrap, client_id=s.client_id, request_timeout=s.request_timeout_ms / 1000,
        security=s.security,
    ))


def make_app(config: ConsoleConfig, link: BrokerLink | None = None) -> web.Application:
    """The app; with ``link`` it uses that connection (connected or still waiting), else it
    connects at start-up and fails if the broker is not reachable."""
    middlewares = [_loopback_only, _errors] if _is_loopback(config.host) else [_errors]
    app = web.Application(middlewares=middlewares)
    app[CONFIG] = config
    app[TEMPLATES] = _env()
    app[FORM_TOKEN] = secrets.token_urlsafe(24)
    app[LINK] = link if link is not None else broker_link(config)
    app[TIMESTAMPS] = eventtime.TimestampCache()

    async def client_ctx(app: web.Application) -> AsyncIterator[None]:
        if link is None and not await app[LINK].try_connect():
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, app[LINK].cause)
        yield
        await app[LINK].close()

    app.cleanup_ctx.append(client_ctx)
    app.add_routes([
        web.get("/", overview_page),
        web.get("/topics/{topic}", timeline_page),
        web.get("/topics/{topic}/records", records_page),
        web.get("/topics/{topic}/tail", tail_page),
        web.get("/api/topics/{topic}/timeline", timeline_api),
        web.get("/api/topics/{topic}/tail", tail_events),
        web.static("/static", _HERE / "static"),
    ])
    keys = {"client": client_of, "config": CONFIG, "page": _page, "token": FORM_TOKEN}
    app.add_routes(groups.routes(keys))
    app.add_routes(deletes.routes(keys))
    return app


async def serve(config: ConsoleConfig, host: str, port: int) -> None:
    """Run until cancelled (Ctrl-C) or SIGTERM, which stops it cleanly (exit status 0).

    A broker that is not reachable yet is waited for (``console.link``: the pages say so,
    stderr too); a refused login or an untrusted certificate raises, as at start.
    """
    link = broker_link(config)
    await link.try_connect()  # the usual case: the broker is up and the first page is served
    runner = web.AppRunner(make_app(config, link), access_log=None)
    await runner.setup()
    waiting: asyncio.Task[None] | None = None
    stopped: asyncio.Task[bool] | None = None
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        sec = config.settings.security
        print(f"chronolog console on http://{host}:{port}/ (broker {config.bootstrap}"
              f"{'' if sec.protocol == 'PLAINTEXT' else ' over ' + sec.protocol}"
              f"{', writes allowed' if config.allow_writes else ', read-only'})", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signal.SIGTERM, stop.set)
        stopped = asyncio.create_task(stop.wait())
        if not link.connected:
            waiting = asyncio.create_task(link.wait_until_connected(sys.stderr))
            await asyncio.wait({stopped, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if waiting.done():
                waiting.result()  # what waiting will not mend stops the console
        await stopped
    finally:
        for task in (stopped, waiting):
            if task is not None:
                task.cancel()
        if waiting is not None:
            with contextlib.suppress(asyncio.CancelledError, KafkaError):
                await waiting
        await runner.cleanup()
