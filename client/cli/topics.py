"""``chronolog topics create|list|describe|alter|delete``: manage topics on a broker.

``list`` prints one topic name per line (sorted) so scripts can consume it;
``describe`` prints partitions with their log start and end offsets and, when
the broker implements DescribeConfigs, a table of the topic's configs with each
value and its source (``DYNAMIC_TOPIC_CONFIG`` = set on the topic,
``STATIC_BROKER_CONFIG`` = from the broker's ``log.*`` setting, ``DEFAULT_CONFIG``);
``--format json`` gives the same as one JSON object. Each partition also shows its
late records (a timestamp below the largest one before it, in offset order) and the
largest lateness, ``-`` against a broker without PlanTimeWindow (Kafka). A topic with
``remote.storage.enable=true`` also gets its remote tier per partition (``chronolog
tier``'s table: local start, last tiered offset, upload lag, local and remote bytes).

``alter`` changes a topic while the broker runs: ``--config k=v`` sets and
``--delete-config k`` removes topic configs (IncrementalAlterConfigs: the configs not
named keep their values; a removed one falls back to the broker default), and
``--partitions N`` grows the topic to N partitions (CreatePartitions; never fewer).
``--validate-only`` asks the broker to check the change and apply nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from client.aio import DESCRIBE_CONFIGS
from client.cli._common import add_bootstrap, config_arg, connect, print_table, run
from client.cli._disorder import disorder_or_none, format_lateness


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe and delete topics")
    sub = p.add_subparsers(dest="topics_command", metavar="ACTION")
    sub.required = True

    c = sub.add_parser("create", help="create a topic")
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=1, help="number of partitions (default 1)")
    c.add_argument(
        "--config",
        type=config_arg,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="topic config with Kafka's name, e.g. message.timestamp.type=LogAppendTime "
        "(repeatable)",
    )
    c.add_argument("--if-not-exists", action="store_true", help="succeed if it already exists")
    add_bootstrap(c)
    c.set_defaults(func=lambda a: run(lambda: _create(a)))

    ls = sub.add_parser("list", help="list topic names, one per line")
    add_bootstrap(ls)
    ls.set_defaults(func=lambda a: run(lambda: _list(a)))

    d = sub.add_parser("describe", help="partitions, log start/end offsets and configs")
    d.add_argument("name")
    d.add_argument("--format", choices=["table", "json"], default="table")
    d.add_argument("--remote", default=None, metavar="URL",
                   help="a tiered topic's bucket (rsm.config.url), to show its remote bytes")
    d.add_argument("--rsm", type=config_arg, action="append", default=[], metavar="NAME=VALUE",
                   help="an rsm.config.* setting for --remote, without the prefix (repeatable)")
    add_bootstrap(d)
    d.set_defaults(func=lambda a: run(lambda: _describe(a)))

    al = sub.add_parser("alter", help="change topic configs or grow partitions, online")
    al.add_argument("name")
    al.add_argument("--config", type=config_arg, action="append", default=[], metavar="NAME=VALUE",
                    help="set a topic config, e.g. retention.ms=3600000 (repeatable)")
    al.add_argument("--delete-config", action="append", default=[], metavar="NAME",
                    help="remove a topic config override (repeatable)")
    al.add_argument("--partitions", type=int, default=None, help="grow to this many partitions")
    al.add_argument("--validate-only", action="store_true",
                    help="let the broker check the change without applying it")
    add_bootstrap(al)
    al.set_defaults(func=lambda a: run(lambda: _alter(a)))

    rm = sub.add_parser("delete", help="delete a topic and its data")
    rm.add_argument("name")
    add_bootstrap(rm)
    rm.set_defaults(func=lambda a: run(lambda: _delete(a)))


_connect = connect


async def _create(args: argparse.Namespace) -> int:
    from protocol.errors import ErrorCode, KafkaError

    if args.partitions < 1:
        raise ValueError(f"--partitions must be >= 1, got {args.partitions}")
    async with await _connect(args) as c:
        try:
            await c.create_topic(args.name, args.partitions, dict(args.config))
        except KafkaError as e:
            if args.if_not_exists and e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                print(f"Topic {args.name} already exists.", file=sys.stderr)
                return 0
            raise
    print(f"Created topic {args.name} with {args.partitions} partition(s).")
    return 0


async def _list(args: argparse.Namespace) -> int:
    async with await _connect(args) as c:
        topics = await c.list_topics()
    for name in sorted(topics):
        print(name)
    return 0


async def _describe(args: argparse.Namespace) -> int:
    async with await _connect(args) as c:
        parts = await c.partitions_for(args.name)
        start = await c.earliest(args.name, parts)
        end = await c.latest(args.name, parts)
        disorder = await disorder_or_none(c, args.name, parts)
        entries = (await c.describe_config_entries(args.name)
                   if c.supports(DESCRIBE_CONFIGS) else None)
    rows = [
        {"partition": p, "log_start_offset": start[p], "log_end_offset": end[p],
         "records": end[p] - start[p],
         "late_records": None if disorder is None else disorder[p].late_records,
         "max_lateness_ms": None if disorder is None else disorder[p].max_lateness_ms}
        for p in parts
    ]
    configs = None if entries is None else {
        name: {"value": e.value, "source": e.source, "read_only": e.read_only,
               "sensitive": e.sensitive}
        for name, e in sorted(entries.items())
    }
    tier = None
    if configs is not None and str(configs.get("remote.storage.enable", {}).get("value")) == "true":
        from client.cli.tier import open_bucket, tier_rows
        from protocol.errors import ErrorCode, KafkaError

        async with await _connect(args) as c:
            try:
                tier = await tier_rows(c, args.name, parts, open_bucket(args.remote, args.rsm))
            except KafkaError as e:
                if e.code != ErrorCode.UNSUPPORTED_VERSION:
                    raise
                print("Remote tier: not shown (the broker lacks ListOffsets v9, KIP-1005)",
                      file=sys.stderr)
    info = {"topic": args.name, "partitions": rows, "configs": configs, "tier": tier}
    if args.format == "json":
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    print(f"Topic: {args.name}  Partitions: {len(parts)}")
    print_table(
        [("PARTITION", "LOG_START", "LOG_END", "RECORDS", "LATE_RECORDS", "MAX_LATENESS")]
        + [
            (str(r["partition"]), str(r["log_start_offset"]), str(r["log_end_offset"]),
             str(r["records"]), "-" if r["late_records"] is None else str(r["late_records"]),
             "-" if not r["late_records"] else format_lateness(r["max_lateness_ms"] or 0))
            for r in rows
        ]
    )
    if tier is not None:
        from client.cli.tier import print_tier_table

        print()
        print("Remote tier (remote.storage.enable=true):")
        print_tier_table(tier, with_topic=False)
    if configs is None:
        print("Configs: not shown (the broker does not implement DescribeConfigs)")
    else:
        print()
        print_table(
            [("CONFIG", "VALUE", "SOURCE")]
            + [(name, "null" if c["value"] is None else str(c["value"]), str(c["source"]))
               for name, c in configs.items()]
        )
    return 0


async def _alter(args: argparse.Namespace) -> int:
    from client import admin

    if not args.config and not args.delete_config and args.partitions is None:
        raise ValueError("nothing to alter: give --config, --delete-config or --partitions")
    verb = "Would change" if args.validate_only else "Changed"
    async with await _connect(args) as c:
        if args.config or args.delete_config:
            await admin.alter_topic_configs(c, args.name, dict(args.config), args.delete_config,
                                            validate_only=args.validate_only)
            changes = [f"{k}={v}" for k, v in args.config] + [f"-{k}" for k in args.delete_config]
            print(f"{verb} configs of topic {args.name}: {', '.join(changes)}.")
        if args.partitions is not None:
            await admin.create_partitions(c, args.name, args.partitions,
                                          validate_only=args.validate_only)
            print(f"{verb} topic {args.name} to {args.partitions} partition(s).")
    return 0


async def _delete(args: argparse.Namespace) -> int:
    async with await _connect(args) as c:
        await c.delete_topic(args.name)
    print(f"Deleted topic {args.name}.")
    return 0

