"""Starting and stopping ``chronolog console`` subprocesses for the console tests."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def start_console(args: list[str], log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``chronolog console ARGS`` (which must include ``--port``), once it serves pages."""
    port = args[args.index("--port") + 1]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "client.cli", "console", *args],
                                stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
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
