"""Remote segments' index files cached on local disk (Kafka's RemoteIndexCache).

Files live in ``<log dir>/remote-log-index-cache/`` as ``<base offset>_<segment id><suffix>``
(Kafka's naming), so a cache survives a restart; their total size is kept within
``remote.log.index.file.cache.total.size.bytes`` by evicting the least recently used
file (one file larger than the whole budget is returned but not kept).

Invariants: a cached file is the whole object it copies (written to a temporary name,
then renamed); a file the caller's ``valid`` check rejects (corrupt, truncated, from
an older copy) is deleted and fetched again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from storage.remote.bounded_cache import BoundedDirCache
from storage.remote.store import ObjectStore, RemoteStorageError

DIR_NAME = "remote-log-index-cache"
DEFAULT_BUDGET = 1 << 30


class RemoteIndexCache(BoundedDirCache):
    """LRU of fetched index files under one directory, bounded in bytes."""

    def __init__(self, directory: str | os.PathLike[str], budget_bytes: int = DEFAULT_BUDGET
                 ) -> None:
        super().__init__(directory, budget_bytes)
        with self._lock:
            self._evict()

    @property
    def size_bytes(self) -> int:
        return sum(self._files.values())

    def _evict(self) -> None:
        while self._files and sum(self._files.values()) > self.budget:
            name, _ = self._files.popitem(last=False)
            (self.dir / name).unlink(missing_ok=True)

    def get(self, store: ObjectStore, key: str, name: str,
            valid: Callable[[bytes], bool]) -> bytes:
        """The object ``key`` as cached under ``name``; fetched when missing or invalid."""
        path = self.dir / name
        with self._lock:
            known = name in self._files
            if known:
                self._files.move_to_end(name)
        if known:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                data = None
            if data is not None and valid(data):
                self.hits += 1
                return data
        self.misses += 1
        data = store.get(key)
        if not valid(data):
            raise RemoteStorageError(f"remote index {key!r} is corrupt in the bucket")
        with self._lock:
            self._files.pop(name, None)
            if len(data) <= self.budget:
                tmp = path.with_name(name + f".{threading.get_ident()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, path)
                self._files[name] = len(data)
                self._evict()
            else:
                path.unlink(missing_ok=True)
        return data

    def drop(self, prefix: str) -> None:
        """Forget every file of a deleted segment (names starting ``prefix``)."""
        with self._lock:
            for name in [n for n in self._files if n.startswith(prefix)]:
                del self._files[name]
                (self.dir / name).unlink(missing_ok=True)
