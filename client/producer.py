"""A batching producer: records are grouped per partition and sent every ``linger_ms``.

Invariants:
- Records of one partition are appended in ``send`` order: a partition's
  batches are written to the connection in the order they closed, up to
  ``max_in_flight_per_partition`` of them unanswered at once (Kafka's
  ``max.in.flight.requests.per.connection``, 5), and Kafka answers and appends
  a connection's requests in order.
- Every ``send`` future resolves: with the record's :class:`RecordMetadata`
  (offset -1 under ``acks=0``), or with the KafkaError of its batch. ``flush`` returns when every
  record sent before it has resolved and raises the first error among them.
- A batch closes when it reaches ``batch_bytes`` (estimated from record sizes)
  or ``linger_ms`` after its first record, whichever comes first. It is built
  from its columns in one call (:mod:`storage.columnar`), not record by record.
- With ``idempotent=True`` every batch carries a producer id, epoch and
  per-partition sequence (Kafka's idempotent producer), so a batch whose answer
  was lost (connection dropped, timeout) is sent again and the broker appends it
  at most once. Sequences are assigned when a batch is written, in write order,
  so they stay consecutive with several batches in flight; a batch is re-sent
  only after the batch before it resolved, so retries keep the order too (and a
  batch the broker refused as out of order because an earlier one was lost is
  re-sent after that one). Without idempotence nothing is retried: a retry could
  append twice. After a batch fails for good the producer takes a new producer
  id, so later sequences never depend on whether that batch was stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from client._lazy import LazyModule
from client.aio import (
    _RECORD_OVERHEAD,
    METADATA_MAX_AGE_S,
    Client,
    ProducerRecord,
    compression_codec,
    record_size,
    to_wire,
)
from client.partitioner import StickyPartitioner, choose_partition
from protocol.errors import ErrorCode, KafkaError
from storage import records as rec

columnar = LazyModule("storage.columnar")  # NumPy and PyArrow only once a batch is built

__all__ = ["Producer", "RecordMetadata"]

#: Errors after which an idempotent batch may or may not have been appended.
_RETRIABLE = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})
_SEQUENCE_MODULUS = 1 << 31  # Kafka sequences wrap to 0 after Int32.MAX


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written (as Kafka's Java client reports it)."""

    topic: str
    partition: int
    offset: int



@dataclass
class _Pending:
    """An open batch, kept as columns until it is built."""

    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    headers: list[Any] = field(default_factory=list)
    has_headers: bool = False
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    size: int = rec.HEADER_SIZE
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Lane:
    """One partition's ordering state: the last batch's write and outcome, and the window."""

    window: asyncio.Semaphore
    written: asyncio.Future[None] | None = None
    done: asyncio.Future[bool] | None = None
    open: int = 0


class Producer:
    """Batching producer on top of :class:`client.Client` (see the module docstring).

    >>> async with Producer(client, linger_ms=5) as p:   # doctest: +SKIP
    ...     fut = await p.send("events", ProducerRecord(b"k", b"v"))
    ...     await p.flush(); print(fut.result().offset)
    """

    def __init__(
        self,
        client: Client,
        *,
        linger_ms: float = 5.0,
        batch_bytes: int = 1024 * 1024,
        acks: int = 1,
        compression: str | None = None,
        max_in_flight_batches: int = 64,
        max_in_flight_per_partition: int = 5,
        idempotent: bool = False,
        retries: int = 5,
        retry_backoff_ms: float = 100.0,
    ) -> None:
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        if idempotent and acks == 0:
            raise ValueError("an idempotent producer needs acknowledgements (acks -1 or 1)")
        if not 1 <= max_in_flight_per_partition <= 5 and idempotent:
            # The broker remembers a producer's last 5 batches per partition (Kafka's
            # NUM_BATCHES_TO_RETAIN): more in flight could not be de-duplicated.
            raise ValueError("an idempotent producer allows 1..5 batches in flight per partition")
        if max_in_flight_per_partition < 1:
            raise ValueError("max_in_flight_per_partition must be at least 1")
        self.idempotent = idempotent
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self._pid: tuple[int, int] | None = None
        self._pid_lock = asyncio.Lock()
        self._seq: dict[tuple[str, int], int] = {}
        self.client = client
        self.linger_ms = linger_ms
        self.batch_bytes = batch_bytes
        self.acks = acks
        self.codec = compression_codec(compression)
        self._sticky = StickyPartitioner()
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._lanes: dict[tuple[str, int], _Lane] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self.max_in_flight_batches = max_in_flight_batches
        self.max_in_flight_per_partition = max_in_flight_per_partition
        self._nparts: dict[str, int] = {}
        self._nparts_at: dict[str, float] = {}
        self._errors: list[BaseException] = []

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.flush()

    async def send(
        self, topic: str, record: ProducerRecord, *, partition: int | None = None
    ) -> asyncio.Future[RecordMetadata]:
        """Queue ``record``; the future resolves to its RecordMetadata once acknowledged.

        Awaiting ``send`` itself only waits when too many batches are in flight
        (back-pressure), never for the acknowledgement.
        """
        ts, k, v = record.timestamp, record.key, record.value
        headers: Any = None
        if (
            isinstance(ts, int)
            and ts >= 0
            and (k is None or isinstance(k, bytes))
            and (v is None or isinstance(v, bytes))
            and not record.headers
        ):  # the common case, without to_wire's conversions
            size = _RECORD_OVERHEAD + (len(k) if k else 0) + (len(v) if v else 0)
        else:
            wire = to_wire(record)
            ts, k, v, headers = wire.timestamp, wire.key, wire.value, wire.headers or None
            size = record_size(wire)
        if partition is None:
            n = self._nparts.get(topic, 0)
            if not n or time.monotonic() - self._nparts_at[topic] > METADATA_MAX_AGE_S:
                n = self._nparts[topic] = len(await self.client.partitions_for(topic))
                self._nparts_at[topic] = time.monotonic()
            partition = choose_partition(k, topic, n, self._sticky)
        key = (topic, partition)
        pend = self._pending.get(key)
        if pend is not None and pend.futures and pend.size + size > self.batch_bytes:
            self._close_batch(key)  # this record would overflow the open batch
            pend = None
        loop = asyncio.get_running_loop()
        if pend is None:
            pend = self._pending[key] = _Pending()
            pend.timer = loop.call_later(self.linger_ms / 1000, self._close_batch, key)
        fut: asyncio.Future[RecordMetadata] = loop.create_future()
        pend.keys.append(k)
        pend.values.append(v)
        pend.timestamps.append(ts)  # type: ignore[arg-type]  # to_wire filled a None
        pend.headers.append(headers)
        if headers:
            pend.has_headers = True
        pend.futures.append(fut)
        pend.size += size
        if pend.size >= self.batch_bytes:
            self._close_batch(key)
        while len(self._inflight) >= self.max_in_flight_batches:
            await asyncio.wait(list(self._inflight), return_when=asyncio.FIRST_COMPLETED)
        return fut

    def _close_batch(self, key: tuple[str, int]) -> None:
        pend = self._pending.pop(key, None)
        if pend is None:
            return
        if pend.timer is not None:
            pend.timer.cancel()
        topic, partition = key
        n = self._nparts.get(topic, 0)
        if n and partition == self._sticky.partition(topic, n):
            self._sticky.batch_closed(topic, n)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(asyncio.Semaphore(self.max_in_flight_per_partition))
        loop = asyncio.get_running_loop()
        prev_written, prev_done = lane.written, lane.done
        written: asyncio.Future[None] = loop.create_future()
        done: asyncio.Future[bool] = loop.create_future()
        lane.written, lane.done = written, done
        lane.open += 1
        task = loop.create_task(
            self._send_batch(key, pend, lane, prev_written, prev_done, written, done))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _send_batch(
        self,
        key: tuple[str, int],
        pend: _Pending,
        lane: _Lane,
        prev_written: asyncio.Future[None] | None,
        prev_done: asyncio.Future[bool] | None,
        written: asyncio.Future[None],
        done: asyncio.Future[bool],
    ) -> None:
        ok = False
        try:
            if prev_written is not None:
                await asyncio.shield(prev_written)  # the previous batch is on the wire first
            async with lane.window:
                base = await self._append(key, pend, written, prev_done)
            topic, partition = key
            for i, f in enumerate(pend.futures):
                if not f.done():
                    f.set_result(RecordMetadata(topic, partition, -1 if base < 0 else base + i))
            ok = True
        except Exception as e:  # every send future must resolve, whatever failed
            if self.idempotent:
                self._pid = None  # unknown outcome: later batches start a new sequence space
                self._seq.clear()
            self._errors.append(e)
            for f in pend.futures:
                if not f.done():
                    f.set_exception(e)
                    f.exception()  # flush() reports it; don't also log "never retrieved"
        finally:
            if not written.done():
                written.set_result(None)
            done.set_result(ok)
            lane.open -= 1
            if lane.open == 0 and self._lanes.get(key) is lane:
                del self._lanes[key]

    async def _producer_id(self) -> tuple[int, int]:
        async with self._pid_lock:
            if self._pid is None:
                self._pid = await self.client.init_producer_id()
                self._seq.clear()
            return self._pid

    def _build(self, pend: _Pending, **producer: Any) -> bytes:
        return columnar.build_batch_columns(
            pend.keys, pend.values, pend.timestamps,
            pend.headers if pend.has_headers else None, compression=self.codec, **producer,
        )

    async def _append(
        self,
        key: tuple[str, int],
        pend: _Pending,
        written: asyncio.Future[None],
        prev_done: asyncio.Future[bool] | None,
    ) -> int:
        """Write one batch (then release the next), wait for its answer; idempotent
        batches are re-sent, in order, after an ambiguous failure."""
        topic, partition = key
        client = self.client
        if not self.idempotent:
            batch = self._build(pend)
            sent = await client.send_produce(topic, {partition: batch}, self.acks)
            written.set_result(None)
            return (await client.wait_produce(topic, {partition: batch}, sent))[partition]
        pid, epoch = await self._producer_id()
        seq = self._seq.get(key, 0)
        self._seq[key] = (seq + len(pend.futures)) % _SEQUENCE_MODULUS
        batch = self._build(pend, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        for attempt in range(self.retries + 1):
            try:
                try:
                    sent = await client.send_produce(topic, {partition: batch}, self.acks)
                finally:
                    if not written.done():
                        written.set_result(None)  # the next batch may follow (or fail) now
                return (await client.wait_produce(topic, {partition: batch}, sent))[partition]
            except KafkaError as e:
                # OUT_OF_ORDER_SEQUENCE_NUMBER behind an unresolved batch means that
                # batch was lost: re-send after it, as for a lost answer.
                behind = prev_done is not None and not prev_done.done()
                retriable = e.code in _RETRIABLE or (
                    e.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and behind)
                if not retriable or attempt == self.retries:
                    raise
                if prev_done is not None and not await asyncio.shield(prev_done):
                    raise  # the batch before failed for good: this sequence cannot follow
                await asyncio.sleep(self.retry_backoff_ms / 1000 * (attempt + 1))
                if self._pid != (pid, epoch):
                    raise  # another batch's failure retired this producer id
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def flush(self) -> None:
        """Send every open batch now and wait for all outstanding records; raise the first error."""
        for key in list(self._pending):
            self._close_batch(key)
        if self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
        if self._errors:
            first = self._errors[0]
            self._errors.clear()
            raise first

    async def close(self) -> None:
        with contextlib.suppress(KafkaError):
            await self.flush()
