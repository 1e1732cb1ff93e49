"""The two meanings of a time window in docs/cli.md and README.md, run as written against
a real broker: the ```sh block that loads the late parcel scans, then every
``$ chronolog ...`` line of the transcript below it, whose output (stderr and stdout together, whitespace runs compared
as one space, a last ``…`` line eliding the rest) must be what the page shows."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
ROOT = Path(__file__).resolve().parents[2]
SECTIONS = {  # document: (section heading, commands in its transcript)
    "docs/cli.md": ("### Two meanings of a time window: `--event-time`", 5),
    "README.md": ("## Two meanings of a time window", 2),
}


def _blocks(doc: str) -> tuple[str, str]:
    """The section's ```sh block (setup) and its ```text block (transcript)."""
    section = (ROOT / doc).read_text().split(SECTIONS[doc][0] + "\n", 1)[1].split("\n## ", 1)[0]
    fences = re.findall(r"^```(\w*)\n(.*?)^```", section, re.M | re.S)
    sh = [code for lang, code in fences if lang == "sh"]
    text = [code for lang, code in fences if lang == "text" and code.startswith("$ ")]
    assert len(sh) == 1 and len(text) == 1
    return sh[0], text[0]


def _words(line: str) -> str:
    return " ".join(line.split())


@pytest.mark.parametrize("doc", sorted(SECTIONS))
def test_the_two_meanings_example_prints_what_the_page_shows(broker: Any, tmp_path: Path,
                                                             doc: str) -> None:
    setup, transcript = _blocks(doc)
    env = {**os.environ, "CHRONOLOG_BOOTSTRAP_SERVER": broker.bootstrap,
           "PATH": f"{Path(CHRONOLOG).parent}{os.pathsep}{os.environ['PATH']}"}
    setup = setup.replace(".venv/bin/chronolog", "chronolog")  # README spells the path out
    subprocess.run(["bash", "-e", "-o", "pipefail", "-c", setup], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=120)
    steps: list[tuple[list[str], list[str]]] = []
    for line in transcript.strip("\n").splitlines():
        if line.startswith("$ "):
            steps.append((shlex.split(line[2:]), []))
        else:
            steps[-1][1].append(line)
    assert len(steps) == SECTIONS[doc][1]
    for argv, shown in steps:
        assert argv[0] == "chronolog"
        proc = subprocess.run([CHRONOLOG, *argv[1:]], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)
        assert proc.returncode == 0, (argv, proc.stdout)
        got = [_words(ln) for ln in proc.stdout.splitlines()]
        want = [_words(ln) for ln in shown]
        if want and want[-1] == "…":
            want, got = want[:-1], got[: len(want) - 1]
        assert got == want, argv
