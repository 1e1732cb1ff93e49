"""A new user's first minutes, as `make newcomer` runs them, in `make test`'s short form.

tests/newcomer.py clones this repository's HEAD into a temporary directory, runs
`make run` there (a fresh .venv, the pip cache as it is), runs README's five-minute
example and its Spark example in a plain SparkSession, and compares their output with
README. Here the Spark step uses this venv's interpreter instead of installing PySpark
into the fresh one (`make newcomer` does that too).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_fresh_clone_make_run_and_readme_examples_match_readme() -> None:
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "newcomer.py"),
                          "--existing-venv", sys.prefix],
                         capture_output=True, text=True, timeout=1100, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    m = re.search(r"^RESULT (.*)$", res.stdout, re.M)
    assert m, res.stdout
    figures = json.loads(m.group(1))
    # make run installs the broker and the CLI only: no PySpark, console, test or lint tools.
    assert figures["heavy_packages_after_make_run"] == [], figures
    assert figures["venv_bytes_after_make_run"] < 400e6, figures
    # The target is 20 s from clone to serving on a quiet machine. The wall time here moves
    # with the other processes of make test; the CPU time it took does not.
    assert figures["clone_to_serving_cpu_s"] <= 20, figures
    assert figures["clone_to_serving_s"] <= 180, figures
    assert figures["spark_copied_records"] == 5
    assert figures["make_run_exit_status"] == 0, figures
