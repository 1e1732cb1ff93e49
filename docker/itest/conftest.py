"""Fixtures of the suite the compose ``tests`` service runs against the ``broker`` service.

The broker is the image's broker in its own container, reached by service name
over the compose network (``CHRONOLOG_BOOTSTRAP``, ``CHRONOLOG_METRICS_URL``).
``CHRONOLOG_BROKER_DATA`` is the broker's data volume mounted read-only here.
``CHRONOLOG_CONTROL_DIR``, when set (docker/podman/run_stack.py sets it), is a
directory shared with the host: a request file there asks the host to stop,
SIGKILL or start the broker container, and the host writes back a reply (see
:class:`BrokerControl`). Without it the restart and crash tests skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stackhelp import BrokerControl, Stack  # noqa: E402


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    bootstrap = os.environ.get("CHRONOLOG_BOOTSTRAP")
    if not bootstrap:
        pytest.skip("runs inside the compose stack (make test-docker), against its broker service")
    data = os.environ.get("CHRONOLOG_BROKER_DATA")
    s = Stack(bootstrap, os.environ.get("CHRONOLOG_METRICS_URL", "http://broker:9404/metrics"),
              Path(data) if data else None)
    s.wait_until_healthy()
    yield s


@pytest.fixture(scope="session")
def control(stack: Stack) -> BrokerControl:
    directory = os.environ.get("CHRONOLOG_CONTROL_DIR")
    if not directory:
        pytest.skip("no host-side control of the broker container (make test-docker provides it)")
    return BrokerControl(Path(directory))


@pytest.fixture(scope="session")
def data_dir(stack: Stack) -> Path:
    if stack.data_dir is None:
        pytest.skip("the broker's data volume is not mounted here (CHRONOLOG_BROKER_DATA)")
    return stack.data_dir
