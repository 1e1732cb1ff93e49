"""Project-wide rules that are cheap to check mechanically."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("broker", "protocol", "storage", "client", "pipeline", "console")

# The record-batch codec and what travels with it: the modules of storage/ that the
# client side (client/, pipeline/) may use to build and decode batches.
_CODEC = {"storage.records", "storage.columnar", "storage.codecs", "storage.errors",
          "storage.planner", "storage.primitives"}
# The tier's shared formats: what a reader of the bucket needs besides the codec (Spark's
# remoteStorage reads manifests, zone maps and transaction indexes straight from it).
_TIER_FORMATS = {"storage.remote.manifest", "storage.remote.store", "storage.txnindex",
                 "storage.zonemap"}

# What each package may import of ours (a name, or anything below it). client/cli/ is
# the application and may import every layer; bench/ and tests/ sit on top.
ALLOWED: dict[str, set[str]] = {
    "protocol": {
        "protocol", "storage.records", "storage.codecs", "storage.errors", "storage.primitives",
    },
    "storage": {"storage"},
    "broker": {"broker", "protocol", "storage"},
    "client": {"client", "protocol"} | _CODEC,
    "pipeline": {"pipeline", "client"} | _CODEC | _TIER_FORMATS,
    "console": {"console", "client", "protocol"},
}
APPLICATION = ("client/cli",)


def _imports(path: Path) -> list[str]:
    """Every absolute import in ``path``; ``from storage import records`` counts as
    ``storage.records``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in LAYERS:
                names += [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                names.append(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_lower_layers_import_only_what_they_may(layer: str) -> None:
    allowed = ALLOWED[layer]
    offenders = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        if str(path.relative_to(ROOT)).startswith(APPLICATION):
            continue
        for name in _imports(path):
            top = name.split(".")[0]
            if top not in LAYERS:
                continue
            if not any(name == a or name.startswith(a + ".") for a in allowed):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


def test_the_console_is_a_client_application() -> None:
    """console/ talks to brokers as a client: it never imports broker/ or storage/
    (the record codec reaches it through client/), nor pipeline/."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "console").rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in {"broker", "storage", "pipeline"}
    ]
    assert offenders == []


def test_storage_imports_of_protocol_are_only_the_codec_direction() -> None:
    """storage/ must not import protocol/ at all (the codec lives in storage)."""
    for path in (ROOT / "storage").rglob("*.py"):
        assert not any(n.split(".")[0] == "protocol" for n in _imports(path)), path


async def test_async_tests_run_on_uvloop() -> None:
    import uvloop

    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
