"""``chronolog users add|delete|list``: SCRAM users (KIP-554), online or offline.

Online (``--bootstrap-server HOST:PORT``, plus ``--client-config FILE`` with the
caller's own security settings under librdkafka's names, e.g. security.protocol,
sasl.mechanism, sasl.username, sasl.password, ssl.ca.location) the change goes through
AlterUserScramCredentials / DescribeUserScramCredentials, as kafka-configs.sh does.
Offline (``--data-dir DIR``) the credentials file is written directly, to create the
first user before the broker starts; refused while a broker holds that data directory.
The password is salted (32 random bytes) and hashed with PBKDF2 on this side: it is
never sent nor stored.

Invariant: ``users list`` prints one line per user and mechanism:
``NAME MECHANISM iterations=N``, sorted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from client.cli._common import BOOTSTRAP_ENV, add_command, run
from protocol.errors import ErrorCode, KafkaError
from protocol.scram import MECHANISM_BY_CODE, MECHANISMS, MIN_ITERATIONS, salted_password

DESCRIBE = 50
ALTER = 51


def register(subparsers: Any) -> None:
    parser = add_command(subparsers, "users", "manage SCRAM users (KIP-554)", __doc__)
    sub = parser.add_subparsers(dest="users_command", metavar="ACTION")
    sub.required = True
    add = sub.add_parser("add", help="add a user or change its password")
    add.add_argument("--user", required=True)
    add.add_argument("--password", required=True)
    add.add_argument("--mechanism", required=True, choices=sorted(MECHANISMS))
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    delete = sub.add_parser("delete", help="delete a user's credentials")
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", choices=sorted(MECHANISMS), default=None,
                        help="only this mechanism (default: every one the user has)")
    lst = sub.add_parser("list", help="list users and their mechanisms")
    for p in (add, delete, lst):
        where = p.add_mutually_exclusive_group()
        where.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT")
        where.add_argument("--data-dir", default=None, metavar="DIR")
        p.add_argument("--client-config", default=None, metavar="FILE",
                       help="the caller's security settings (librdkafka names)")
        p.add_argument("--request-timeout", type=float, default=30.0)
        p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if args.data_dir is not None:
        return _offline(args)
    if args.bootstrap_server is None:
        args.bootstrap_server = os.environ.get(BOOTSTRAP_ENV) or "127.0.0.1:9092"
    return run(lambda: _online(args))


def _print(users: dict[str, dict[str, int]]) -> None:
    for user in sorted(users):
        for mech, iterations in sorted(users[user].items()):
            print(f"{user} {mech} iterations={iterations}")


def _offline(args: argparse.Namespace) -> int:
    from broker.security.credentials import CredentialStore, DataDirLock, DataDirLocked
    from protocol.scram import make_credential

    data_dir = Path(args.data_dir)
    try:
        lock = DataDirLock(data_dir)
    except DataDirLocked as exc:
        print(f"error: {exc}; use --bootstrap-server while it runs", file=sys.stderr)
        return 1
    try:
        store = CredentialStore(data_dir)
        if args.users_command == "list":
            _print({u: {m: c.iterations for m, c in ms.items()} for u, ms in store.users().items()})
        elif args.users_command == "add":
            store.apply([(args.user, args.mechanism,
                          make_credential(args.mechanism, args.password, args.iterations))], [])
        else:
            mechs = [args.mechanism] if args.mechanism else sorted(store.users().get(args.user, {}))
            if not mechs or any(store.get(args.user, m) is None for m in mechs):
                print(f"error: RESOURCE_NOT_FOUND: no such credential for {args.user}",
                      file=sys.stderr)
                return 1
            store.apply([], [(args.user, m) for m in mechs])
        return 0
    finally:
        lock.release()


def _check(results: Any) -> None:
    for r in results:
        if r.error_code:
            raise KafkaError(ErrorCode(r.error_code), f"{r.user}: {r.error_message or ''}")


async def _online(args: argparse.Namespace) -> int:
    from client.connection import parse_bootstrap
    from client.security import ClientSecurity, open_connection, read_client_config

    settings = read_client_config(args.client_config) if args.client_config else {}
    sec = ClientSecurity.from_properties(settings)
    host, port = parse_bootstrap(args.bootstrap_server)[0]
    conn = await open_connection(host, port, sec, client_id="chronolog-users",
                                 request_timeout=args.request_timeout)
    try:
        if args.users_command == "list":
            resp = await conn.request(DESCRIBE, 0, {"users": None})
            if resp.error_code:
                raise KafkaError(ErrorCode(resp.error_code), resp.error_message or "")
            _check(resp.results)
            _print({r.user: {MECHANISM_BY_CODE.get(i.mechanism, str(i.mechanism)): i.iterations
                             for i in r.credential_infos} for r in resp.results})
        elif args.users_command == "add":
            salt = os.urandom(32)
            salted = salted_password(args.mechanism, args.password.encode(), salt, args.iterations)
            resp = await conn.request(ALTER, 0, {"deletions": [], "upsertions": [{
                "name": args.user, "mechanism": MECHANISMS[args.mechanism][1],
                "iterations": args.iterations, "salt": salt, "salted_password": salted}]})
            _check(resp.results)
        else:
            mechs = [args.mechanism] if args.mechanism else None
            if mechs is None:
                desc = await conn.request(DESCRIBE, 0, {"users": [{"name": args.user}]})
                _check(desc.results)
                mechs = [MECHANISM_BY_CODE[i.mechanism] for i in desc.results[0].credential_infos]
            # One request per mechanism: a broker refuses two alterations of one user in
            # one request (DUPLICATE_RESOURCE), as Kafka's controller does.
            for m in mechs:
                resp = await conn.request(ALTER, 0, {"upsertions": [], "deletions": [
                    {"name": args.user, "mechanism": MECHANISMS[m][1]}]})
                _check(resp.results)
    finally:
        await conn.close()
    return 0
