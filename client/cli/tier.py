"""``chronolog tier``: the remote tier (KIP-405) of each partition, as the broker and the
bucket see it.

Per partition: the log start (ListOffsets -2, remote data included), the local log
start (-4 EARLIEST_LOCAL: older records live only in the tier), the last offset copied
(-5 LATEST_TIERED, -1 when none), the log end, the upload lag (records above the last
copied offset, the active segment's included: they are copied once sealed and below the
last stable offset) and the bytes on local disk (DescribeLogDirs). The remote bytes and
segment count come from the partition's manifest in the bucket when ``--remote URL``
(and ``--rsm name=value`` for credentials, the broker's ``rsm.config.*`` without the
prefix) names it; otherwise they show ``-``: no Kafka API reports them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from client.aio import Client
from client.cli._common import add_bootstrap, config_arg, connect, print_table, run


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tier", help="remote tier status per partition (local start, tiered offset, upload lag)")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to show (default: all)")
    p.add_argument("--remote", default=None, metavar="URL",
                   help="the bucket (rsm.config.url) to read remote bytes from")
    p.add_argument("--rsm", type=config_arg, action="append", default=[], metavar="NAME=VALUE",
                   help="an rsm.config.* setting without the prefix, e.g. s3.endpoint=... "
                   "(repeatable)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    add_bootstrap(p)
    p.set_defaults(func=lambda a: run(lambda: _tier(a)))


def open_bucket(url: str | None, options: list[tuple[str, str]]) -> Any:
    """The object store of ``--remote`` (None without it)."""
    if not url:
        return None
    from storage.remote.store import open_store

    return open_store({**dict(options), "url": url})


def remote_usage(store: Any, topic: str, partition: int, log_start: int) -> tuple[int, int] | None:
    """(bytes, segments) the partition's manifest says the tier holds at or above
    ``log_start``; None when there is no manifest (nothing copied yet)."""
    from storage.remote import manifest as mf
    from storage.remote.store import RemoteObjectNotFound

    try:
        m = mf.decode_partition(store.get(mf.manifest_key(topic, partition)))
    except RemoteObjectNotFound:
        return None
    live = [s for s in m.finished() if s.end_offset >= log_start]
    return sum(s.size_bytes for s in live), len(live)


async def tier_rows(c: Client, topic: str, parts: list[int], store: Any = None
                    ) -> list[dict[str, Any]]:
    """One row per partition (the module docstring's figures)."""
    from client import admin

    start = await c.earliest(topic, parts)
    local = await c.earliest_local(topic, parts)
    tiered = await c.latest_tiered(topic, parts)
    end = await c.latest(topic, parts)
    sizes = await admin.describe_log_dirs(c, topic)
    rows = []
    for p in parts:
        usage = remote_usage(store, topic, p, start[p]) if store is not None else None
        rows.append({
            "topic": topic, "partition": p, "log_start_offset": start[p],
            "local_log_start_offset": local[p], "remote_highest_offset": tiered[p],
            "log_end_offset": end[p],
            "upload_lag_records": end[p] - max(tiered[p] + 1, start[p]),
            "local_bytes": sizes.get((topic, p)),
            "remote_bytes": None if usage is None else usage[0],
            "remote_segments": None if usage is None else usage[1],
        })
    return rows


def print_tier_table(rows: list[dict[str, Any]], with_topic: bool = True) -> None:
    def text(v: Any) -> str:
        return "-" if v is None else str(v)

    head = ("LOG_START", "LOCAL_START", "REMOTE_END", "LOG_END", "UPLOAD_LAG", "LOCAL_BYTES",
            "REMOTE_BYTES", "REMOTE_SEGMENTS")
    keys = ("log_start_offset", "local_log_start_offset", "remote_highest_offset",
            "log_end_offset", "upload_lag_records", "local_bytes", "remote_bytes",
            "remote_segments")
    lead = ("TOPIC", "PARTITION") if with_topic else ("PARTITION",)
    print_table([(*lead, *head)] + [
        ((r["topic"], str(r["partition"])) if with_topic else (str(r["partition"]),))
        + tuple(text(r[k]) for k in keys) for r in rows])


async def _tier(args: argparse.Namespace) -> int:
    store = open_bucket(args.remote, args.rsm)
    async with await connect(args) as c:
        topics = args.topics or sorted(await c.list_topics())
        rows = []
        for topic in topics:
            rows += await tier_rows(c, topic, await c.partitions_for(topic), store)
    if args.format == "json":
        print(json.dumps(rows, indent=2, sort_keys=True))
    else:
        print_tier_table(rows)
    return 0
