"""Kafka's offset checkpoint files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``).

Format (text, ``CheckpointFile``): a version line ``0``, a count line, then one
``<topic> <partition> <offset>`` line per partition. Writes are atomic: a ``.tmp``
file is written, fsynced and renamed over the old one, so a crash leaves either the
old or the new checkpoint, never a mix.
"""

from __future__ import annotations

import os
from pathlib import Path

VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file that does not follow the format."""


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Entries of a checkpoint file; {} when it does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: expected a version and a count line")
    if lines[0].strip() != str(VERSION):
        raise CheckpointError(f"{path}: unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad count line {lines[1]!r}") from None
    entries = lines[2:2 + count]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    out: dict[tuple[str, int], int] = {}
    for line in entries:
        parts = line.split(" ")
        if len(parts) != 3:
            raise CheckpointError(f"{path}: malformed entry {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointError(f"{path}: malformed entry {line!r}") from None
    return out


def write_checkpoint(path: Path, entries: dict[tuple[str, int], int]) -> None:
    """Atomically replace ``path`` with ``entries`` in Kafka's format."""
    lines = [str(VERSION), str(len(entries))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    tmp = Path(str(path) + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, ("\n".join(lines) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
