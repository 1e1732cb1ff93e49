"""The broker under test as a real subprocess: ``python -m broker`` on a free port on
127.0.0.1 with its own data directory. tests/conftest.py builds its fixtures on this;
test modules that start brokers of a wider scope import it from here.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port_number() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class BrokerProcess:
    """A real broker subprocess; restartable on the same port and data dir."""

    data_dir: Path
    port: int
    overrides: dict[str, str] = field(default_factory=dict)
    log_path: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    #: More command-line arguments (e.g. ``--read-replica URL``).
    extra_args: list[str] = field(default_factory=list)

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
        args += self.extra_args
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
