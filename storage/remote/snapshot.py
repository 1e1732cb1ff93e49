"""The two per-segment state files a remote segment carries besides its indexes.

- ``.snapshot``: Kafka's producer-state snapshot format (ProducerStateManager, schema
  version 1, big-endian): version int16 = 1, CRC-32C (uint32) of everything after it,
  then an int32 count of entries, each producer id int64, producer epoch int16, last
  sequence int32, last offset int64, offset delta int32, timestamp int64, coordinator
  epoch int32, current transaction's first offset int64 (-1 when none). Chronolog's
  producer state lives in the broker, so the tier derives this from the batch headers
  of every segment up to the snapshot point: per producer, the last batch's epoch,
  sequence, offset and max timestamp, and the first offset of a transaction still open
  there. The coordinator epoch is only in the marker's body and is written as -1.
- ``.leader_epoch_checkpoint``: Kafka's text checkpoint (LeaderEpochCheckpointFile):
  a line ``0`` (version), a line with the entry count, then ``<epoch> <start offset>``
  per line, ascending; the slice of the partition's epoch lineage up to the segment's end.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

import crc32c as _crc32c

from storage.records import CONTROL_MASK, BatchHeader

_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_VERSION = 1


class ProducerEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    txn_first_offset: int  # -1: no transaction open at the snapshot point


def advance_producers(producers: dict[int, ProducerEntry], headers: Iterable[BatchHeader]
                      ) -> None:
    """Fold batch headers (in offset order) into ``producers`` (changed in place)."""
    for h in headers:
        pid = h.producer_id
        if pid < 0:
            continue
        prev = producers.get(pid)
        if h.attributes & CONTROL_MASK:
            if prev is not None:
                producers[pid] = prev._replace(txn_first_offset=-1, epoch=h.producer_epoch)
            continue
        seq = h.base_sequence + h.last_offset_delta if h.base_sequence >= 0 else -1
        txn = -1
        if h.is_transactional:
            txn = prev.txn_first_offset if prev is not None and prev.txn_first_offset >= 0 \
                else h.base_offset
        producers[pid] = ProducerEntry(pid, h.producer_epoch, seq, h.last_offset,
                                       h.last_offset_delta, h.max_timestamp, -1, txn)


def encode_snapshot(producers: dict[int, ProducerEntry]) -> bytes:
    body = _COUNT.pack(len(producers)) + b"".join(
        _ENTRY.pack(*producers[pid]) for pid in sorted(producers))
    return _HEAD.pack(SNAPSHOT_VERSION, _crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes) -> dict[int, ProducerEntry]:
    """The entries of a snapshot; ValueError when it is torn or damaged."""
    if len(data) < _HEAD.size + _COUNT.size:
        raise ValueError("producer snapshot too short")
    version, crc = _HEAD.unpack_from(data, 0)
    body = data[_HEAD.size:]
    if version != SNAPSHOT_VERSION or _crc32c.crc32c(body) != crc:
        raise ValueError("producer snapshot version or CRC mismatch")
    (n,) = _COUNT.unpack_from(body, 0)
    if n < 0 or len(body) != _COUNT.size + n * _ENTRY.size:
        raise ValueError("producer snapshot length mismatch")
    out = {}
    for i in range(n):
        e = ProducerEntry(*_ENTRY.unpack_from(body, _COUNT.size + i * _ENTRY.size))
        out[e.producer_id] = e
    return out


def encode_epochs(entries: Iterable[tuple[int, int]]) -> bytes:
    items = list(entries)
    lines = ["0", str(len(items))] + [f"{epoch} {start}" for epoch, start in items]
    return ("\n".join(lines) + "\n").encode()


def decode_epochs(data: bytes) -> list[tuple[int, int]]:
    lines = data.decode().split("\n")
    if len(lines) < 2 or lines[0] != "0":
        raise ValueError("leader-epoch checkpoint: bad version line")
    n = int(lines[1])
    out = []
    for line in lines[2:2 + n]:
        epoch, start = line.split(" ")
        out.append((int(epoch), int(start)))
    if len(out) != n:
        raise ValueError("leader-epoch checkpoint: fewer entries than its count")
    return out


def add_epoch(lineage: list[tuple[int, int]], epoch: int, offset: int) -> None:
    """Kafka's LeaderEpochFileCache.assign: a new epoch starts at ``offset``."""
    if epoch < 0:
        return
    if not lineage or epoch > lineage[-1][0]:
        lineage.append((epoch, offset))
