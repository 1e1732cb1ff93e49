"""``chronolog offsets TOPIC --time T``: the first offset at or after T, per partition.

One ListOffsets round answers every partition. ``--time`` takes ISO-8601 with a
zone, epoch ms, a relative time (``-15m``), or one of Kafka's special queries:
``earliest`` (log start), ``latest`` (high watermark) and ``max-timestamp`` (the
record with the largest timestamp). A partition without a record at or after T
shows offset -1 and no timestamp, exactly as Kafka answers.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from client.aio import EARLIEST, LATEST, MAX_TIMESTAMP, TopicPartition
from client.cli._common import (
    add_bootstrap,
    add_command,
    allow_relative_times,
    connect,
    print_table,
    require_topic,
    run,
    time_arg,
)
from client.timeparse import format_time

_SPECIAL = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}


def _time_or_special(text: str) -> int:
    special = _SPECIAL.get(text.strip().lower())
    return special if special is not None else time_arg(text)


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "offsets", "first offset with timestamp >= TIME, per partition", __doc__)
    p.add_argument("topic")
    p.add_argument(
        "--time", type=_time_or_special, required=True, metavar="TIME",
        help="ISO-8601 with zone, epoch ms, -15m, now, earliest, latest or max-timestamp",
    )
    p.add_argument("--partition", type=int, action="append",
                   help="only this partition (repeatable)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--isolation", choices=["read_committed", "read_uncommitted"],
                   default="read_committed",
                   help="read_committed (default, as librdkafka): latest is the last stable "
                   "offset and no answer lies at or past it")
    add_bootstrap(p)
    allow_relative_times(p)
    p.set_defaults(func=lambda a: run(lambda: _offsets(a)))


async def _offsets(args: argparse.Namespace) -> int:
    async with await connect(args) as client:
        known = await require_topic(client, args.topic)
        parts = args.partition or known
        res = await client.list_offsets({TopicPartition(args.topic, p): args.time for p in parts},
                                        1 if args.isolation == "read_committed" else 0)
    rows = [
        {
            "partition": tp.partition,
            "offset": off,
            "timestamp": ts,
            "timestamp_iso": format_time(ts) if ts >= 0 else None,
        }
        for tp, (off, ts) in sorted(res.items())
    ]
    if args.format == "json":
        json.dump({"topic": args.topic, "time": args.time, "partitions": rows}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    print_table(
        [("PARTITION", "OFFSET", "TIMESTAMP")]
        + [(str(r["partition"]), str(r["offset"]), str(r["timestamp_iso"] or "-")) for r in rows]
    )
    return 0
