"""README's Spark example from a plain ``SparkSession.builder.getOrCreate()``, as a user
runs it from ``.venv/bin/python``: no PYSPARK_PYTHON, no PYTHONPATH, not in the repo.

``register`` must give the workers an interpreter that can import PyArrow and this
package, the example's window must hold the quick start's records, and the output must
be the table README shows. An interpreter chosen by PYSPARK_PYTHON that cannot run the
source is refused with what to do, before Spark starts a worker.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from client.testing import broker

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _readme(lang: str, marker: str) -> tuple[str, str]:
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer((ROOT / "README.md").read_text())]
    i = next(i for i, (t, c) in enumerate(blocks) if t == lang and marker in c)
    return blocks[i][1], next(c for t, c in blocks[i + 1:] if t == "")


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYSPARK_", "SPARK_", "CHRONOLOG_")) and k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A broker holding the quick start's records, and a directory that is not the repo."""
    work = tmp_path_factory.mktemp("plain")
    (work / ".venv").symlink_to(Path(sys.executable).parent.parent)
    with broker() as b:
        code, _ = _readme("sh", "topics create events ")
        env = {**_plain_env(), "CHRONOLOG_BOOTSTRAP_SERVER": b.bootstrap}
        subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=work, env=env,
                       check=True, capture_output=True, timeout=120)
        subprocess.run([".venv/bin/chronolog", "topics", "create", "events-copy",
                        "--partitions", "3"], cwd=work, env=env, check=True,
                       capture_output=True, timeout=60)
        yield b, work


@pytest.mark.timeout(600)
def test_readme_spark_example_runs_in_a_plain_session_and_prints_readme_table(
    quick_start,  # type: ignore[no-untyped-def]
) -> None:
    b, work = quick_start
    code, expected = _readme("python", 'format("chronolog")')
    res = subprocess.run([sys.executable, "-c", code.replace("127.0.0.1:9092", b.bootstrap)],
                         cwd=work, env=_plain_env(), capture_output=True, text=True, timeout=500)
    assert res.returncode == 0, res.stderr[-5000:]
    want = [ln.rstrip() for ln in expected.strip().splitlines()]
    got = [ln.rstrip() for ln in res.stdout.splitlines()]
    assert any(got[i:i + len(want)] == want for i in range(len(got))), res.stdout
    from client import SyncClient

    with SyncClient(b.bootstrap) as c:
        assert sum(c.latest("events-copy").values()) == 5  # the write copied the window


@pytest.mark.timeout(600)
def test_a_pyspark_python_that_cannot_import_the_source_is_refused_with_what_to_do(
    quick_start, tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    b, work = quick_start
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # a Python without PyArrow or chronolog
    code = ("from pyspark.sql import SparkSession\nfrom pipeline import register\n"
            "spark = SparkSession.builder.getOrCreate()\nregister(spark)\n")
    env = {**_plain_env(), "PYSPARK_PYTHON": str(bare / "bin" / "python")}
    res = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True,
                         text=True, timeout=500)
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: Spark's Python workers run"), res.stderr[-3000:]
    assert "No module named 'pyarrow'" in last and f"PYSPARK_PYTHON={sys.executable}" in last
