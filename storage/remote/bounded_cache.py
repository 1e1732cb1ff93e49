"""The state every bounded on-disk cache of remote files starts with (the index cache and
the chunk cache): its directory, its byte budget, the lock over its bookkeeping, what it
found on disk (``cachedir.scan``, least recently used first) and its hit/miss counters.
Each subclass evicts down to the budget once its own state is set up."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from storage.remote import cachedir


class BoundedDirCache:
    def __init__(self, directory: str | os.PathLike[str], budget_bytes: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.budget = budget_bytes
        self._lock = threading.Lock()
        self._files = cachedir.scan(self.dir)  # name -> bytes, LRU first
        self.hits = 0
        self.misses = 0
