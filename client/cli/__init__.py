"""The ``chronolog`` command line.

Each sub-command lives in its own module in this package and exposes
``register(subparsers)``; that keeps the broker, client, pipeline and operator
commands in separate files while ``main`` stays one small table-free loop.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's, via the package metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("chronolog")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chronolog",
        description="Chronolog: a Kafka-protocol event-log broker with exact time travel.",
    )
    parser.add_argument("--version", action="version", version=f"chronolog {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
