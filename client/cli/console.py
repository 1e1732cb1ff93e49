"""``chronolog console``: a web console that shows a topic's records over time.

Starts a web app at http://HOST:PORT/ that is a Kafka client of
--bootstrap-server (Chronolog or any Kafka-protocol broker): an overview of
topics, a timeline of records per time bucket computed from ListOffsets alone,
a record browser from a time or an offset, a live tail, and consumer groups
with their lag. Client settings (client.id, request.timeout.ms,
bootstrap.servers, security.protocol, ssl.*, sasl.*) come from a properties
file with Kafka's names (--client-config). Read-only unless --allow-writes.
The broker is --bootstrap-server, else bootstrap.servers from --client-config,
else $CHRONOLOG_BOOTSTRAP_SERVER, else 127.0.0.1:9092. Started before the
broker, it serves pages that say the broker is not reachable yet and connects
once it answers (console/link.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import Any

from client.cli._common import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, add_command
from client.extras import install_hint
from protocol.errors import KafkaError


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "console", "web console: topics, timeline, records, live tail, groups", __doc__)
    p.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT",
                   help=f"broker to connect to (default: bootstrap.servers from --client-config, "
                        f"else ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to serve on (default 8080)")
    p.add_argument("--client-config", metavar="FILE",
                   help="Kafka client properties (client.id, request.timeout.ms, security.protocol, "
                        "ssl.*, sasl.*, ...)")
    p.add_argument("--allow-writes", action="store_true",
                   help="allow resetting a consumer group's offsets to a time from its page")
    p.set_defaults(func=_console)


def _console(args: argparse.Namespace) -> int:
    missing = [m for m in ("aiohttp", "jinja2") if importlib.util.find_spec(m) is None]
    if missing:  # the console extra: say what to install rather than trace an import
        print(f"error: {install_hint('console')} (missing: {', '.join(missing)})",
              file=sys.stderr)
        return 2
    import uvloop

    from console.app import ConsoleConfig, serve
    from console.settings import SettingsError, load_client_settings

    try:
        settings = load_client_settings(args.client_config)
    except SettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name in settings.unused:
        print(f"note: {name} in {args.client_config} is not used by the console", file=sys.stderr)
    bootstrap = (args.bootstrap_server or settings.bootstrap_servers
                 or os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP)
    config = ConsoleConfig(bootstrap, settings, args.allow_writes, args.host)

    try:
        uvloop.run(serve(config, args.host, args.port))
    except KeyboardInterrupt:
        return 0
    except (OSError, KafkaError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # a malformed --bootstrap-server
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
