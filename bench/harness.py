"""What the benchmarks that run a real broker share: a free port, the broker subprocess
started (and waited for) and stopped, the web console likewise, and the CPU time /proc
charges to a process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

#: ``CHRONOLOG_BENCH_SCALE``: every benchmark's sizes are multiplied by it (< 1 for a
#: quick dry run).
SCALE = float(os.environ.get("CHRONOLOG_BENCH_SCALE", "1"))


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port on 127.0.0.1 that is free now (TCP by default; SOCK_DGRAM for UDP)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(
    scratch: Path,
    data: Path,
    overrides: Mapping[str, str] | None = None,
    *,
    port: int | None = None,
    timeout: float = 30.0,
    ready: Callable[[], object] | None = None,
    tree: Path | None = None,
    log_name: str = "broker.log",
    module: str = "broker",
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``python -m broker`` on 127.0.0.1 with its log in ``scratch/LOG_NAME``;
    returns (process, Kafka port) once ``ready()`` stops raising (default: the Kafka port
    accepts a connection). If the broker exits or ``timeout`` passes first, it is stopped
    and RuntimeError carries its log. ``tree``: run the broker from that source tree
    (an export of another commit, for an A/B in one run) instead of this checkout;
    ``module``: run ``python -m MODULE`` instead (bench/zonemap_off.py)."""
    port = port or free_port()
    data.mkdir(parents=True, exist_ok=True)
    log_path = scratch / log_name
    args = [sys.executable, "-m", module, "--data-dir", str(data), "--host", "127.0.0.1",
            "--port", str(port)]
    for name, value in (overrides or {}).items():
        args += ["--override", f"{name}={value}"]
    env = None
    if tree is not None:  # ``-m`` puts the working directory first on sys.path
        env = dict(os.environ, PYTHONPATH=str(tree))
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=None if tree is None else str(tree))

    def accepts() -> None:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()

    probe = ready or accepts
    deadline = time.monotonic() + timeout
    while True:
        try:
            probe()
            return proc, port
        except Exception:  # whatever the probe raises while the broker is still starting
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_broker(proc, 5)
                raise RuntimeError("broker did not start:\n" + log_path.read_text()) from None
            time.sleep(0.05)


def stop_broker(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGTERM (a clean shutdown), then SIGKILL if it has not exited within ``timeout``."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (Linux /proc): a per-operation cost
    that does not depend on how busy the shared machine is."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_console(args: list[str], log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``chronolog console ARGS`` (which must include ``--port``), once it serves pages;
    returns (process, base URL). The console tests start it the same way."""
    port = args[args.index("--port") + 1]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "client.cli", "console", *args],
                                stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/static/console.css", timeout=1).close()
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("console did not start:\n" + log_path.read_text()) from None
            time.sleep(0.1)


def stop_console(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
