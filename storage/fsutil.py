"""Durable file-system steps shared by storage and the broker's state files.

A rename or a new file is only durable once its directory is fsynced (Kafka's
``Utils.flushDir``); a whole-file rewrite is write-to-temp, fsync, rename, fsync
the directory, so a crash leaves either the old or the new file whole.

``FILES`` is the file layer a segment appends through (``pwritev``, ``fsync``): a
test replaces it with one that fails the way a dying disk does (EIO), which no
real filesystem here can be made to do on demand.
"""

from __future__ import annotations

import os
from pathlib import Path


class FileLayer:
    """The calls a segment's appends and flushes make; the real ones by default."""

    pwritev = staticmethod(os.pwritev)
    fsync = staticmethod(os.fsync)


FILES = FileLayer()


def fsync_dir(path: Path) -> None:
    """fsync a directory, so the names created or renamed in it survive a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write-then-rename with fsyncs, so a crash leaves the old or the new file whole."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
