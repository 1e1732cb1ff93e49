"""What a bounded on-disk cache of remote files (index cache, chunk cache) finds in its
directory when it opens: the files left by the last run, least recently used first, by
modification time; the leftovers of writes a crash interrupted (``*.tmp``) are deleted.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path


def scan(directory: Path) -> OrderedDict[str, int]:
    """Name -> size of every cached file in ``directory``, oldest first."""
    found = []
    for entry in os.scandir(directory):
        if entry.name.endswith(".tmp"):
            os.unlink(entry.path)
        elif entry.is_file():
            st = entry.stat()
            found.append((st.st_mtime, entry.name, st.st_size))
    return OrderedDict((name, size) for _, name, size in sorted(found))
