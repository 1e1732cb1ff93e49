"""A throw-away Chronolog broker for tests and scripts: ``with broker() as b: b.bootstrap``.

The broker is a subprocess (``python -m broker``, run by the interpreter running this
code) on a free loopback port, with a data directory of its own that is deleted
afterwards unless the caller gave it. It is started the way a user starts one, so a
test talks to it over real sockets with any Kafka client; and ``client`` never imports
``broker``. The pytest fixtures ``chronolog_broker`` and ``chronolog_topic``
(client/pytest_plugin.py) are this context manager, session-scoped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BrokerFailed", "RunningBroker", "broker"]


class BrokerFailed(RuntimeError):
    """The broker did not come up (or exited); the message ends with its log's tail."""


@dataclass
class RunningBroker:
    """A broker started by :func:`broker`: where it listens and where its data is."""

    host: str
    port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def bootstrap(self) -> str:
        """``host:port``, for ``bootstrap.servers`` of any Kafka client."""
        return f"{self.host}:{self.port}"

    def create_topic(self, name: str | None = None, partitions: int = 1,
                     config: Mapping[str, str] | None = None) -> str:
        """Create a topic (a unique name unless one is given) and return its name."""
        from client.sync import SyncClient

        name = name or f"topic-{uuid.uuid4().hex[:12]}"
        with SyncClient(self.bootstrap) as c:
            c.create_topic(name, partitions, dict(config or {}))
        return name

    def delete_topic(self, name: str) -> None:
        from client.sync import SyncClient

        with SyncClient(self.bootstrap) as c:
            c.delete_topic(name)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _start(data_dir: Path, log_path: Path, host: str, overrides: Mapping[str, str],
           python: str, timeout: float) -> RunningBroker:
    port = _free_port(host)
    argv = [python, "-m", "broker", "--data-dir", str(data_dir), "--host", host,
            "--port", str(port), "--log-format", "text"]
    for name, value in overrides.items():
        argv += ["--override", f"{name}={value}"]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    running = RunningBroker(host, port, data_dir, log_path, proc)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise BrokerFailed(f"the broker exited with status {proc.returncode}:\n"
                               f"{running.log_tail()}")
        try:
            # The broker listens only once it serves (asyncio's start_serving).
            with socket.create_connection((host, port), timeout=0.5):
                return running
        except OSError:
            if time.monotonic() > deadline:
                _stop(proc)
                raise BrokerFailed(f"the broker did not listen on {running.bootstrap} within "
                                   f"{timeout} s:\n{running.log_tail()}") from None
            time.sleep(0.02)


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # a clean shutdown: logs flushed and sealed
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return int(proc.returncode)


@contextmanager
def broker(
    *,
    data_dir: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    python: str | None = None,
    startup_timeout: float = 60.0,
) -> Iterator[RunningBroker]:
    """Run a broker for the duration of the ``with`` block.

    ``data_dir``: kept afterwards when given (created if missing); otherwise a temporary
    directory, deleted on exit. ``overrides``: broker settings by their Kafka names
    (``{"num.partitions": "3"}``). ``python``: the interpreter with chronolog installed
    (default: this one). The port is free when chosen; if another process takes it
    before the broker binds, the start is retried on another port.
    """
    own = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="chronolog-broker-")) if own else Path(data_dir or "")
    data = root / "data" if own else root
    data.mkdir(parents=True, exist_ok=True)
    log_path = (root if own else Path(tempfile.mkdtemp(prefix="chronolog-log-"))) / "broker.log"
    running: RunningBroker | None = None
    try:
        for attempt in range(3):
            try:
                running = _start(data, log_path, host, dict(overrides or {}),
                                 python or sys.executable, startup_timeout)
                break
            except BrokerFailed as exc:
                if "address already in use" not in str(exc).lower() or attempt == 2:
                    raise
        assert running is not None
        yield running
    finally:
        if running is not None:
            _stop(running.process)
        if own:
            shutil.rmtree(root, ignore_errors=True)
        else:
            shutil.rmtree(log_path.parent, ignore_errors=True)
