"""``chronolog delete-records TOPIC (--before-offset N | --before-time TIME) [--partition P]``.

Deletes every record below an offset (DeleteRecords, KIP-107): the partitions' log
start offsets move up, consumers and lookups no longer see what lies below, and the
segments wholly below go from disk. ``--before-time`` deletes every record before the
first one whose timestamp is at or after TIME, found per partition through the time
index (a ListOffsets by timestamp); a partition whose records are all older is emptied
up to its end. Kafka's own kafka-delete-records.sh takes offsets only. Prints each
partition's new log start (its low watermark).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from client.cli._common import (
    add_bootstrap,
    add_command,
    allow_relative_times,
    connect,
    print_table,
    run,
    time_arg,
)


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "delete-records", "delete records below an offset or a time",
                    __doc__)
    p.add_argument("topic")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--before-offset", type=int, metavar="N",
                       help="delete offsets below N (-1 = everything up to the end)")
    which.add_argument("--before-time", type=time_arg, metavar="TIME",
                       help="delete records before the first one at or after TIME "
                            "(ISO-8601 with zone, epoch ms, -15m, now)")
    p.add_argument("--partition", type=int, action="append",
                   help="only this partition (repeatable; default every partition)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    add_bootstrap(p)
    allow_relative_times(p)
    p.set_defaults(func=lambda a: run(lambda: _delete_records(a)))


async def _delete_records(args: argparse.Namespace) -> int:
    from client import admin

    async with await connect(args) as client:
        parts = sorted(args.partition) if args.partition else await client.partitions_for(args.topic)
        if args.before_time is not None:
            offsets = await admin.offsets_before_time(client, args.topic, args.before_time, parts)
        else:
            offsets = {p: args.before_offset for p in parts}
        result = await admin.delete_records(client, args.topic, offsets)
    if args.format == "json":
        json.dump({"topic": args.topic, "partitions": [
            {"partition": r.partition, "low_watermark": r.low_watermark} for r in result]}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    print_table([("PARTITION", "LOW_WATERMARK")]
                + [(str(r.partition), str(r.low_watermark)) for r in result])
    return 0
