"""Read one partition's offset range from the broker as Arrow record batches.

This is the body of every Spark read task. It opens its own broker connection
(nothing is shared with the driver), fetches only the bytes the range needs and
decodes them with :mod:`pipeline.decode`.

Invariants:
- Exactly the records with offsets in ``[start, end)`` are yielded, in offset
  order, each once.
- Fetch sizes follow the bytes per offset of the whole batches seen so far, so
  the last fetch asks for about what is left instead of a fixed large amount:
  bytes fetched stay close to the bytes of the batches that overlap the range.
  What is over: the first and last batch may reach outside the range, the
  slack on each estimate, and the torn tail of a fetch cut at max_bytes
  (Kafka's Fetch semantics), which the next fetch reads again whole.
- While one answer is decoded the next fetch is already in flight (one
  prefetch), so broker I/O and decoding overlap.
- A range that cannot be completed (the log now ends before ``end``, or starts
  after ``start`` because retention deleted data) raises :class:`DataLossError`
  unless ``fail_on_data_loss`` is off, in which case the missing offsets are
  skipped, as Spark's Kafka source does.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from client import FetchResult, SyncClient
from pipeline.decode import decode_fetch
from storage.records import iter_batches

__all__ = ["DataLossError", "FetchStats", "read_range"]

_FIRST_FETCH_BYTES = 32 * 1024
_MIN_FETCH_BYTES = 4 * 1024
_SLACK = 1.02
"""Ask for 2% more than the estimate, so a small underestimate does not cost a round trip."""


class DataLossError(RuntimeError):
    """Offsets a read was planned to cover are no longer (or not yet) in the log."""


@dataclass
class FetchStats:
    """What a read cost: answers, bytes fetched, records decoded vs kept."""

    fetches: int = 0
    bytes_fetched: int = 0
    records: int = 0
    batches: list[int] = field(default_factory=list)


def _extent(buf: bytes) -> tuple[int, int, int] | None:
    """(first base offset, one past the last offset, bytes) of the whole batches in ``buf``.

    A fetch may end in a torn batch (the broker cuts at max_bytes, as Kafka
    does); those bytes are not counted, so estimates are per whole batch.
    """
    first = -1
    nxt = -1
    size = 0
    for _pos, h in iter_batches(buf):
        if first < 0:
            first = h.base_offset
        nxt = max(nxt, h.base_offset + h.last_offset_delta + 1)
        size += h.batch_length + 12
    return None if first < 0 else (first, nxt, size)


def read_range(
    bootstrap: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    fetch_max_bytes: int,
    fail_on_data_loss: bool = True,
    request_timeout: float = 30.0,
    stats: FetchStats | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches (Spark's Kafka schema) of ``topic-partition`` offsets ``[start, end)``."""
    if start >= end:
        return
    st = stats if stats is not None else FetchStats()
    client = SyncClient(bootstrap, client_id="chronolog-spark", request_timeout=request_timeout)
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="chronolog-prefetch")
    try:
        bytes_per_offset: float | None = None
        seen_bytes = 0
        seen_offsets = 0

        def ask(offset: int) -> concurrent.futures.Future[FetchResult]:
            remaining = end - offset
            if bytes_per_offset is None:
                size = _FIRST_FETCH_BYTES
            else:
                size = int(remaining * bytes_per_offset * _SLACK)
            size = max(_MIN_FETCH_BYTES, min(fetch_max_bytes, size))
            return pool.submit(client.fetch_raw, topic, partition, offset, size)

        offset = start
        pending = ask(offset)
        stalled = 0
        while offset < end:
            result = pending.result()
            buf = result.records_bytes
            st.fetches += 1
            st.bytes_fetched += len(buf)
            if result.log_start_offset > offset:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{topic}-{partition}: offsets {offset}..{result.log_start_offset - 1} "
                        "were deleted (retention) before they could be read; set "
                        "failOnDataLoss=false to skip them"
                    )
                offset = result.log_start_offset
                pending = ask(offset)
                continue
            extent = _extent(buf)
            nxt = offset if extent is None else min(max(extent[1], offset), end)
            if extent is not None and nxt > offset:
                seen_bytes += extent[2]
                seen_offsets += max(1, extent[1] - extent[0])
                bytes_per_offset = seen_bytes / seen_offsets
                if nxt < end:
                    pending = ask(nxt)
                stalled = 0
            else:
                if result.high_watermark <= offset:
                    if fail_on_data_loss:
                        raise DataLossError(
                            f"{topic}-{partition}: the read was planned up to offset {end} but "
                            f"the log ends at {result.high_watermark}"
                        )
                    return
                stalled += 1
                if stalled > 8:
                    raise DataLossError(
                        f"{topic}-{partition}: fetch at offset {offset} returns no whole batch"
                    )
                # The broker sent only a torn batch: ask for more bytes at the same offset.
                pending = pool.submit(
                    client.fetch_raw, topic, partition, offset,
                    max(len(buf) * 2, _FIRST_FETCH_BYTES) * (2 ** stalled),
                )
                continue
            decoded = decode_fetch(buf, topic, partition, offset, end)
            st.records += decoded.records_decoded
            if decoded.batch is not None:
                st.batches.append(decoded.batch.num_rows)
                yield decoded.batch
            offset = nxt
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        client.close()

