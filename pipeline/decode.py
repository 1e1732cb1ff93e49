"""Decode fetched record batches straight into Arrow columns (Spark's Kafka schema).

The decoding itself is :func:`storage.columnar.decode_columns` (one pass to find
every record body, then vectorised NumPy gathers for every field; keys and
values become Arrow arrays pointing into the fetched bytes until one C++ cast
copies them), shared with the bundled client's ``consume_arrow``. This module
adds what Spark's schema wants on top: the topic and partition columns and
timestamps in microseconds.

Invariants (those of ``decode_columns``):
- The rows produced for a batch equal ``storage.records.decode_batch`` of that
  batch (offsets, timestamps with LogAppendTime semantics, keys, values, null
  keys/values, headers), restricted to offsets in ``[start, end)``; the tests
  check this against that codec as the oracle.
- Control batches (transaction markers) yield no rows, as Kafka consumers hide them.
- Given a read_committed Fetch's aborted transactions, the batches of those
  transactions yield no rows either (Kafka's consumer rule, the bundled
  client's code); without them nothing is filtered.
- Every batch's CRC-32C is verified and every record's fields must add up to its
  declared length; anything else raises ``CorruptRecordError`` naming the
  topic, partition and offset: a pipeline never silently reads garbage.
- ``next_offset`` is one past the last offset of the last whole batch looked at (and kept),
  so a reader that continues from it neither skips nor repeats a record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from client.aio import _without_aborted
from pipeline.schema import ARROW_SCHEMA, TIMESTAMP_TYPE
from storage.columnar import decode_columns
from storage.errors import CorruptRecordError
from storage.records import crc_ok, iter_batches

__all__ = ["DecodedFetch", "decode_fetch", "empty_batch"]


@dataclass(frozen=True)
class DecodedFetch:
    """Rows decoded from one fetch answer, and where the next fetch should start."""

    batch: pa.RecordBatch | None
    next_offset: int
    batches_seen: int
    records_decoded: int


def empty_batch() -> pa.RecordBatch:
    """A zero-row batch of the source schema."""
    return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)


def decode_fetch(
    buf: bytes | bytearray | memoryview, topic: str, partition: int, start: int, end: int,
    aborted: Sequence[tuple[int, int]] = (),
) -> DecodedFetch:
    """Decode the records of ``buf`` (concatenated batches) with offsets in ``[start, end)``.

    Batches entirely below ``start`` are skipped without decoding; decoding stops
    at the first batch whose base offset is ``>= end``. A torn trailing batch (a
    fetch cut at max_bytes) is ignored; ``next_offset`` then points at it.
    ``aborted`` is a read_committed Fetch's (producer id, first offset) list.
    """
    if aborted:
        raw = bytes(buf)
        # Every batch's CRC first, the dropped ones too (as Kafka's consumer checks
        # before it looks at the aborted list): a flipped bit in a producer id must
        # not make a committed batch look aborted and vanish silently.
        for pos, h in iter_batches(raw):
            if not crc_ok(raw, pos, h):
                raise CorruptRecordError(
                    f"{topic}-{partition}: the batch at offset {h.base_offset} fails its CRC-32C")
        buf = _without_aborted(raw, aborted)
    res = decode_columns(buf, start, end, f"{topic}-{partition}")
    cols = res.columns
    if cols is None:
        return DecodedFetch(None, res.next_offset, res.batches_seen, res.records_decoded)
    n = res.num_rows
    tb = topic.encode("utf-8")
    topic_arr = pa.Array.from_buffers(
        pa.string(),
        n,
        [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(tb)), pa.py_buffer(tb * n)],
    )
    batch = pa.RecordBatch.from_arrays(
        [
            cols["key"],
            cols["value"],
            topic_arr,
            pa.array(np.full(n, partition, dtype=np.int32)),
            cols["offset"],
            pc.multiply(cols["timestamp"], 1000).cast(TIMESTAMP_TYPE),
            cols["timestamp_type"],
            cols["headers"],
        ],
        schema=ARROW_SCHEMA,
    )
    return DecodedFetch(batch, res.next_offset, res.batches_seen, res.records_decoded)
