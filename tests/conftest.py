"""Fixtures shared by every test area.

The broker under test is always the real thing: ``python -m broker`` in a
subprocess, on a free port on 127.0.0.1, with its own data directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "chronolog",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    max_examples=int(os.environ.get("CHRONOLOG_HYPOTHESIS_EXAMPLES", "60")),
)
settings.load_profile("chronolog")


def pytest_asyncio_loop_factories(config, item):  # type: ignore[no-untyped-def]
    """Run every asyncio test on uvloop, the loop the broker itself uses."""
    import uvloop

    return {"uvloop": uvloop.new_event_loop}


def free_port_number() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def free_port() -> int:
    return free_port_number()


@dataclass
class BrokerProcess:
    """A real broker subprocess; restartable on the same port and data dir."""

    data_dir: Path
    port: int
    overrides: dict[str, str] = field(default_factory=dict)
    log_path: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [
            sys.executable, "-m", "broker",
            "--data-dir", str(self.data_dir),
            "--host", "127.0.0.1", "--port", str(self.port),
        ]
        for name, value in self.overrides.items():
            args += ["--override", f"{name}={value}"]
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"
        log = open(self.log_path, "ab")
        since = log.tell()  # a restart appends: only this start's lines say it is ready
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited early:\n{self.log()}")
            # Its own "ready" line, not just a connection: a port taken by another process
            # between free_port_number() and the bind would accept one too.
            with open(self.log_path, "rb") as f:
                f.seek(since)
                ready = b"chronolog broker ready on" in f.read()
            try:
                if ready:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"broker did not start in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Stop the broker (SIGTERM: graceful; SIGKILL: a crash). Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()


@pytest.fixture(scope="session")
def broker_process_class() -> type[BrokerProcess]:
    """For fixtures of a wider scope than ``broker_factory`` that start their own brokers."""
    return BrokerProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """ONE real local SparkSession for the whole run (starting one costs 5-10 s and ~400 MB).

    It carries Spark's own Kafka connector on ``spark.jars`` (tests/helpers/spark_kafka.py)
    when Maven could fetch it, for the tests that read and write with ``format("kafka")``."""
    from pipeline.session import spark_session
    from tests.helpers.spark_kafka import connector_jars

    jars, _why_not = connector_jars()
    conf = {"spark.jars": ",".join(jars)} if jars else {}
    session = spark_session(app_name="chronolog-tests", conf=conf)
    yield session
    session.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[object]:
    """Start brokers: ``broker_factory(overrides={...})``; all are stopped afterwards."""
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, name: str = "data") -> BrokerProcess:
        data = tmp_path / f"{name}-{len(started)}"
        data.mkdir()
        for attempt in range(3):
            b = BrokerProcess(data, free_port_number(), dict(overrides or {}))
            started.append(b)
            try:
                return b.start()
            except RuntimeError as e:
                # The free port was taken (e.g. as another socket's ephemeral port)
                # between free_port_number() and the broker's bind: pick another.
                if "address already in use" not in str(e) or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    """One running broker with default settings."""
    return broker_factory()  # type: ignore[no-any-return]
