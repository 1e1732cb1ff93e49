"""Shared plumbing of the client sub-commands (topics, produce, consume, offsets).

Invariants: every command takes ``--bootstrap-server`` (default: the environment's
``CHRONOLOG_BOOTSTRAP_SERVER``, else 127.0.0.1:9092);
a Kafka error prints ``error: <CODE>: <message>`` on stderr and exits 1; a bad
argument (unparseable time, bad ``k=v``) exits 2 as argparse does; a closed
stdout pipe (``| head``) ends the command quietly with 0.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import uvloop

from client.timeparse import TimeParseError, parse_time, seconds_for_ms_warning
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from client.aio import Client
    from client.security import ClientSecurity

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "CHRONOLOG_BOOTSTRAP_SERVER"


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker to connect to (default ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="give up on a request after this long (default 30)",
    )
    parser.add_argument(
        "--client-config",
        default=None,
        metavar="FILE",
        help="client properties with Kafka/librdkafka names; security.protocol, ssl.*, sasl.* "
        "are used (TLS, SASL PLAIN/SCRAM), other settings ignored",
    )


def client_security(path: str | None) -> ClientSecurity | None:
    """The security settings of a ``--client-config`` file (None: plaintext, no SASL);
    a bad file is a ValueError."""
    from client.security import ClientSecurity, read_client_config

    return ClientSecurity.from_properties(read_client_config(path)) if path else None


async def connect(args: argparse.Namespace) -> Client:
    """The CLI's client for ``--bootstrap-server`` / ``--request-timeout`` /
    ``--client-config`` (its security settings; a bad one is a ValueError: exit 2)."""
    from client.aio import Client

    return await Client.connect(
        args.bootstrap_server,
        client_id="chronolog-cli",
        request_timeout=args.request_timeout,
        security=client_security(getattr(args, "client_config", None)),
    )


def missing_topic_message(topic: str) -> str:
    """What to do about a topic that does not exist (the commands never create one)."""
    return (f"topic {topic!r} does not exist: create it with `chronolog topics create {topic} "
            "--partitions N` (chronolog's commands never create topics; Kafka clients that ask "
            "for it get one made when the broker's auto.create.topics.enable is true)")


async def require_topic(client: Client, topic: str) -> list[int]:
    """The partitions of ``topic``; UNKNOWN_TOPIC_OR_PARTITION says how to create it."""
    try:
        return await client.partitions_for(topic)
    except KafkaError as e:
        if e.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise
        raise KafkaError(e.code, missing_topic_message(topic)) from None


def add_command(
    subparsers: Any, name: str, help: str, doc: str | None
) -> argparse.ArgumentParser:
    """A sub-command whose ``--help`` description is the second paragraph of ``doc``.

    ``doc`` is the command module's docstring; its second paragraph is shown
    as written (line breaks kept), without the reST double backquotes.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=doc.split("\n\n")[1].replace("``", "") if doc else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


_RELATIVE_OR_NUMBER = re.compile(r"^-\d+(?:ms|s|m|h|d|w)?$|^-\d*\.\d+$", re.IGNORECASE)


def allow_relative_times(parser: argparse.ArgumentParser) -> None:
    """Let ``--from-time -15m`` parse as a value, not as an unknown option ``-1``.

    argparse only treats ``-<digits>`` as a value; widening its negative-number
    pattern to our relative forms is safe because no option of ours starts
    with a dash followed by a digit.
    """
    parser._negative_number_matcher = _RELATIVE_OR_NUMBER  # type: ignore[attr-defined]


def time_arg(text: str) -> int:
    """argparse ``type=`` for times: ISO-8601 with zone, epoch ms, or -15m / now.

    Ten digits are still read as milliseconds (as Kafka does), with a warning on
    stderr that names the seconds reading too: it is almost always what was meant.
    """
    try:
        ms = parse_time(text)
    except TimeParseError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if text.strip().isdigit() and (warning := seconds_for_ms_warning(ms, text)):
        print(f"warning: {warning}", file=sys.stderr)
    return ms


def config_arg(text: str) -> tuple[str, str]:
    """argparse ``type=`` for ``name=value`` pairs."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected name=value, got {text!r}")
    return name.strip(), value


def run(main: Callable[[], Coroutine[Any, Any, int | None]]) -> int:
    """Run an async command on uvloop, turning errors into messages and exit codes."""
    runner: Callable[[Coroutine[Any, Any, int | None]], int | None] = uvloop.run
    try:
        return int(runner(main()) or 0)
    except KafkaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (TimeParseError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, don't let Python's
        # exit flush raise again on the dead pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


def progress(total: int | None, unit: str, desc: str, enabled: bool) -> Any:
    """A tqdm bar on stderr that appears only on a terminal and only after 2 s."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        unit=unit,
        unit_scale=True,
        desc=desc,
        file=sys.stderr,
        disable=None if enabled else True,
        delay=2.0,
        mininterval=0.5,
        leave=False,
    )


def print_table(rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns separated by two spaces (first row is the header)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
