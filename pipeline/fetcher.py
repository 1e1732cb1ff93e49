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
- An event-time task (:func:`read_ranges`) reads only its planned ranges, each
  fetch sized from the bytes the broker planned for the range (never more than
  what is left of them while they last), and keeps exactly the rows with
  start <= timestamp < end, in offset order; one connection serves all its ranges.
- Under read_committed (``isolation_level`` 1) every Fetch asks for
  READ_COMMITTED: the broker answers only below the last stable offset (LSO)
  with the aborted transactions of the answer, whose batches are dropped before
  decoding (Kafka's consumer rule); the range then ends at the LSO, not the high
  watermark. Under read_uncommitted the answer carries no aborted list and the
  bytes are decoded as they came (no extra pass).
"""

from __future__ import annotations

import concurrent.futures
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

import pyarrow as pa
import pyarrow.compute as pc

from client import ErrorCode, FetchResult, KafkaError, SyncClient, TopicPartition
from pipeline.decode import decode_fetch
from storage.records import iter_batches

__all__ = ["DataLossError", "FetchStats", "in_window", "read_range", "read_ranges"]

_FIRST_FETCH_BYTES = 32 * 1024
_MIN_FETCH_BYTES = 4 * 1024
_SLACK = 1.02
"""With uneven batches, ask 2% more than the estimate so a small miss costs no round trip."""


class DataLossError(RuntimeError):
    """Offsets a read was planned to cover are no longer (or not yet) in the log."""


@dataclass
class FetchStats:
    """What a read cost: answers, bytes fetched, records decoded vs kept."""

    fetches: int = 0
    bytes_fetched: int = 0
    records: int = 0
    batches: list[int] = field(default_factory=list)


class _Sizer:
    """Chooses each fetch's max_bytes from the whole batches seen so far.

    The broker cuts an answer at max_bytes (Kafka's semantics), so the bytes of
    a torn trailing batch are fetched twice. When every batch seen has the same
    size and record count (a producer filling fixed batches), sizes are whole
    multiples of it and no fetch is torn; otherwise a 2% slack on the last
    fetch avoids an extra round trip for a small underestimate.
    """

    def __init__(self, cap: int, budget: int = -1) -> None:
        self.cap = cap
        self.budget = budget
        """The bytes the broker planned for the range (-1: not planned): fetches stay within
        what is left of them, so a planned read fetches no block outside the plan."""
        self.used = 0
        self.batches = 0
        self.bytes = 0
        self.offsets = 0
        self.shape: tuple[int, int] | None = None
        self.uniform = True

    def observe(self, buf: bytes) -> tuple[int, int] | None:
        """Record the whole batches of ``buf``; returns (first base offset, next offset)."""
        first = -1
        nxt = -1
        for _pos, h in iter_batches(buf):
            if first < 0:
                first = h.base_offset
            nxt = max(nxt, h.base_offset + h.last_offset_delta + 1)
            shape = (h.batch_length + 12, h.last_offset_delta + 1)
            if self.shape is None:
                self.shape = shape
            elif shape != self.shape:
                self.uniform = False
            self.batches += 1
            self.used += shape[0]
            self.bytes += shape[0]
            self.offsets += shape[1]
        return None if first < 0 else (first, nxt)

    def size_for(self, remaining: int) -> int:
        estimate = self._estimate(remaining)
        left = self.budget - self.used
        if self.budget >= 0 and left > 0:
            return max(1, min(estimate if self.batches else self.cap, left))
        return estimate

    def _estimate(self, remaining: int) -> int:
        if self.batches == 0:
            return max(_MIN_FETCH_BYTES, min(self.cap, _FIRST_FETCH_BYTES))
        per_batch = self.bytes / self.batches
        need = math.ceil(remaining / (self.offsets / self.batches)) * per_batch
        if not self.uniform:
            need *= _SLACK
        if need <= self.cap:
            return max(_MIN_FETCH_BYTES, math.ceil(need))
        if self.uniform:
            return max(math.ceil(per_batch), int(self.cap // per_batch) * math.ceil(per_batch))
        return self.cap


class ReadOptions(TypedDict, total=False):
    """The optional keywords of :func:`read_range`, as :func:`read_ranges` takes them
    (and defaults them): ``fail_on_data_loss``, ``request_timeout``, ``stats``,
    ``isolation_level``."""

    fail_on_data_loss: bool
    request_timeout: float
    stats: FetchStats | None
    isolation_level: int


def read_range(
    bootstrap: str, topic: str, partition: int, start: int, end: int, *,
    fetch_max_bytes: int, **options: Unpack[ReadOptions],
) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches (Spark's Kafka schema) of ``topic-partition`` offsets ``[start, end)``."""
    yield from read_ranges(bootstrap, topic, partition, [(start, end, -1)],
                           fetch_max_bytes=fetch_max_bytes, **options)


def read_ranges(
    bootstrap: str,
    topic: str,
    partition: int,
    ranges: Sequence[tuple[int, int, int]],
    *,
    window: tuple[int, int] | None = None,
    fetch_max_bytes: int,
    fail_on_data_loss: bool = True,
    request_timeout: float = 30.0,
    stats: FetchStats | None = None,
    isolation_level: int = 0,
) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches of the offset ranges ``(start, end, planned bytes or -1)`` of
    ``topic-partition``, in order, over one connection; with ``window`` = (start ms,
    end ms) only the rows with start <= timestamp < end (an event-time task)."""
    if not any(s < e for s, e, _ in ranges):
        return
    st = stats if stats is not None else FetchStats()
    client = SyncClient(bootstrap, client_id="chronolog-spark", request_timeout=request_timeout)
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="chronolog-prefetch")
    try:
        for start, end, planned in ranges:
            if start >= end:
                continue
            span = _read_span(client, pool, topic, partition, start, end, planned,
                              fetch_max_bytes=fetch_max_bytes,
                              fail_on_data_loss=fail_on_data_loss, stats=st,
                              isolation_level=isolation_level)
            for batch in span:
                if window is not None:
                    batch = in_window(batch, *window)
                    if batch.num_rows == 0:
                        continue
                yield batch
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        client.close()


def in_window(batch: pa.RecordBatch, start_ms: int, end_ms: int) -> pa.RecordBatch:
    """The rows of ``batch`` with start_ms <= timestamp < end_ms (timestamps are in µs)."""
    ts = batch.column("timestamp").cast(pa.int64())
    keep = pc.greater_equal(ts, start_ms * 1000)
    if end_ms < (2**63 - 1) // 1000:  # else every timestamp is below the end
        keep = pc.and_(keep, pc.less(ts, end_ms * 1000))
    return batch.filter(keep)


def _read_span(
    client: SyncClient,
    pool: concurrent.futures.ThreadPoolExecutor,
    topic: str,
    partition: int,
    start: int,
    end: int,
    planned: int,
    *,
    fetch_max_bytes: int,
    fail_on_data_loss: bool,
    stats: FetchStats,
    isolation_level: int,
) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[start, end)``; ``planned`` bytes bound the fetches (-1: none)."""
    st = stats
    sizer = _Sizer(fetch_max_bytes, planned)

    def ask(offset: int) -> concurrent.futures.Future[FetchResult]:
        size = sizer.size_for(end - offset)
        return pool.submit(client.fetch_raw, topic, partition, offset, size,
                           isolation_level=isolation_level)

    offset = start
    pending = ask(offset)
    stalled = 0
    while offset < end:
        try:
            result = pending.result()
        except KafkaError as e:
            if e.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            tp = TopicPartition(topic, partition)
            earliest = client.list_offsets({tp: -2})[tp][0]
            if offset >= earliest:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{topic}-{partition}: the read was planned up to offset {end} but "
                        f"offset {offset} is past the end of the log (was it re-created?); "
                        "set failOnDataLoss=false to read what there is"
                    ) from None
                return
            if fail_on_data_loss:
                raise DataLossError(
                    f"{topic}-{partition}: offsets {offset}..{earliest - 1} were deleted "
                    "(retention) before they could be read; set failOnDataLoss=false to "
                    "skip them"
                ) from None
            offset = earliest
            if offset >= end:
                return
            pending = ask(offset)
            continue
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
        extent = sizer.observe(buf)
        nxt = offset if extent is None else min(max(extent[1], offset), end)
        if nxt > offset:
            if nxt < end:
                pending = ask(nxt)
            stalled = 0
        else:
            readable = result.last_stable_offset if isolation_level else result.high_watermark
            if readable <= offset:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{topic}-{partition}: the read was planned up to offset {end} but "
                        + (f"the last stable offset is {readable} (a transaction is open)"
                           if isolation_level and readable < result.high_watermark
                           else f"the log ends at {readable}")
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
                isolation_level=isolation_level,
            )
            continue
        decoded = decode_fetch(buf, topic, partition, offset, end, result.aborted)
        st.records += decoded.records_decoded
        if decoded.batch is not None:
            st.batches.append(decoded.batch.num_rows)
            yield decoded.batch
        offset = nxt

