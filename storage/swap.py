"""Replacing log segments crash-safely: Kafka's ``.cleaned`` -> ``.swap`` -> rename steps.

A group of consecutive sealed segments with bases ``b0 < b1 < ...`` is replaced by
one new segment named ``b0`` (the cleaner's output) in these file steps:

1. ``write_cleaned``: the new ``b0.log``, ``b0.index`` and ``b0.timeindex`` are
   written as ``*.cleaned`` files together with ``b0.replaces.cleaned``, a manifest
   naming every base of the group; each file is fsynced.
2. ``commit``: the manifest and both indexes are renamed ``.cleaned`` -> ``.swap``,
   then ``b0.log.cleaned`` -> ``b0.log.swap``: **that rename is the commit point**.
   The directory is fsynced.
3. ``complete``: every file of the old group is removed (``b0.log`` last of the
   ``.log`` files), the index swaps replace ``b0.index`` / ``b0.timeindex``,
   ``b0.log.swap`` is renamed to ``b0.log`` and the manifest is removed.

Invariant (what a crash leaves, repaired by ``finish_pending`` when the log loads):
- no ``*.log.swap``: the commit point was not reached (or step 3 finished renaming
  the log): every ``.cleaned`` and ``.swap`` file is deleted and the old segments,
  all still present, stay;
- a ``b0.log.swap``: the commit point was reached: step 3 is run again from the
  start (each of its steps may already have happened), so the new segment replaces
  the whole group. Step 3 is idempotent.
So a kill -9 at any moment leaves either every old segment or the new one, never a
mix. The manifest is needed because a cleaned segment may end before the group's
last old segment starts (its last records were all removed): the old segments
cannot be told apart by offsets alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from storage.fsutil import fsync_dir, write_synced

CLEANED = ".cleaned"
SWAP = ".swap"
MANIFEST = ".replaces"
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")

# Tests set this to raise (or to SIGKILL the process) at a named file step.
crash_hook: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if crash_hook is not None:
        crash_hook(name)


def stem(directory: Path, base: int) -> str:
    return str(directory / f"{base:020d}")


def cleaned_paths(directory: Path, base: int) -> dict[str, Path]:
    """Where step 1 writes the new segment ``base``: suffix -> path."""
    s = stem(directory, base)
    return {suffix: Path(s + suffix + CLEANED) for suffix in (*_SEGMENT_SUFFIXES, MANIFEST)}


def write_cleaned(directory: Path, base: int, group_bases: list[int],
                  log_fd: int, index: bytes, time_index: bytes) -> None:
    """Step 1 for the parts not written through ``log_fd`` (the caller wrote and owns
    the ``.log.cleaned`` descriptor): fsync it, write and fsync indexes and manifest."""
    paths = cleaned_paths(directory, base)
    os.fsync(log_fd)
    for suffix, data in ((".index", index), (".timeindex", time_index),
                         (MANIFEST, "".join(f"{b}\n" for b in group_bases).encode())):
        write_synced(paths[suffix], data)
    _step("cleaned")


def discard_cleaned(directory: Path, base: int) -> None:
    """Remove what step 1 (and a partial step 2) wrote for ``base``."""
    s = stem(directory, base)
    for suffix in (*_SEGMENT_SUFFIXES, MANIFEST):
        for tail in (CLEANED, SWAP):
            _unlink(Path(s + suffix + tail))


def commit(directory: Path, bases: list[int]) -> None:
    """Step 2 for the new segments ``bases`` (one per group, in offset order). Each
    group's commit point is made durable before the next group's, so a crash leaves
    the groups up to some point swapped and the rest not: a later group is never
    swapped without the earlier ones (its removed tombstones could otherwise let an
    earlier, superseded value of the key reappear)."""
    for base in bases:
        s = stem(directory, base)
        for suffix in (".index", ".timeindex", MANIFEST):
            os.replace(s + suffix + CLEANED, s + suffix + SWAP)
            _step("swap" + suffix)
        os.replace(s + ".log" + CLEANED, s + ".log" + SWAP)
        _step("log-swapped")
        fsync_dir(directory)
        _step("committed")


def complete(directory: Path, base: int) -> None:
    """Step 3 for the new segment ``base`` (also run at load for a committed swap)."""
    s = stem(directory, base)
    manifest = Path(s + MANIFEST + SWAP)
    try:
        olds = [int(line) for line in manifest.read_text().split()]
    except FileNotFoundError:
        olds = [base]  # only the first old segment shares the new one's name
    for old in sorted(olds, reverse=True):  # b0 last: its absence is no sign of progress
        os_ = stem(directory, old)
        for suffix in (".index", ".timeindex", ".log"):
            if old == base and suffix != ".log":
                continue  # replaced by the rename below, or already the new file
            _unlink(Path(os_ + suffix))
        _step(f"deleted-{old}")
    for suffix in (".index", ".timeindex"):
        swap = Path(s + suffix + SWAP)
        if swap.exists():
            os.replace(swap, s + suffix)
            _step("renamed" + suffix)
        else:
            # Never reached step 2's rename or already renamed: an index left from
            # the old segment must not describe the new .log; it is rebuilt if absent.
            pass
    os.replace(s + ".log" + SWAP, s + ".log")
    _step("renamed.log")
    _unlink(manifest)


def finish_pending(directory: Path) -> list[int]:
    """At load: complete every committed swap and delete everything else left by an
    interrupted clean (see the module docstring). Returns the completed bases."""
    names = os.listdir(directory)
    done: list[int] = []
    for name in sorted(names):
        if name.endswith(".log" + SWAP):
            base = int(name[:20])
            complete(directory, base)
            done.append(base)
    if done:
        fsync_dir(directory)
    for name in os.listdir(directory):
        if name.endswith((CLEANED, SWAP)):
            _unlink(directory / name)
    return done


def _unlink(path: Path | str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
