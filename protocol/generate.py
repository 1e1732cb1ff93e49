"""``python -m protocol.generate`` (``make generate``): rewrite ``protocol/messages.py``.

The typed classes are generated at build time, not import time, so that mypy
checks handler and client code against them; ``tests/protocol/test_generated.py``
fails when the committed file differs from :func:`source`.
"""

from __future__ import annotations

from pathlib import Path

from protocol.api import MESSAGES
from protocol.codegen import classes_source

PATH = Path(__file__).with_name("messages.py")


def source() -> str:
    """What ``protocol/messages.py`` must hold for the declarations as they stand."""
    return classes_source([message for pair in MESSAGES.values() for message in pair])


if __name__ == "__main__":
    PATH.write_text(source())
    print(f"wrote {PATH}")
