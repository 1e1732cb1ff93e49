"""Client tests run against the real broker subprocess (fixture ``broker`` from tests/conftest.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from client import SyncClient  # noqa: E402


@pytest.fixture
def sync_client(broker) -> Iterator[SyncClient]:  # type: ignore[no-untyped-def]
    with SyncClient(broker.bootstrap, client_id="tests") as c:
        yield c
