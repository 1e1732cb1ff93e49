"""Remote segments' bytes cached on local disk in fixed, aligned chunks (what Aiven's
tiered-storage plugin calls its chunk cache and Redpanda its cloud-storage cache).

A read below the local log start asks for a byte range of a remote ``.log``; without a
cache every read is one ranged GET (about 0.5 ms on a local S3 server however small).
Here the range is served from chunk files (4 MiB, Aiven's default chunk size), and a
missing run of chunks is fetched whole in one GET, so a 1 MiB read costs at most one or
two GETs and a lookup near data already read costs none.

Files live in ``<log dir>/remote-log-chunk-cache/`` beside Kafka's
``remote-log-index-cache``, named ``<base offset>_<segment id>.log.<chunk index>``;
they survive a restart. Invariants:
- chunk ``i`` of an object of ``size`` bytes holds bytes [i*C, min((i+1)*C, size)):
  chunks are aligned to the chunk size C and only the last one is short;
- a chunk file is written to a temporary name and renamed, and is served only when its
  length is exactly that chunk's length (an fstat of the open file at every read): a
  torn or truncated file is deleted and fetched again, never served. The check is the
  length only (no checksum): the batches' own CRCs are the clients' check;
- a range inside one chunk is returned as a view of the chunk file's mapping (no copy:
  a lookup in a 1 MB batch costs what a local one does); a range across chunks is
  copied. As with local segments, a file truncated by someone else while a view of it
  is read faults the process (SIGBUS): nothing but this cache writes its directory;
- the files' total size stays within ``remote.log.chunk.cache.total.size.bytes``,
  least recently used chunk out first; a chunk larger than the whole bound is served
  but not kept;
- methods block on the object store: callers run them off the event loop, except
  under ``cached_only()``, where whatever would need the store raises ``NotCached``
  instead (a warm lookup then runs where it is asked, as a local one does, without a
  hop to a thread).
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from storage.remote.bounded_cache import BoundedDirCache
from storage.remote.store import ObjectStore, RemoteStorageError

DIR_NAME = "remote-log-chunk-cache"
DEFAULT_BUDGET = 1 << 30
DEFAULT_CHUNK = 4 << 20
#: Open chunk files kept for reads (each costs one descriptor).
OPEN_FILES = 64

_CACHED_ONLY: ContextVar[bool] = ContextVar("chronolog_remote_cached_only", default=False)


class NotCached(Exception):
    """Under ``cached_only()``: the answer needs the object store."""


@contextmanager
def cached_only() -> Iterator[None]:
    """Within it, remote reads that would fetch from the store raise ``NotCached``."""
    token = _CACHED_ONLY.set(True)
    try:
        yield
    finally:
        _CACHED_ONLY.reset(token)


def require_store() -> None:
    """Called before a fetch from the store: raises ``NotCached`` under ``cached_only()``."""
    if _CACHED_ONLY.get():
        raise NotCached


class RemoteChunkCache(BoundedDirCache):
    """LRU of fixed-size chunks of remote objects under one directory, bounded in bytes."""

    def __init__(self, directory: str | os.PathLike[str], budget_bytes: int = DEFAULT_BUDGET,
                 chunk_bytes: int = DEFAULT_CHUNK) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk size must be positive, not {chunk_bytes}")
        # The lock guards the bookkeeping and the reads: a read holds it so that an
        # eviction cannot close (and the OS reuse) the descriptor under it.
        super().__init__(directory, budget_bytes)
        self.chunk = chunk_bytes
        # name -> (descriptor, mapping) of open chunk files, least recently used first
        self._open: OrderedDict[str, tuple[int, mmap.mmap]] = OrderedDict()
        self._size = sum(self._files.values())
        self.bytes_fetched = 0
        with self._lock:
            self._evict()

    @property
    def size_bytes(self) -> int:
        return self._size

    def read(self, store: ObjectStore, key: str, name: str, size: int, start: int,
             end: int) -> tuple[bytes | memoryview, int]:
        """Bytes [start, min(end, size)) of the object ``key`` of ``size`` bytes, cached
        under ``name``; and how many bytes were fetched from the store for it. Missing
        chunks that follow one another are fetched in one GET."""
        end = min(end, size)
        if start >= end:
            return b"", 0
        first, last = start // self.chunk, (end - 1) // self.chunk
        parts: list[bytes | memoryview] = []
        fetched = 0
        i = first
        while i <= last:
            lo = max(start, i * self.chunk) - i * self.chunk
            hi = min(end, (i + 1) * self.chunk) - i * self.chunk
            data = self._cached(name, i, self._length(size, i), lo, hi)
            if data is not None:
                parts.append(data)
                i += 1
                continue
            require_store()
            j = i  # fetch the run of missing chunks i..j in one GET
            while j < last and not self._known(name, j + 1):
                j += 1
            got = self._fetch(store, key, name, size, i, j)
            fetched += sum(len(c) for c in got)
            for k, chunk in enumerate(got, i):
                lo = max(start, k * self.chunk) - k * self.chunk
                hi = min(end, (k + 1) * self.chunk) - k * self.chunk
                parts.append(chunk[lo:hi])
            i = j + 1
        return (parts[0] if len(parts) == 1 else b"".join(parts)), fetched

    def _length(self, size: int, index: int) -> int:
        return min(self.chunk, size - index * self.chunk)

    def _known(self, name: str, index: int) -> bool:
        return f"{name}.{index}" in self._files

    def _cached(self, name: str, index: int, length: int, lo: int, hi: int
                ) -> memoryview | None:
        """A view of bytes [lo, hi) of the chunk file when it is cached whole; None (and
        the file gone) when it is missing, torn or of the wrong length."""
        fname = f"{name}.{index}"
        with self._lock:
            if fname not in self._files:
                return None
            opened = self._open.get(fname)
            if opened is None:
                try:
                    fd = os.open(self.dir / fname, os.O_RDONLY)
                except FileNotFoundError:
                    self._forget(fname)
                    return None
                if os.fstat(fd).st_size != length:
                    os.close(fd)
                    self._forget(fname)
                    return None
                opened = (fd, mmap.mmap(fd, length, prot=mmap.PROT_READ))
                self._open[fname] = opened
                if len(self._open) > OPEN_FILES:
                    _close(*self._open.popitem(last=False)[1])
            else:
                self._open.move_to_end(fname)
                if os.fstat(opened[0]).st_size != length:  # torn since it was opened
                    self._forget(fname)
                    return None
            self._files.move_to_end(fname)
            self.hits += 1
            return memoryview(opened[1])[lo:hi]

    def _fetch(self, store: ObjectStore, key: str, name: str, size: int, first: int,
               last: int) -> list[bytes]:
        """Chunks first..last of ``key`` in one ranged GET, each kept in a file."""
        lo, hi = first * self.chunk, min(size, (last + 1) * self.chunk)
        data = store.get_range(key, lo, hi)
        if len(data) != hi - lo:
            raise RemoteStorageError(f"remote object {key!r} holds {lo + len(data)} bytes "
                                     f"where the manifest says {size}")
        chunks = [data[at:at + self.chunk] for at in range(0, len(data), self.chunk)]
        # The files are written outside the lock (a lookup on the event loop may be
        # waiting for it), renamed into place under it.
        written = []
        for k, chunk in enumerate(chunks, first):
            if len(chunk) <= self.budget:
                fname = f"{name}.{k}"
                tmp = self.dir / f"{fname}.{threading.get_ident()}.tmp"
                tmp.write_bytes(chunk)
                written.append((fname, tmp, len(chunk)))
        with self._lock:
            self.misses += len(chunks)
            self.bytes_fetched += len(data)
            for fname, tmp, length in written:
                self._forget(fname)
                os.replace(tmp, self.dir / fname)
                self._files[fname] = length
                self._size += length
            self._evict()
        return chunks

    def _forget(self, fname: str) -> None:
        """Drop one chunk file (lock held)."""
        opened = self._open.pop(fname, None)
        if opened is not None:
            _close(*opened)
        size = self._files.pop(fname, None)
        if size is not None:
            self._size -= size
        (self.dir / fname).unlink(missing_ok=True)

    def _evict(self) -> None:
        while self._files and self._size > self.budget:
            self._forget(next(iter(self._files)))

    def drop(self, prefix: str) -> None:
        """Forget every chunk of a deleted segment (names starting ``prefix``)."""
        with self._lock:
            for fname in [n for n in self._files if n.startswith(prefix)]:
                self._forget(fname)

    def close(self) -> None:
        """Close the open chunk files (the files stay for the next start)."""
        with self._lock:
            while self._open:
                _close(*self._open.popitem()[1])


def _close(fd: int, mapping: mmap.mmap) -> None:
    """Close a chunk file; its mapping goes with the last view of it."""
    os.close(fd)
    try:
        mapping.close()
    except BufferError:
        pass  # a view is still in use: the mapping is released when it is
