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
broker, it waits until the broker's port accepts connections (retrying every
second) and then serves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

from client.cli._common import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, add_command
from protocol.errors import KafkaError

#: Seconds between attempts to reach a broker that is not up yet.
RETRY_S = 1.0


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
    try:
        import uvloop

        from console.app import ConsoleConfig, serve
        from console.settings import SettingsError, load_client_settings
    except ImportError as e:
        print(f"error: the console needs its extra: pip install 'chronolog[console]' ({e})",
              file=sys.stderr)
        return 2
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

    async def main() -> None:
        if await wait_for_broker(bootstrap):
            await serve(config, args.host, args.port)

    try:
        uvloop.run(main())
    except KeyboardInterrupt:
        return 0
    except (OSError, KafkaError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # a malformed --bootstrap-server
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


async def wait_for_broker(bootstrap: str, retry_s: float = RETRY_S) -> bool:
    """Return True once a bootstrap address accepts a TCP connection, False if SIGTERM
    came first.

    Only an address that nothing listens on yet is waited for (the broker may still
    be starting, as in a compose file). Once one accepts, the console connects for
    real, and a TLS or login failure there stops it at once: waiting cannot mend it.
    """
    from client.connection import parse_bootstrap

    addresses = parse_bootstrap(bootstrap)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    waited = False
    try:
        while not stop.is_set():
            for host, port in addresses:
                try:
                    _, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                       10.0)
                except (OSError, TimeoutError):
                    continue
                writer.close()
                if waited:
                    print(f"the broker at {host}:{port} accepts connections", file=sys.stderr,
                          flush=True)
                return True
            if not waited:
                print(f"waiting for the broker at {bootstrap} … (retrying every "
                      f"{retry_s:g} s; Ctrl-C to stop)", file=sys.stderr, flush=True)
                waited = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), retry_s)
        return False
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
