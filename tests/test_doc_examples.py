"""Every code example in README.md and docs/*.md runs, as written, against a real broker.

A fenced block tagged ``python`` or ``sh`` is an example; anything else (```text,
```json, untagged output) is not. Directives in HTML comments on the lines right
above a fence say how to run it (readers of the rendered page don't see them):

- none: ``python`` runs as a script, ``sh`` in ``bash -e -o pipefail``;
- ``<!-- example: spark -->``: Python run with ``spark`` (a real local session)
  and ``bs`` (the broker address) defined;
- ``<!-- example: server -->``: each command starts a broker (``chronolog serve``,
  ``python -m broker`` or ``make run``); it must come up and stop cleanly on SIGTERM;
- ``<!-- example: setup: SHELL -->``: SHELL runs first, in the same directory;
- ``<!-- example: skip: REASON -->``: not run here; the reason shows in the test summary.

Every example of one document runs in document order in one scratch directory
with one broker of its own (``./data`` is that broker's data directory), so a
later example may use a topic an earlier one created. ``127.0.0.1:9092`` in an
example means that broker, and CLI commands reach it through
``CHRONOLOG_BOOTSTRAP_SERVER``; ``127.0.0.1:9093`` is its UDP ingest port (tsv into
topic ``udp``), as in docs/operations.md.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
DIRECTIVE = re.compile(r"^<!--\s*example:\s*(\w+)\s*(?::\s*(.*?))?\s*-->\s*$")
VENV_BIN = Path(sys.executable).parent
DEFAULT = "127.0.0.1:9092"
DEFAULT_UDP = "127.0.0.1:9093"


@dataclass
class Example:
    doc: Path
    line: int
    lang: str
    code: str
    kind: str = "run"
    reason: str = ""
    setup: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def examples(doc: Path) -> list[Example]:
    text = doc.read_text()
    found = []
    for m in FENCE.finditer(text):
        if m.group(1) not in ("python", "sh"):
            continue
        line = text.count("\n", 0, m.start()) + 1
        ex = Example(doc, line, m.group(1), m.group(2))
        above = text[: m.start()].splitlines()
        while above and (d := DIRECTIVE.match(above[-1].strip())):
            above.pop()
            kind, arg = d.group(1), d.group(2) or ""
            if kind == "setup":
                ex.setup.insert(0, arg)
            elif kind in ("skip", "spark", "server"):
                ex.kind, ex.reason = kind, arg
            else:
                raise AssertionError(f"{ex.id}: unknown example directive {kind!r}")
        if ex.kind == "skip" and not ex.reason:
            raise AssertionError(f"{ex.id}: a skipped example must say why")
        found.append(ex)
    return found


ALL = [ex for doc in DOCS for ex in examples(doc)]


def test_examples_are_found() -> None:
    """The parser sees the README's examples (a broken fence regex would pass everything)."""
    readme = [ex for ex in ALL if ex.doc.name == "README.md"]
    assert {ex.lang for ex in readme} == {"python", "sh"}
    assert len(ALL) >= 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listened on {port} within {timeout}s")


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _commands(code: str) -> Iterator[str]:
    """Logical shell lines: continuations joined, comments and blanks dropped."""
    for raw in code.replace("\\\n", " ").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            yield line


class DocSession:
    """One document's scratch directory and broker."""

    def __init__(self, workdir: Path, broker: Any, udp: str) -> None:
        self.dir = workdir
        self.broker = broker
        self.udp = udp
        (workdir / ".venv").symlink_to(VENV_BIN.parent)
        (workdir / "data").symlink_to(broker.data_dir)
        self.env = dict(os.environ)
        self.env["PATH"] = f"{VENV_BIN}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["CHRONOLOG_BOOTSTRAP_SERVER"] = broker.bootstrap
        self.env["PYTHONPATH"] = str(ROOT)

    def text(self, code: str) -> str:
        return code.replace(DEFAULT, self.broker.bootstrap).replace(DEFAULT_UDP, self.udp)

    def sh(self, code: str, what: str) -> None:
        r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", self.text(code)], cwd=self.dir,
                           env=self.env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{what} exited {r.returncode}\n{r.stdout}\n{r.stderr}"

    def python(self, code: str, what: str) -> None:
        r = subprocess.run([sys.executable, "-c", self.text(code)], cwd=self.dir, env=self.env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{what} exited {r.returncode}\n{r.stdout}\n{r.stderr}"

    def spark(self, code: str, spark: Any) -> None:
        cwd = os.getcwd()
        os.chdir(self.dir)
        try:
            exec(compile(self.text(code), "<example>", "exec"),
                 {"spark": spark, "bs": self.broker.bootstrap})
        finally:
            for q in spark.streams.active:
                q.stop()
            os.chdir(cwd)

    def server(self, code: str) -> None:
        for n, line in enumerate(_commands(code)):
            if line.startswith("make test"):
                continue  # this suite is what `make test` runs
            port = _free_port()
            # A directory of its own: ./data here is the document's running broker's.
            cwd = Path(tempfile.mkdtemp(prefix=f"server-{n}-", dir=self.dir))
            (cwd / ".venv").symlink_to(VENV_BIN.parent)
            (cwd / "server.properties").write_text("log.dirs=./data-from-properties\n")
            data = cwd / "data"
            line = line.replace(DEFAULT_UDP, f"127.0.0.1:{_free_port()}")  # its own UDP port
            line = self.text(line).rstrip("&").strip().replace("0.0.0.0", "127.0.0.1")
            line = re.sub(r"--data-dir \S+", f"--data-dir {data}", line)
            if line.startswith("make run"):
                argv = ["make", "-C", str(ROOT), "run", f"PORT={port}", f"DATA={data}"]
            else:
                argv = shlex.split(line) + ["--host", "127.0.0.1", "--port", str(port)]
            proc = subprocess.Popen(argv, cwd=cwd, env=self.env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                _wait_listening(port, proc)
            except AssertionError as e:
                out = proc.communicate(timeout=10)[0].decode(errors="replace") if \
                    proc.poll() is not None else ""
                raise AssertionError(f"{line!r}: {e}\n{out}") from None
            finally:
                # `make run` passes on the broker's exit status: signal the broker, not make.
                for pid in _children(proc.pid) if argv[0] == "make" else [proc.pid]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
            code_ = proc.wait(timeout=60)
            assert code_ == 0, f"{line!r} exited {code_} on SIGTERM"


# Per page: docs/pipeline.md reads a topic whose old segments the broker has tiered
# and dropped locally; local copies go at the retention check (as in Kafka), so its
# broker checks often. Other pages keep the default: their old-dated records must stay.
_BROKER_OVERRIDES: dict[str, dict[str, str]] = {
    "pipeline.md": {"log.retention.check.interval.ms": "200"},
}


@pytest.fixture(scope="module")
def sessions(
    tmp_path_factory: pytest.TempPathFactory, broker_process_class: Any
) -> Iterator[dict[Path, DocSession]]:
    brokers: list[Any] = []

    class Lazy(dict[Path, DocSession]):
        def __missing__(self, doc: Path) -> DocSession:
            base = tmp_path_factory.mktemp(doc.stem)
            (base / "broker-data").mkdir()
            udp = f"127.0.0.1:{_free_port()}"
            # Tiering on (topics opt in with remote.storage.enable=true), its bucket beside
            # the data directory, so docs/storage.md's tier examples run as written.
            b = broker_process_class(base / "broker-data", _free_port(), {
                "udp.listeners": udp, "udp.topic": "udp", "udp.format": "tsv",
                "remote.log.storage.system.enable": "true",
                "rsm.config.url": f"file://{base}/bucket",
                "remote.log.manager.task.interval.ms": "200",
                **_BROKER_OVERRIDES.get(doc.name, {})}).start()
            brokers.append(b)
            (base / "work").mkdir()
            s = self[doc] = DocSession(base / "work", b, udp)
            return s

    yield Lazy()
    for b in brokers:
        b.stop()


@pytest.mark.parametrize("ex", ALL, ids=lambda ex: ex.id)
def test_example_runs(ex: Example, sessions: dict[Path, DocSession], request: Any) -> None:
    if ex.kind == "skip":
        pytest.skip(f"{ex.id}: {ex.reason}")
    s = sessions[ex.doc]
    for cmd in ex.setup:
        s.sh(cmd, f"{ex.id} setup")
    if ex.kind == "server":
        s.server(ex.code)
    elif ex.kind == "spark":
        s.spark(ex.code, request.getfixturevalue("spark"))
    elif ex.lang == "python":
        s.python(ex.code, ex.id)
    else:
        s.sh(ex.code, ex.id)
