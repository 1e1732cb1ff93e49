"""``chronolog serve``: run the broker (the same arguments as ``python -m broker``)."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from broker.server import run_from_args

    return run_from_args(args)


def register(subparsers: Any) -> None:
    from broker.config import add_arguments

    parser = subparsers.add_parser(
        "serve",
        help="run the broker",
        description="Run the Chronolog broker: chronolog serve [server.properties] "
        "[--data-dir DIR] [--host H] [--port P] [--override name=value ...]",
    )
    add_arguments(parser)
    parser.set_defaults(func=_run)
