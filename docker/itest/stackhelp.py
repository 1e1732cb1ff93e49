"""What the compose suite's fixtures and tests share: the stack's addresses, the host control.

(A module of its own because conftest modules cannot be imported by name under
``--import-mode=importlib``; docker/itest/conftest.py puts this directory on sys.path.)
"""

from __future__ import annotations

import importlib.util
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The image's own health check (ApiVersions over the Kafka protocol) says when the broker serves.
healthcheck = load_module("chronolog_healthcheck", ROOT / "docker" / "healthcheck.py")


@dataclass(frozen=True)
class Stack:
    bootstrap: str
    metrics_url: str
    data_dir: Path | None

    def wait_until_healthy(self, timeout: float = 90.0) -> None:
        host, _, port = self.bootstrap.rpartition(":")
        deadline = time.monotonic() + timeout
        while True:
            try:
                healthcheck.check(host, int(port))
                return
            except (OSError, ValueError) as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker {self.bootstrap} not healthy: {exc}") from exc
                time.sleep(0.2)


class BrokerControl:
    """Asks the host to act on the broker container, through the shared directory.

    A request is a file ``<id>.request`` holding one verb: ``stop`` (``podman stop``,
    SIGTERM then the grace period), ``kill`` (``podman kill -s KILL``) or ``start``
    (``podman start``, then wait until the health check passes). The host answers
    with ``<id>.reply``, JSON: ``{"ok": bool, "exit_code": int | null, "detail": str}``,
    where ``exit_code`` is the container's exit status after ``stop``/``kill``.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def request(self, verb: str, timeout: float = 120.0) -> dict[str, Any]:
        rid = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}"
        tmp = self.directory / f".{rid}.tmp"
        tmp.write_text(verb)
        tmp.rename(self.directory / f"{rid}.request")  # the host never sees half a request
        reply = self.directory / f"{rid}.reply"
        deadline = time.monotonic() + timeout
        while not reply.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the host did not answer {verb!r} within {timeout} s")
            time.sleep(0.05)
        answer: dict[str, Any] = json.loads(reply.read_text())
        if not answer.get("ok"):
            raise RuntimeError(f"the host could not {verb} the broker: {answer}")
        return answer
