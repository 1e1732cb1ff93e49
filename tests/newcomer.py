#!/usr/bin/env python3
"""`make newcomer`: a new user's first minutes, on a fresh clone, checked against README.

1. ``git clone`` this repository (its committed HEAD) into a temporary directory.
2. ``make run`` there, in the background, on a free port: the clock runs from the clone
   to the first answer on that port (clone-to-serving); then the size of ``.venv``.
3. README's five-minute example (the ```sh block that creates topic ``events``), run as
   written in the clone with ``CHRONOLOG_BOOTSTRAP_SERVER`` naming that broker; its
   output must contain the table README shows below it.
4. README's Spark example: the ``pip install`` line it gives for PySpark, the topic for
   the copy, then its Python block in a plain ``.venv/bin/python`` (no PYSPARK_PYTHON,
   no PYTHONPATH); the output must contain the table README shows.
5. Everything stopped and deleted; one line ``RESULT {json}`` with the figures.

``--existing-venv DIR`` (what ``make test`` runs, tests/ops/test_newcomer.py): step 2
installs into a fresh ``.venv`` as ever, but step 4 runs with the interpreter of DIR
(which has PySpark) instead of installing PySpark into the fresh one, the slowest part
of the full run. ``--cold-cache`` gives pip an empty cache (every wheel downloaded).
Only the standard library is used: it runs with the system python3, as a newcomer has.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
DEFAULT = "127.0.0.1:9092"


def say(msg: str) -> None:
    print(f"[newcomer] {msg}", flush=True)


def readme_blocks(readme: Path) -> list[tuple[str, str]]:
    """(language, code) of every fenced block, in order; untagged blocks are outputs."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(readme.read_text())]


def example_and_output(blocks: list[tuple[str, str]], lang: str, marker: str) -> tuple[str, str]:
    """The first ``lang`` block containing ``marker`` and the untagged block after it."""
    for i, (tag, code) in enumerate(blocks):
        if tag == lang and marker in code:
            out = next((c for t, c in blocks[i + 1:] if t == ""), None)
            assert out is not None, f"README: no output block after the {marker!r} example"
            return code, out
    raise AssertionError(f"README: no ```{lang} block containing {marker!r}")


def sh_block_with(blocks: list[tuple[str, str]], marker: str) -> str:
    return next(code for tag, code in blocks if tag == "sh" and marker in code)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serving(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def du(path: Path) -> int:
    return sum(f.lstat().st_size for f in path.rglob("*") if not f.is_symlink() and f.is_file())


def contains_lines(output: str, expected: str) -> bool:
    """The expected block's lines appear consecutively in the output (trailing spaces aside)."""
    want = [ln.rstrip() for ln in expected.strip("\n").splitlines()]
    got = [ln.rstrip() for ln in output.splitlines()]
    return any(got[i:i + len(want)] == want for i in range(len(got) - len(want) + 1))


def run(cmd: list[str] | str, cwd: Path, env: dict[str, str], what: str,
        timeout: float = 600) -> str:
    shell = isinstance(cmd, str)
    res = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd] if shell else cmd,
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise AssertionError(f"{what} exited {res.returncode}:\n{res.stdout[-3000:]}\n"
                             f"{res.stderr[-3000:]}")
    return res.stdout


def newcomer(existing_venv: Path | None, cold_cache: bool, keep: bool) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="chronolog-newcomer-"))
    clone = work / "chronolog"
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CHRONOLOG_", "PYSPARK_", "PYTEST_", "VIRTUAL_ENV"))
           and k not in ("PYTHONPATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    if cold_cache:
        env["PIP_CACHE_DIR"] = str(work / "pip-cache")
    figures: dict[str, object] = {"mode": "existing-venv" if existing_venv else "fresh",
                                  "pip_cache": "cold" if cold_cache else "warm"}
    make: subprocess.Popen[bytes] | None = None
    log = work / "make-run.log"
    try:
        # ---------------------------------------------------------------- clone, make run
        t0 = time.monotonic()
        run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], work, env,
            "git clone")
        with open(log, "wb") as fh:
            make = subprocess.Popen(["make", "run", f"PORT={port}", f"DATA={work / 'data'}"],
                                    cwd=clone, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        while not serving(port):
            if make.poll() is not None:
                raise AssertionError(f"make run exited {make.returncode}:\n{log.read_text()}")
            if time.monotonic() - t0 > 600:
                raise AssertionError(f"not serving after 600 s:\n{log.read_text()}")
            time.sleep(0.05)
        figures["clone_to_serving_s"] = round(time.monotonic() - t0, 1)
        figures["load_average_1m"] = os.getloadavg()[0]
        # CPU time of what make ran to get there (venv, pip), and of the clone: the wall
        # time moves with whatever else the machine runs, this much less.
        stat = Path(f"/proc/{make.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        figures["clone_to_serving_cpu_s"] = round(
            (int(stat[13]) + int(stat[14])) / ticks
            + sum(os.times()[2:4]), 1)
        venv = clone / ".venv"
        figures["venv_bytes_after_make_run"] = du(venv)
        installed = run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
                        clone, env, "pip list")
        names = {p["name"].lower() for p in json.loads(installed)}
        figures["heavy_packages_after_make_run"] = sorted(
            names & {"pyspark", "pandas", "selenium", "mypy", "matplotlib", "pytest", "aiohttp"})
        say(f"clone to serving {figures['clone_to_serving_s']} s; .venv "
            f"{int(figures['venv_bytes_after_make_run']) / 1e6:.0f} MB")  # type: ignore[call-overload]

        # ------------------------------------------------------------ five-minute example
        blocks = readme_blocks(clone / "README.md")
        cli_env = {**env, "CHRONOLOG_BOOTSTRAP_SERVER": f"127.0.0.1:{port}"}
        code, expected = example_and_output(blocks, "sh", "topics create events ")
        t = time.monotonic()
        out = run(code.replace(DEFAULT, f"127.0.0.1:{port}"), clone, cli_env,
                  "README's five-minute example")
        figures["five_minute_example_s"] = round(time.monotonic() - t, 1)
        assert contains_lines(out, expected), (
            f"README's five-minute example printed\n{out}\nnot README's\n{expected}")
        say("five-minute example: output as README shows")

        # A feature whose extra `make run` did not install says what to install.
        res = subprocess.run([str(venv / "bin" / "chronolog"), "console", "--port",
                              str(free_port())], cwd=clone, env=cli_env, capture_output=True,
                             text=True, timeout=60)
        figures["console_without_extra"] = (res.stdout + res.stderr).strip().splitlines()[-1:]
        assert res.returncode != 0 and "pip install 'chronolog[console]'" in res.stderr, (
            res.stdout + res.stderr)

        # ------------------------------------------------------------------ Spark example
        res = subprocess.run([str(venv / "bin" / "chronolog"), "pipeline", "export",
                              "--topic", "events", "--from", "2025-11-21T10:00:00Z",
                              "--to", "2025-11-21T11:00:00Z", "--out", str(work / "x")],
                             cwd=clone, env=cli_env, capture_output=True, text=True,
                             timeout=120)
        figures["spark_job_without_extra"] = res.stderr.strip().splitlines()[-1:]
        assert res.returncode == 2 and "pip install 'chronolog[spark]'" in res.stderr, (
            res.stdout + res.stderr)
        if existing_venv is None:
            pip_line = next(ln for ln in sh_block_with(blocks, "[spark]").splitlines()
                            if "pip install" in ln)
            t = time.monotonic()
            run(pip_line.split(" #", 1)[0], clone, env, f"README's `{pip_line}`", timeout=1200)
            figures["spark_install_s"] = round(time.monotonic() - t, 1)
            python = venv / "bin" / "python"
        else:
            python = existing_venv / "bin" / "python"
        run(sh_block_with(blocks, "topics create events-copy"), clone, cli_env,
            "README's events-copy topic")
        code, expected = example_and_output(blocks, "python", "format(\"chronolog\")")
        t = time.monotonic()
        out = run([str(python), "-c", code.replace(DEFAULT, f"127.0.0.1:{port}")], clone, env,
                  "README's Spark example in a plain session", timeout=900)
        figures["spark_example_s"] = round(time.monotonic() - t, 1)
        assert contains_lines(out, expected), (
            f"README's Spark example printed\n{out}\nnot README's\n{expected}")
        copied = run(f"{shlex.quote(str(venv / 'bin' / 'chronolog'))} consume events-copy "
                     "--from-offset 0 --format json", clone, cli_env, "consume events-copy")
        figures["spark_copied_records"] = len(copied.strip().splitlines())
        assert figures["spark_copied_records"] == 5, copied
        say("Spark example from a plain session: output as README shows, 5 records copied")
        return figures
    finally:
        if make is not None:
            # `make run` passes the broker's exit status on: signal the broker, not make.
            children = Path(f"/proc/{make.pid}/task/{make.pid}/children")
            pids = [int(p) for p in children.read_text().split()] if children.exists() else []
            for pid in pids or [make.pid]:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                code_ = make.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(make.pid, signal.SIGKILL)
                code_ = make.wait()
            figures["make_run_exit_status"] = code_
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--existing-venv", type=Path,
                    help="run the Spark step with this venv's python (make test's short run)")
    ap.add_argument("--cold-cache", action="store_true", help="pip starts with an empty cache")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args(argv)
    try:
        figures = newcomer(args.existing_venv, args.cold_cache, args.keep)
    except AssertionError as exc:
        print(f"[newcomer] FAILED: {exc}", file=sys.stderr, flush=True)
        return 1
    print("RESULT " + json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
