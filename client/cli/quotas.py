"""``chronolog quotas alter|describe``: client quotas (KIP-546), as kafka-configs.sh does them.

The entity is ``--user NAME`` and/or ``--client-id NAME``, or ``--user-default`` /
``--client-id-default`` for the default entity. ``alter --add-config
producer_byte_rate=1048576,consumer_byte_rate=2097152`` sets values and
``--delete-config producer_byte_rate`` removes them. ``describe`` prints every quota
(or those of the entity named), one entity per line.
"""

from __future__ import annotations

import argparse
from typing import Any

from client.cli._common import add_bootstrap, add_command, run


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("quotas", help="alter and describe client quotas")
    sub = p.add_subparsers(dest="quotas_command", metavar="ACTION")
    sub.required = True
    for name, help_text in (("alter", "set or delete quota values of an entity"),
                            ("describe", "print quotas")):
        c = add_command(sub, name, help_text, __doc__)
        add_bootstrap(c)
        c.add_argument("--user")
        c.add_argument("--user-default", action="store_true")
        c.add_argument("--client-id")
        c.add_argument("--client-id-default", action="store_true")
        if name == "alter":
            c.add_argument("--add-config", default="", metavar="K=V,...")
            c.add_argument("--delete-config", default="", metavar="K,...")
        c.set_defaults(func=lambda a, n=name: run(lambda: _main(n, a)))


def _entity(args: argparse.Namespace) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    if args.user is not None or args.user_default:
        out["user"] = None if args.user_default else args.user
    if args.client_id is not None or args.client_id_default:
        out["client-id"] = None if args.client_id_default else args.client_id
    return out


def _show(entity: dict[str, str | None]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in sorted(entity.items()))


async def _main(action: str, args: argparse.Namespace) -> int:
    from client.cli._common import connect
    from client.quotas import alter_quotas, describe_quotas

    entity = _entity(args)
    async with await connect(args) as c:
        if action == "alter":
            if not entity:
                raise ValueError("alter needs --user/--user-default and/or --client-id/--client-id-default")
            values = {}
            for item in filter(None, args.add_config.split(",")):
                key, sep, value = item.partition("=")
                if not sep:
                    raise ValueError(f"expected key=value, got {item!r}")
                values[key.strip()] = float(value)
            removed = tuple(k.strip() for k in args.delete_config.split(",") if k.strip())
            await alter_quotas(c, entity, values, removed)
            print(f"Altered quotas of {_show(entity)}")
            return 0
        for ent, vals in sorted(await describe_quotas(c, entity or None), key=lambda e: repr(e)):
            shown = ", ".join(f"{k}={v:g}" for k, v in sorted(vals.items()))
            print(f"{_show(ent)}: {shown}")
    return 0
