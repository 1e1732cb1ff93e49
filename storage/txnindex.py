"""Kafka's transaction index: ``<base offset>.txnindex`` beside a segment.

One 34-byte entry per aborted transaction whose ABORT marker lies in the segment,
in marker order: version (int16, 0), producer id (int64), first offset (int64), last
offset (int64: the marker's) and the partition's last stable offset when the abort
was written (int64), all big-endian (Kafka's ``AbortedTxn``). As Kafka does, the file
exists only once a segment has an entry, and goes with its segment.

The broker answers read_committed fetches from its in-memory list of aborted
transactions, which it rebuilds from the log (markers and transactional batches) at
every start; these files are the same list on disk for Kafka's tools. Each start
rewrites any file that disagrees with the list rebuilt from the log (a file lost, torn
by a crash, or left by a segment a clean or a truncation removed), so a file never
tells a different story than the log; an entry is appended when its marker is, and
is not fsynced on its own (Kafka rebuilds the index of unflushed segments on
recovery the same way).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from storage.fsutil import fsync_dir, write_synced

SUFFIX = ".txnindex"
VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class TxnIndexEntry(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def path_for(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{SUFFIX}"


def encode(entries: Iterable[TxnIndexEntry]) -> bytes:
    return b"".join(_ENTRY.pack(VERSION, *e) for e in entries)


def decode(data: bytes) -> list[TxnIndexEntry]:
    """The whole entries of a file; a torn last entry (a crash mid-append) and anything
    after an entry of an unknown version are left out."""
    out = []
    for off in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, off)
        if version != VERSION:
            break
        out.append(TxnIndexEntry(*fields))
    return out


def read(path: Path) -> list[TxnIndexEntry]:
    try:
        return decode(path.read_bytes())
    except FileNotFoundError:
        return []


def append(path: Path, entry: TxnIndexEntry) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, encode([entry]))
    finally:
        os.close(fd)


def rewrite(path: Path, entries: list[TxnIndexEntry]) -> None:
    """Make the file hold exactly ``entries`` (removed when there are none), atomically."""
    if not entries:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        fsync_dir(path.parent)
        return
    tmp = path.with_name(path.name + ".tmp")
    write_synced(tmp, encode(entries))
    os.replace(tmp, path)
    fsync_dir(path.parent)
