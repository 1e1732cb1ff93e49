"""``chronolog groups list|describe|delete|reset-offsets``: consumer groups on a broker.

``list`` prints every group with its state and type; ``describe GROUP`` its state,
members (client id, host, assigned partitions; for a KIP-848 group also the group
and assignment epochs, each member's epoch and target assignment) and per partition
the committed offset, log end, lag and owning member; ``delete GROUP`` removes an empty group and its offsets.
``reset-offsets`` moves an inactive group's committed offsets with the scenarios
of Kafka's kafka-consumer-groups tool (--to-time, --by-duration, --to-earliest,
--to-latest, --to-offset, --shift-by), clamped to each partition's [earliest,
latest]; a time with no record at or after it resolves to the log end. Unlike
Kafka's tool, which only prints the plan unless given --execute, it applies the
plan unless given --dry-run. ``--format json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from typing import Any

from client.aio import Client
from client.cli._common import add_bootstrap, allow_relative_times, print_table, run, time_arg
from client.groups import (
    INACTIVE_STATES,
    ActiveGroupError,
    ResetPlanEntry,
    apply_plan,
    delete_group,
    describe_group,
    group_state,
    list_groups,
    parse_duration,
    plan_reset,
)
from client.timeparse import format_time


def _topic_arg(text: str) -> tuple[str, list[int]]:
    """``--topic t`` (every partition) or ``--topic t:0,2``."""
    name, sep, parts = text.rpartition(":")  # Kafka topic names cannot contain ':'
    if not sep:
        return text, []
    try:
        partitions = [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P,..., got {text!r}") from None
    if not name or not partitions or min(partitions) < 0:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P,..., got {text!r}")
    return name, partitions


def _duration_arg(text: str) -> int:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("groups", help="list, describe, delete consumer groups; reset offsets",
                              description=__doc__.split("\n\n")[1].replace("``", ""),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="groups_command", metavar="ACTION")
    sub.required = True

    ls = sub.add_parser("list", help="every group with its state and type")
    ls.add_argument("--state", action="append", default=[], help="only groups in this state (repeatable)")
    ls.add_argument("--format", choices=["table", "json"], default="table")
    add_bootstrap(ls)
    ls.set_defaults(func=lambda a: run(lambda: _list(a)))

    d = sub.add_parser("describe", help="state, members and per-partition lag of a group")
    d.add_argument("group")
    d.add_argument("--format", choices=["table", "json"], default="table")
    add_bootstrap(d)
    d.set_defaults(func=lambda a: run(lambda: _describe(a)))

    rm = sub.add_parser("delete", help="delete an empty group and its committed offsets")
    rm.add_argument("group")
    add_bootstrap(rm)
    rm.set_defaults(func=lambda a: run(lambda: _delete(a)))

    r = sub.add_parser("reset-offsets", help="move an inactive group's committed offsets",
                       description="Applies the plan unless --dry-run is given (Kafka's tool "
                       "dry-runs unless --execute). The group must have no members.")
    r.add_argument("--group", required=True)
    scope = r.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", type=_topic_arg, action="append", metavar="TOPIC[:P,P...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has committed offsets for")
    how = r.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-time", type=time_arg, metavar="TIME",
                     help="first offset at or after TIME (ISO-8601 with zone, epoch ms, -15m, now)")
    how.add_argument("--by-duration", type=_duration_arg, metavar="DURATION",
                     help="first offset at or after now - DURATION (PnDTnHnMnS as Kafka, or 15m)")
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    how.add_argument("--shift-by", type=int, metavar="N",
                     help="committed offset + N (negative moves back; clamped to the log)")
    r.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    r.add_argument("--format", choices=["table", "json"], default="table")
    add_bootstrap(r)
    allow_relative_times(r)
    r.set_defaults(func=lambda a: run(lambda: _reset(a)))


async def _connect(args: argparse.Namespace) -> Client:
    from client.cli._common import connect  # --client-config's security too

    return await connect(args)


def _json(obj: Any) -> None:
    json.dump(obj, sys.stdout)
    sys.stdout.write("\n")


async def _list(args: argparse.Namespace) -> int:
    async with await _connect(args) as client:
        groups = await list_groups(client, states=args.state)
    if args.format == "json":
        _json({"groups": [asdict(g) for g in groups]})
        return 0
    print_table([("GROUP", "STATE", "TYPE", "PROTOCOL-TYPE")]
                + [(g.group_id, g.state or "-", g.type or "-", g.protocol_type or "-") for g in groups])
    return 0


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _partitions(assignment: dict[str, list[int]] | None) -> str:
    """``t:0,1 u:2`` (``-`` for none): how the describe table writes an assignment."""
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted((assignment or {}).items())) or "-"


async def _describe(args: argparse.Namespace) -> int:
    async with await _connect(args) as client:
        desc = await describe_group(client, args.group)
    if args.format == "json":
        _json(asdict(desc))
        return 0
    epochs = "" if desc.group_epoch is None else \
        f"  GROUP-EPOCH {desc.group_epoch}  ASSIGNMENT-EPOCH {desc.assignment_epoch}"
    print(f"GROUP {desc.group_id}  STATE {desc.state}  TYPE {_cell(desc.type)}  "
          f"PROTOCOL-TYPE {_cell(desc.protocol_type)}  "
          f"{'ASSIGNOR' if desc.group_epoch is not None else 'PROTOCOL'} {_cell(desc.protocol)}  "
          f"MEMBERS {len(desc.members)}{epochs}")
    if desc.members and desc.group_epoch is not None:  # KIP-848: epochs and target assignments
        print()
        print_table([("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT",
                      "TARGET-ASSIGNMENT")] + [
            (m.member_id, _cell(m.group_instance_id), m.client_id, m.client_host, _cell(m.member_epoch),
             _partitions(m.assignment), _partitions(m.target_assignment)) for m in desc.members])
    elif desc.members:
        print()
        print_table([("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT")] + [
            (m.member_id, _cell(m.group_instance_id), m.client_id, m.client_host, _partitions(m.assignment))
            for m in desc.members])
    if desc.partitions:
        print()
        print_table([("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID")] + [
            (p.topic, str(p.partition), _cell(p.committed), str(p.log_end), _cell(p.lag), _cell(p.member_id))
            for p in desc.partitions])
    return 0


async def _delete(args: argparse.Namespace) -> int:
    async with await _connect(args) as client:
        await delete_group(client, args.group)
    print(f"deleted group {args.group}")
    return 0


def _print_plan(args: argparse.Namespace, plan: list[ResetPlanEntry], applied: bool) -> None:
    if args.format == "json":
        _json({"group": args.group, "applied": applied, "partitions": [asdict(e) for e in plan]})
        return
    print_table([("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")] + [
        (args.group, e.topic, str(e.partition), _cell(e.current), str(e.new)) for e in plan])
    print("(dry run: nothing changed)" if not applied else f"applied to {len(plan)} partition(s)",
          file=sys.stderr)


async def _reset(args: argparse.Namespace) -> int:
    topics: dict[str, list[int] | None] | None = None
    if not args.all_topics:
        topics = {}
        for name, parts in args.topic:  # a bare topic (all partitions) wins over a list
            before = topics.get(name, [])
            topics[name] = None if not parts or before is None else sorted({*before, *parts})
    to_time = args.to_time
    if args.by_duration is not None:
        to_time = max(time.time_ns() // 1_000_000 - args.by_duration, 0)
        print(f"--by-duration: records at or after {format_time(to_time)}", file=sys.stderr)
    async with await _connect(args) as client:
        state = await group_state(client, args.group)
        if state not in INACTIVE_STATES:  # Kafka's tool refuses a dry run too
            print(f"Error: {ActiveGroupError(args.group, state)}", file=sys.stderr)
            return 1
        plan = await plan_reset(
            client, args.group, topics, to_time=to_time, to_earliest=args.to_earliest,
            to_latest=args.to_latest, to_offset=args.to_offset, shift_by=args.shift_by,
        )
        if not args.dry_run:
            try:
                await apply_plan(client, args.group, plan)
            except ActiveGroupError as e:
                print(f"Error: {e}", file=sys.stderr)
                return 1
    _print_plan(args, plan, applied=not args.dry_run)
    return 0
