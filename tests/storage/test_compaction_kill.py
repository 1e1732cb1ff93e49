"""kill -9 while cleaning: a real subprocess cleans a compacted log and is SIGKILLed,
either at a named file step of storage/swap.py or after a random delay; the directory
must then load (as after a crash) to the old view or the cleaned one — or, while
several groups were committing, the cleaned view up to a segment base and the old
one after it — never anything else, and a second clean must reach the cleaned view."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.cleaner import CleanerSettings, clean_log
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch, decode_batch

T0 = 1_700_000_000_000
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "3000", "index.interval.bytes": "200",
          "delete.retention.ms": "0", "message.timestamp.before.max.ms": str(1 << 50)}
CHILD = """
import os, signal, sys
from storage import swap
from storage.cleaner import clean_log, CleanerSettings
from storage.config import LogConfig
from storage.log import Log
directory, step, now, cfg = sys.argv[1], sys.argv[2], int(sys.argv[3]), eval(sys.argv[4])
log = Log(directory, LogConfig.from_kafka(cfg))
if step != "none":
    def hook(name):
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)
    swap.crash_hook = hook
print("ready", flush=True)
clean_log(log, None, now, CleanerSettings(), force=True)
print("done", flush=True)
"""
STEPS = ["cleaned", "swap.replaces", "log-swapped", "committed", "renamed.index", "renamed.log"]


def _config() -> LogConfig:
    return LogConfig.from_kafka(CONFIG)


def _build(directory: Path, batches: int, seed: int) -> None:
    rng = random.Random(seed)
    log = Log(directory, _config())
    for b in range(batches):
        recs = [Record(i, T0 + b * 10 + rng.randrange(30), f"k{rng.randrange(25)}".encode(),
                       None if rng.random() < 0.15 else f"v{b}-{i}".encode() * 3, [])
                for i in range(rng.randrange(1, 6))]
        log.append(build_batch(recs, compression=rng.choice([0, 0, 1, 3])), now_ms=T0 + 10_000)
    log.close()


def _view(directory: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    log = Log(directory, _config(), clean_shutdown=False, recovery_point=0)
    assert log.recovered_bytes_cut == 0
    out = []
    for seg in log.segments:
        for info in seg.iter_batches(0):
            out.extend((r.offset, r.key, r.value)
                       for r in decode_batch(seg.pread(info.position, info.size), 0))
    log.close()
    return out


def _cleaned_view(src: Path, tmp: Path, times: int = 1
                  ) -> tuple[list[tuple[int, bytes | None, bytes | None]], list[int]]:
    ref = tmp / f"reference-{times}"
    shutil.copytree(src, ref)
    log = Log(ref, _config())
    for _ in range(times):
        assert clean_log(log, None, T0 + 100_000, CleanerSettings(), force=True) is not None
    bases = [s.base_offset for s in log.segments]
    log.close()
    return _view(ref), bases


def _assert_old_or_new(view: list, old: list, new: list, bases: list[int]) -> None:  # type: ignore[type-arg]
    for split in [*bases, 1 << 62]:
        if view == [r for r in new if r[0] < split] + [r for r in old if r[0] >= split]:
            return
    raise AssertionError("the killed clean left neither the old nor the cleaned segments")


def _run_child(directory: Path, step: str, kill_after: float | None = None) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), step, str(T0 + 100_000), repr(CONFIG)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    if kill_after is not None:
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return proc.returncode


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("kill") / "t-0"
    _build(src, 400, seed=3)
    return src


@pytest.fixture(scope="module")
def views(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:  # type: ignore[type-arg]
    """The old view, the view cleaned once (and its segment bases) and cleaned twice."""
    tmp = tmp_path_factory.mktemp("views")
    new, bases = _cleaned_view(source, tmp)
    twice, _ = _cleaned_view(source, tmp, times=2)
    return {"old": _view(source), "new": new, "bases": bases, "twice": twice}


@pytest.mark.parametrize("step", STEPS)
def test_kill_at_a_file_step_leaves_old_or_new_segments(step: str, source: Path, tmp_path: Path,
                                                       views: dict[str, list]) -> None:  # type: ignore[type-arg]
    old, new, bases = views["old"], views["new"], views["bases"]
    assert len(new) < len(old)
    work = tmp_path / "t-0"
    shutil.copytree(source, work)
    assert _run_child(work, step) == -signal.SIGKILL
    _assert_old_or_new(_view(work), old, new, bases)
    # The crashed directory cleans again: a clean of the old part gives the cleaned view,
    # of a part cleaned before the kill the twice-cleaned one (its tombstones' delete
    # horizon, set by the first clean with delete.retention.ms=0, has passed).
    log = Log(work, _config(), clean_shutdown=False, recovery_point=0)
    assert clean_log(log, None, T0 + 100_000, CleanerSettings(), force=True) is not None
    log.close()
    _assert_old_or_new(_view(work), new, views["twice"], bases)


@pytest.mark.parametrize("delay", [0.05, 0.2])
def test_kill_at_a_random_moment_leaves_old_or_new_segments(delay: float, source: Path,
                                                            tmp_path: Path,
                                                            views: dict[str, list]) -> None:  # type: ignore[type-arg]
    old, new, bases = views["old"], views["new"], views["bases"]
    work = tmp_path / "t-0"
    shutil.copytree(source, work)
    code = _run_child(work, "none", kill_after=delay)
    assert code in (0, -signal.SIGKILL)
    _assert_old_or_new(_view(work), old, new, bases)
