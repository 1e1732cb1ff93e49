"""Go for the ecosystem tests: the toolchain, a module cache inside the repo, builds.

Modules come from the Go module proxy into ``.cache/go/mod`` (gitignored), so a fresh
clone fetches them once. Compiled packages go to Go's own per-user build cache (its
default, ``~/.cache/go-build``, unless GOCACHE is set), and every build uses
``-trimpath``, which keeps the cache keys free of this clone's path: a fresh clone on
the same machine (CI's) compiles nothing again, where a build cache inside the repo
would cost every fresh clone a cold build of several minutes. A missing ``go`` or a
refused download raises GoError with go's own output; the tests turn that into a
failure, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "go"
GO_PROGRAMS = REPO / "tests" / "go"  # go.mod pins franz-go, kadm and sarama
BIN = CACHE / "bin"
FRANZ_GO = "github.com/twmb/franz-go"
FRANZ_GO_VERSION = "v1.22.3"  # the version tests/go/go.mod pins


class GoError(RuntimeError):
    pass


def go_env() -> dict[str, str]:
    """The environment for every go command: modules inside the repo (deletable files),
    path-free builds for the shared build cache."""
    env = dict(os.environ)
    env.update(GOMODCACHE=str(CACHE / "mod"), GOFLAGS="-modcacherw -trimpath")
    return env


def go_exe() -> str:
    exe = shutil.which("go")
    if exe is None:
        raise GoError("the go toolchain is not installed (make check-go installs it)")
    return exe


def go(*args: str, cwd: Path, timeout: float = 900.0,
       env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([go_exe(), *args], cwd=cwd, env=env or go_env(), capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise GoError(f"go {' '.join(args)} exited {proc.returncode}:\n"
                      f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    return proc


def build_programs() -> dict[str, Path]:
    """Build tests/go/* into .cache/go/bin (cached by go: a no-op rebuild takes ~1 s)."""
    BIN.mkdir(parents=True, exist_ok=True)
    go("build", "-o", str(BIN) + os.sep, "./...", cwd=GO_PROGRAMS)
    return {name: BIN / name for name in ("franzcheck", "saramacheck")}


def franz_go_source() -> Path:
    """A writable copy of franz-go's module (tests included) from the Go proxy.

    ``go mod download`` leaves the module read-only in the module cache; go test writes
    nothing there, but a copy keeps the cache pristine and lets go resolve the module's
    own go.mod as the main module.
    """
    proc = go("mod", "download", "-json", f"{FRANZ_GO}@{FRANZ_GO_VERSION}", cwd=GO_PROGRAMS)
    source = Path(json.loads(proc.stdout)["Dir"])
    copy = CACHE / f"franz-go-{FRANZ_GO_VERSION}"
    if not (copy / "go.mod").exists():
        tmp = copy.with_name(copy.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp)
        for path in [tmp, *tmp.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        tmp.rename(copy)
    return copy
