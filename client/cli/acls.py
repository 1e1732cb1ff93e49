"""``chronolog acls add|list|remove``: manage ACLs on a broker with an authorizer.

Flags follow kafka-acls.sh: ``--allow-principal User:alice`` / ``--deny-principal``,
``--operation READ`` (repeatable; ``add`` defaults to ALL), one resource out of
``--topic T``, ``--group G``, ``--cluster`` or ``--transactional-id ID``, and
``--resource-pattern-type LITERAL|PREFIXED`` (``list``/``remove`` also ANY and MATCH).
``--host`` defaults to ``*``. ``list`` without a resource lists every ACL, one per line.
"""

from __future__ import annotations

import argparse
from typing import Any

from client.cli._common import add_bootstrap, add_command, connect, run


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("acls", help="add, list and remove ACLs (kafka-acls.sh flags)")
    sub = p.add_subparsers(dest="acls_command", metavar="ACTION")
    sub.required = True
    for name, help_text in (("add", "create ACLs"), ("list", "print ACLs"),
                            ("remove", "delete the ACLs that match")):
        c = add_command(sub, name, help_text, __doc__)
        add_bootstrap(c)
        res = c.add_mutually_exclusive_group(required=name == "add")
        res.add_argument("--topic")
        res.add_argument("--group")
        res.add_argument("--transactional-id")
        res.add_argument("--cluster", action="store_true")
        c.add_argument("--resource-pattern-type", type=str.upper,
                       default="LITERAL" if name == "add" else "ANY")
        c.add_argument("--allow-principal", action="append", default=[])
        c.add_argument("--deny-principal", action="append", default=[])
        c.add_argument("--operation", action="append", type=str.upper, default=[])
        c.add_argument("--host", default="*" if name == "add" else None)
        c.set_defaults(func=lambda a, n=name: run(lambda: _main(n, a)))


def _resource(args: argparse.Namespace) -> tuple[str, str | None]:
    if args.topic is not None:
        return "TOPIC", args.topic
    if args.group is not None:
        return "GROUP", args.group
    if args.transactional_id is not None:
        return "TRANSACTIONAL_ID", args.transactional_id
    if args.cluster:
        return "CLUSTER", "kafka-cluster"
    return "ANY", None


def _entries(args: argparse.Namespace) -> list[tuple[str | None, str]]:
    """(principal or None, permission) pairs the flags name."""
    out: list[tuple[str | None, str]] = [(p, "ALLOW") for p in args.allow_principal]
    out += [(p, "DENY") for p in args.deny_principal]
    return out


async def _main(action: str, args: argparse.Namespace) -> int:
    from client.acls import Acl, AclFilter, create_acls, delete_acls, describe_acls

    rtype, rname = _resource(args)
    ops = args.operation or (["ALL"] if action == "add" else ["ANY"])
    async with await connect(args) as c:
        if action == "add":
            if not _entries(args):
                raise ValueError("add needs --allow-principal or --deny-principal")
            acls = [Acl(rtype, str(rname), args.resource_pattern_type, str(p), args.host, op, perm)
                    for p, perm in _entries(args) for op in ops]
            await create_acls(c, acls)
            for a in acls:
                print(f"Added {_line(a)}")
            return 0
        filters = [AclFilter(rtype, rname, args.resource_pattern_type, p, args.host, op, perm)
                   for p, perm in (_entries(args) or [(None, "ANY")]) for op in ops]
        if action == "list":
            seen = []
            for f in filters:
                seen += [a for a in await describe_acls(c, f) if a not in seen]
            for a in sorted(seen):
                print(_line(a))
            return 0
        for a in await delete_acls(c, filters):
            print(f"Removed {_line(a)}")
    return 0


def _line(a: Any) -> str:
    return (f"{a.permission} {a.principal} {a.operation} from host {a.host} on "
            f"{a.resource_type}:{a.pattern_type}:{a.resource_name}")
