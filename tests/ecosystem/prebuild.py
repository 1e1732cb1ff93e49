"""Slow peer builds (Go programs, librdkafka) in the background while other tests run.

tests/ecosystem/conftest.py starts, when collection ends, the jobs the selected tests
need (none, if none is selected); a test waits for its job before its own, by then warm,
build, and fails with the job's output if it failed. Each job is a niced child process in
its own process group, its output in an unnamed temporary file; the session's end stops
any job still running, so none outlives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: job -> the command that does it, run from the repo's root. Each is a no-op once built.
JOBS = {
    "programs": [sys.executable, "-m", "tests.ecosystem.golang", "programs"],
    "kgo": [sys.executable, "-m", "tests.ecosystem.golang", "kgo"],
    # -j2: the build shares 2 cores with the tests it overlaps.
    "librdkafka": [sys.executable, "tools/peers/librdkafka.py", "build", "--jobs", "2"],
}


class PrebuildFailed(RuntimeError):
    def __init__(self, job: str, returncode: int, output: str) -> None:
        super().__init__(f"the background build {job} exited {returncode}:\n{output[-12000:]}")
        self.job, self.returncode, self.output = job, returncode, output


class Prebuild:
    """One job of JOBS running in the background."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.output = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            ["nice", "-n", "10", *JOBS[job]],
            cwd=REPO, stdout=self.output, stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self) -> None:
        """Block until the job ends; PrebuildFailed with its output if it failed."""
        if self.proc.wait() != 0:
            self.output.seek(0)
            raise PrebuildFailed(self.job, self.proc.returncode,
                                 self.output.read().decode(errors="replace"))

    def stop(self) -> None:
        """End the job (and its compilers) if it still runs."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.output.close()


_started: dict[str, Prebuild] = {}


def start(jobs: list[str]) -> None:
    """Start each job of JOBS in the background, all at once."""
    for job in jobs:
        if job not in _started:
            _started[job] = Prebuild(job)


def wait(job: str) -> None:
    """Wait for ``job`` if it was started (PrebuildFailed if it failed); else return at once."""
    if job in _started:
        _started[job].wait()


def stop_all() -> None:
    while _started:
        _started.popitem()[1].stop()
