"""Kafka's sparse offset index (``.index``) and time index (``.timeindex``), KIP-33.

On-disk format (big-endian, byte-compatible with Apache Kafka):
- ``.index``: entries of int32 relative offset + int32 ``.log`` position (8 bytes);
- ``.timeindex``: entries of int64 timestamp + int32 relative offset (12 bytes).

Invariants:
- offsets in both files strictly increase (offset index) / never decrease (time
  index); time index timestamps strictly increase, so equal timestamps are never
  stored twice (``maybe_append`` writes only if ts > last ts);
- a time entry (ts, off) means the running maximum timestamp of the segment first
  reached ts in the batch whose last offset is off: every record before that batch
  has a smaller timestamp;
- the last time entry of a sealed segment is the segment's max timestamp (written
  on roll/close with ``skip_full_check``);
- a file being appended to is preallocated to ``segment.index.bytes`` rounded down
  to the entry size; it is trimmed to its entries on roll, close and recovery.
- the preallocation is sparse, but no entry is written through the mapping into a
  block that does not exist yet: ``reserve`` allocates blocks ahead (posix_fallocate,
  RESERVE_CHUNK at a time) before the segment writes the batches those entries
  index, because writing a mapped page the filesystem cannot back (a full disk)
  kills the process with SIGBUS instead of raising ENOSPC.

Files are opened and mmapped lazily, on first use (as Kafka since KAFKA-7283), so a
data dir with thousands of segments opens without touching their indexes. On open
the entry count is file length / entry size, as in Kafka; unlike Kafka we then drop
an all-zero suffix (the zero padding of an untrimmed file, KAFKA-10207) — a valid
entry past the first is never all zeros, because offsets strictly increase; a first
offset entry is never (0, 0) (the first batch of a segment is never indexed), while
a first time entry (0, 0) is kept (records stamped at the epoch).
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from storage.fsutil import write_synced

WARM_BYTES = 8192  # Kafka's warm section: the last 8 KiB of entries are searched first.

_POS_AT = struct.Struct(">4xi")  # the position of an offset entry
_REL_AT = struct.Struct(">8xi")  # the relative offset of a time entry
_GENERATIONS = itertools.count()
_LITTLE = sys.byteorder == "little"
_KEY_CHUNK = 8192  # entries converted per step when the key cache is extended
_ZERO8 = bytes(8)
_ZERO12 = bytes(12)


class IndexOrderError(Exception):
    """An index append that breaks the ordering invariants (a bug in the caller)."""


# Index blocks allocated ahead of the entries written through the mapping (see reserve).
RESERVE_CHUNK = 64 * 1024


class _MmapIndex:
    """Shared mechanics: lazy mmap, preallocation, trimming, warm binary search."""

    ENTRY = 8
    SUFFIX = ".index"

    def __init__(self, path: str | os.PathLike[str], base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._mm: mmap.mmap | None = None
        self._size = 0
        self._entries = 0
        # Bytes from the start of the file whose blocks are known to exist (see reserve).
        self._reserved = 0
        self._loaded = False
        # Keys of entries [0, len(_keys)) as native ints (see _sync_keys); a prefix
        # of the entries, emptied by everything that can shrink or rewrite them.
        self._keys = array(self._KEY_CODE)
        # A process-unique number taken anew whenever entries may have shrunk or been
        # rewritten (or reloaded): caches built from entries compare it (appends keep it).
        self.generation = next(_GENERATIONS)

    # -- lifecycle -----------------------------------------------------------------
    @property
    def max_entries(self) -> int:
        return self.max_index_size // self.ENTRY

    def _load(self) -> None:
        if self._loaded:
            return
        self._drop_keys()
        if not self.path.exists():
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, self.max_entries * self.ENTRY)
            finally:
                os.close(fd)
            self._entries = 0
        else:
            self._entries = self.path.stat().st_size // self.ENTRY
        self._map()
        self._loaded = True
        self._drop_zero_suffix()

    def _map(self) -> None:
        """(Re)map the whole file; only the mapping holds a descriptor afterwards."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        fd = os.open(self.path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            self._size = size
            if size > 0:
                self._mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def _is_zero(self, i: int) -> bool:
        assert self._mm is not None
        e = self.ENTRY
        return self._mm[i * e:(i + 1) * e] == (_ZERO8 if e == 8 else _ZERO12)

    def _drop_zero_suffix(self) -> None:
        n = self._entries
        if n == 0 or not self._is_zero(n - 1):
            return
        # The padding is a suffix: find its first entry by binary search.
        lo, hi = 0, n - 1  # answer in [lo, hi]; entry hi is zero
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_zero(mid):
                hi = mid
            else:
                lo = mid + 1
        if lo == 0 and not self._KEY_IS_OFFSET:
            lo = 1  # (ts 0, relative 0) is a legal first time entry: records at the epoch
        self._entries = lo
        self._cut_keys(lo)

    @property
    def entries(self) -> int:
        self._load()
        return self._entries

    @property
    def is_loaded(self) -> bool:
        return self._loaded

    def usage(self) -> tuple[int, int]:
        """(entries, bytes memory-mapped), without loading an index that is not loaded
        yet: the metrics scrape reads this and must not undo lazy loading."""
        if not self._loaded:
            return self.file_length() // self.ENTRY, 0
        return self._entries, len(self._mm) if self._mm is not None else 0

    def file_length(self) -> int:
        if self._loaded:
            return self._size
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def resize(self, new_size: int) -> None:
        """Set the file length to new_size rounded down to whole entries (kept entries stay)."""
        self._load()
        rounded = new_size // self.ENTRY * self.ENTRY
        if self._size == rounded:
            return
        if self._mm is not None:
            self._mm.flush()
            self._mm.close()
            self._mm = None
        os.truncate(self.path, rounded)
        self._entries = min(self._entries, rounded // self.ENTRY)
        self._reserved = min(self._reserved, rounded)
        self._cut_keys(self._entries)
        self._map()

    def reserve(self, more: int) -> None:
        """Allocate the file blocks the next ``more`` entries will be written to, so
        writing them through the mapping cannot fault; OSError (ENOSPC) if the disk
        cannot hold them. Cheap once reserved: a comparison per call."""
        need = (self._entries + more) * self.ENTRY
        if need <= self._reserved and self._loaded:
            return
        self._load()
        if self._reserved < self._entries * self.ENTRY:
            self._reserved = self._entries * self.ENTRY  # written entries have their blocks
        if need <= self._reserved:
            return
        if self._mm is None or self._size < need:
            self.make_appendable()
        end = min(max(need, self._reserved + RESERVE_CHUNK), self._size)
        if end <= self._reserved:
            return  # a full index: no entry goes past its end
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, self._reserved, end - self._reserved)
        finally:
            os.close(fd)
        self._reserved = end

    def make_appendable(self) -> None:
        """Preallocate to segment.index.bytes, as Kafka does for the active segment."""
        self.resize(self.max_entries * self.ENTRY)

    def trim(self) -> None:
        """Cut the file to exactly its entries (roll, close, after recovery)."""
        if self._loaded:
            self.resize(self._entries * self.ENTRY)

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        """Trim, unmap and close; the object may be reused (it reloads lazily)."""
        if not self._loaded:
            return
        self.trim()
        self.release()

    def release(self) -> None:
        """Unmap without trimming (used before deleting or renaming the file)."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._loaded = False
        self._reserved = 0
        self._drop_keys()

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._load()
        self._entries = 0
        self._drop_keys()
        self.make_appendable()

    def replace_entries(self, data: bytes) -> None:
        """Make the file exactly ``data`` (whole entries of a rebuilt index, already
        trimmed), fsynced; used by recovery instead of appending entry by entry."""
        self.release()
        write_synced(self.path, data, os.O_RDWR)
        self._entries = len(data) // self.ENTRY
        self._drop_keys()
        self._map()
        self._loaded = True

    def rename(self, new_path: Path) -> None:
        self.release()
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.release()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def peek_ends(self) -> tuple[int, bytes, bytes]:
        """(entry count, first entry bytes, last entry bytes) without mapping the file
        when it is not loaded yet; b"" entries when empty. Sanity checks and segment
        maxima need only these, so thousands of sealed segments keep no mappings."""
        e = self.ENTRY
        if not self._loaded and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                n = os.fstat(fd).st_size // e
                if n == 0:
                    return 0, b"", b""
                last = os.pread(fd, e, (n - 1) * e)
                if last.strip(b"\0"):
                    return n, os.pread(fd, e, 0), last
            finally:
                os.close(fd)
        n = self.entries  # loads (and drops a zero suffix)
        if n == 0 or self._mm is None:
            return 0, b"", b""
        return n, self._mm[0:e], self._mm[(n - 1) * e:n * e]

    # -- search ----------------------------------------------------------------------
    _K = struct.Struct(">i")
    _KEY_IS_OFFSET = True
    _KEY_CODE = "i"  # array type code of a key: int32 relative offset / int64 timestamp
    _KEY_SIZE = 4

    def _drop_keys(self) -> None:
        """Forget the cached keys (the entries were reloaded, replaced or unmapped)."""
        self.generation = next(_GENERATIONS)
        if self._keys:
            self._keys = array(self._KEY_CODE)

    def _cut_keys(self, n: int) -> None:
        """Entries from ``n`` on are gone: keep only the cached keys before them."""
        self.generation = next(_GENERATIONS)
        if len(self._keys) > n:
            del self._keys[n:]

    def _sync_keys(self, n: int) -> array:
        """The keys of entries [0, n) as an array, extended from the mapping with the
        entries appended since the last search: per key byte, one strided copy in C
        (big-endian on disk, reordered to native). Chunks of _KEY_CHUNK entries keep
        the temporaries small. Every operation that can shrink or rewrite entries
        cuts or drops the cache, so the cached prefix always equals the file's."""
        keys = self._keys
        have = len(keys)
        if have > n:  # defensive: never serve keys of entries that are gone
            del keys[n:]
            return keys
        mm = self._mm
        assert mm is not None
        e, ks = self.ENTRY, self._KEY_SIZE
        order = range(ks - 1, -1, -1) if _LITTLE else range(ks)
        for lo in range(have, n, _KEY_CHUNK):
            hi = min(n, lo + _KEY_CHUNK)
            raw = mm[lo * e:hi * e]
            packed = bytearray((hi - lo) * ks)
            for j, dst in enumerate(order):
                packed[dst::ks] = raw[j::e]
            keys.frombytes(packed)
        return keys

    def _slot_for(self, target: int) -> int:
        """Index of the largest entry whose key <= target, or -1.

        Kafka's indexSlotRangeFor binary-searches the mapping (the warm last 8 KiB
        first, for the page cache). Here the keys are cached as a native array and
        ``bisect`` runs in C; keys strictly increase, so the slot is the same."""
        if not self._loaded:
            self._load()
        n = self._entries
        keys = self._keys
        if len(keys) != n:
            keys = self._sync_keys(n)
        if self._KEY_IS_OFFSET:
            return bisect_right(keys, target - self.base_offset) - 1
        return bisect_right(keys, target) - 1

    def _slot_for_mmap(self, target: int) -> int:
        """The binary search over the mapping itself (Kafka's, warm section first),
        without the key cache: kept as the tests' reference for _slot_for."""
        n = self.entries
        if n == 0:
            return -1
        mm = self._mm
        assert mm is not None
        unpack = self._K.unpack_from
        e = self.ENTRY
        t = target - self.base_offset if self._KEY_IS_OFFSET else target
        first_hot = max(0, n - 1 - WARM_BYTES // e)
        if unpack(mm, first_hot * e)[0] <= t:
            lo, hi = first_hot, n - 1
        else:
            if unpack(mm, 0)[0] > t:
                return -1
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * e)[0] <= t:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _write(self, i: int, data: bytes) -> None:
        assert self._mm is not None
        self._mm[i * self.ENTRY:(i + 1) * self.ENTRY] = data

    def _relative(self, offset: int) -> int:
        """``offset`` as the 4-byte relative field stores it; IndexOrderError if it does not fit."""
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise IndexOrderError(f"offset {offset} does not fit relative to {self.base_offset}")
        return rel

    def _append_entry(self, n: int, data: bytes) -> None:
        """Write entry ``n`` (the next one), growing the file to its preallocated size if needed."""
        if self._mm is None or len(self._mm) < (n + 1) * self.ENTRY:
            self.make_appendable()
        self._write(n, data)
        self._entries = n + 1


class OffsetIndex(_MmapIndex):
    """offset -> .log position of the batch ending at (or containing) that offset."""

    ENTRY = 8
    SUFFIX = ".index"
    _S = struct.Struct(">ii")
    _K = struct.Struct(">i")

    def entry(self, i: int) -> tuple[int, int]:
        """(absolute offset, position) of entry i."""
        self._load()
        assert self._mm is not None
        rel, pos = self._S.unpack_from(self._mm, i * 8)
        return self.base_offset + rel, pos

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def last_offset(self) -> int:
        n = self.entries
        return self.entry(n - 1)[0] if n else self.base_offset

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target, or (base offset, 0)."""
        slot = self._slot_for(offset)
        if slot < 0:
            return self.base_offset, 0
        rel, pos = self._S.unpack_from(self._mm, slot * 8)  # type: ignore[arg-type]
        return self.base_offset + rel, pos

    def floor_position(self, offset: int) -> int:
        """lookup(offset)[1]: the .log position to scan from for ``offset`` (0 when no
        entry is <= it). The time search's hot path, so the cached-keys case is inline."""
        keys = self._keys
        if self._loaded and len(keys) == self._entries:
            slot = bisect_right(keys, offset - self.base_offset) - 1
        else:
            slot = self._slot_for(offset)
        if slot < 0:
            return 0
        return _POS_AT.unpack_from(self._mm, slot * 8)[0]  # type: ignore[arg-type]

    def append(self, offset: int, position: int) -> None:
        self._load()
        n = self._entries
        if n and offset <= self.entry(n - 1)[0]:
            raise IndexOrderError(f"offset {offset} is not above the last entry of {self.path}")
        if n >= self.max_entries:
            raise IndexOrderError(f"{self.path} is full ({n} entries)")
        rel = self._relative(offset)
        self._append_entry(n, self._S.pack(rel, position))

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset >= target."""
        slot = self._slot_for(offset - 1)
        self._load()
        self._entries = slot + 1
        self._cut_keys(slot + 1)


class TimeIndex(_MmapIndex):
    """Running max timestamp -> last offset of the first batch that reached it."""

    ENTRY = 12
    SUFFIX = ".timeindex"
    _S = struct.Struct(">qi")
    _K = struct.Struct(">q")

    _KEY_IS_OFFSET = False
    _KEY_CODE = "q"
    _KEY_SIZE = 8

    def entry(self, i: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of entry i."""
        self._load()
        assert self._mm is not None
        ts, rel = self._S.unpack_from(self._mm, i * 12)
        return ts, self.base_offset + rel

    @property
    def is_full(self) -> bool:
        # Kafka reserves the last slot for the roll/close entry.
        return self.entries >= self.max_entries - 1

    def last_entry(self) -> tuple[int, int]:
        n = self.entries
        return self.entry(n - 1) if n else (-1, self.base_offset)

    def peek_last_entry(self) -> tuple[int, int]:
        """last_entry() without mapping an unloaded file."""
        n, _, last = self.peek_ends()
        if n == 0:
            return -1, self.base_offset
        ts, rel = self._S.unpack(last)
        return ts, self.base_offset + rel

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with ts <= target, or (-1, base offset)."""
        slot = self._slot_for(timestamp)
        if slot < 0:
            return -1, self.base_offset
        ts, rel = self._S.unpack_from(self._mm, slot * 12)  # type: ignore[arg-type]
        return ts, self.base_offset + rel

    def floor_key(self, timestamp: int) -> tuple[int, int]:
        """(slot, timestamp) of the largest entry with ts <= target, or (-1, -1),
        from the cached keys alone (no read of the mapping)."""
        keys = self._keys
        if self._loaded and len(keys) == self._entries:
            slot = bisect_right(keys, timestamp) - 1
        else:
            slot = self._slot_for(timestamp)
            keys = self._keys
        return (slot, keys[slot]) if slot >= 0 else (-1, -1)

    def floor_offset(self, timestamp: int) -> int:
        """lookup(timestamp)[1]: the offset of the floor entry (the base offset when
        no entry is <= timestamp). The time search's hot path, so the cached-keys case
        is inline."""
        keys = self._keys
        if self._loaded and len(keys) == self._entries:
            slot = bisect_right(keys, timestamp) - 1
        else:
            slot = self._slot_for(timestamp)
        if slot < 0:
            return self.base_offset
        return self.base_offset + _REL_AT.unpack_from(self._mm, slot * 12)[0]  # type: ignore[arg-type]

    def first_at_or_after(self, timestamp: int) -> int:
        """Index of the first entry with ts >= target (= entries when none)."""
        slot = self._slot_for(timestamp - 1)
        return slot + 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Kafka's maybeAppend: write only if ts > last ts; returns whether it wrote."""
        self._load()
        n = self._entries
        if not skip_full_check and n >= self.max_entries - 1:
            raise IndexOrderError(f"{self.path} is full ({n} entries)")
        last_ts, last_off = self.entry(n - 1) if n else (-1, self.base_offset)
        if n and offset < last_off:
            raise IndexOrderError(f"offset {offset} is below the last time entry offset {last_off}")
        if n and timestamp < last_ts:
            raise IndexOrderError(f"timestamp {timestamp} is below the last time entry {last_ts}")
        if timestamp <= last_ts:
            return False
        if n >= self.max_entries:
            return False
        rel = self._relative(offset)
        self._append_entry(n, self._S.pack(timestamp, rel))
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset >= target (offsets never decrease, so a suffix)."""
        self._load()
        n = self._entries
        lo, hi = 0, n  # first entry with offset >= target
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[1] >= offset:
                hi = mid
            else:
                lo = mid + 1
        self._entries = lo
        self._cut_keys(lo)


def index_paths(log_path: Path) -> tuple[Path, Path]:
    """The .index and .timeindex beside a .log."""
    stem = str(log_path)[: -len(".log")]
    return Path(stem + ".index"), Path(stem + ".timeindex")
