"""Which optional extra of the ``chronolog`` package a missing module belongs to.

The base install (``pip install chronolog``, ``make run``) is what the broker needs;
column-wise paths, the console and Spark each have an extra (pyproject.toml). A feature
that finds its extra missing says exactly what to install instead of showing a bare
``ModuleNotFoundError``: that sentence is made here, once.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["EXTRAS", "extra_for", "install_hint", "main"]

# Top-level module -> the extra that installs it.
EXTRAS = {
    "numpy": "arrow",
    "pyarrow": "arrow",
    "pyspark": "spark",
    "pandas": "spark",
    "py4j": "spark",
    "aiohttp": "console",
    "jinja2": "console",
}

_WHAT = {
    "arrow": "column-wise producing and reading (chronolog produce, produce_arrow, "
             "consume_arrow, UDP ingest) needs PyArrow and NumPy",
    "spark": "the Spark source and jobs need PySpark",
    "console": "the web console needs aiohttp and jinja2",
}


def extra_for(exc: BaseException) -> str | None:
    """The extra whose absence raised ``exc`` (a ModuleNotFoundError), or None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    return EXTRAS.get(exc.name.partition(".")[0])


def install_hint(extra: str) -> str:
    """One sentence: what needs ``extra`` and the command that installs it."""
    return (f"{_WHAT[extra]}: pip install 'chronolog[{extra}]' "
            f"(in a checkout of the repository: make install, which installs every extra)")


def main(argv: Sequence[str] | None = None) -> int:
    """The ``chronolog`` command: ``client.cli.main``, with a missing extra named, not traced."""
    from client.cli import main as cli

    try:
        return cli(argv)
    except ModuleNotFoundError as exc:
        extra = extra_for(exc)
        if extra is None:
            raise
        print(f"chronolog: {install_hint(extra)} ({exc})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
