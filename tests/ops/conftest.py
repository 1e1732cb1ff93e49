"""Fixtures for the operations tests: brokers with UDP ingest and metrics switched on."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opshelp import (  # noqa: E402
    BrokerProcess,
    free_port_number,
    free_udp_port,
    udp_overrides,
    wait_until_serving,
)


@pytest.fixture(scope="module")
def tsv_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, tuple[str, int], str]]:
    """One tsv-framing UDP broker shared by a module's hypothesis examples (a broker per
    example would dominate the run time)."""
    udp_port, mport = free_udp_port(), free_port_number()
    data = tmp_path_factory.mktemp("tsv-broker") / "data"
    data.mkdir()
    proc = BrokerProcess(data, free_port_number(), udp_overrides(udp_port, mport, udp_format="tsv"))
    proc.start()
    wait_until_serving(mport)
    try:
        yield proc, ("127.0.0.1", udp_port), f"http://127.0.0.1:{mport}/metrics"
    finally:
        proc.stop()
