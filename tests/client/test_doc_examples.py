"""The client examples of README.md and docs/client.md, run as written against a real
broker (only the bootstrap address is replaced)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def python_block(doc: str, marker: str) -> str:
    """The ```python block of ``doc`` that contains ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), flags=re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"{doc}: {len(found)} python blocks contain {marker!r}"
    return found[0]


@pytest.mark.parametrize(("doc", "marker"), [
    ("README.md", "read_time_range"),
    ("docs/client.md", "produce_arrow"),
])
def test_client_examples_run_as_written(broker, doc: str, marker: str) -> None:  # type: ignore[no-untyped-def]
    code = python_block(doc, marker).replace("127.0.0.1:9092", broker.bootstrap)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{doc}:{marker}", "exec"), {})
    printed = out.getvalue()
    if marker == "produce_arrow":
        assert printed.rstrip().endswith(" 3")  # the three rows read back
    else:
        assert "home" in printed and "cart" in printed
