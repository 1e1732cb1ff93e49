"""A batching producer: records are grouped per partition and sent every ``linger_ms``.

Invariants:
- Records of one partition are appended in ``send`` order: a partition has at
  most one batch in flight, and the next one is sent only after the previous
  answer (so a failed batch is never overtaken by a later one).
- Every ``send`` future resolves: with the record's :class:`RecordMetadata`
  (offset -1 under ``acks=0``), or with the KafkaError of its batch. ``flush`` returns when every
  record sent before it has resolved and raises the first error among them.
- A batch closes when it reaches ``batch_bytes`` (estimated from record sizes)
  or ``linger_ms`` after its first record, whichever comes first.
- With ``idempotent=True`` every batch carries a producer id, epoch and
  per-partition sequence (Kafka's idempotent producer), so a batch whose answer
  was lost (connection dropped, timeout) is sent again and the broker appends it
  at most once. Without it nothing is retried: a retry could append twice.
  After a batch fails for good the producer takes a new producer id, so later
  sequences never depend on whether that batch was stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from client.aio import (
    _RECORD_OVERHEAD,
    METADATA_MAX_AGE_S,
    Client,
    ProducerRecord,
    WireRecord,
    compression_codec,
    record_size,
    to_wire,
)
from client.partitioner import StickyPartitioner, choose_partition
from protocol.errors import ErrorCode, KafkaError
from storage import records as rec

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
    items: list[WireRecord] = field(default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    size: int = rec.HEADER_SIZE
    timer: asyncio.TimerHandle | None = None


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
        idempotent: bool = False,
        retries: int = 5,
        retry_backoff_ms: float = 100.0,
    ) -> None:
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        if idempotent and acks == 0:
            raise ValueError("an idempotent producer needs acknowledgements (acks -1 or 1)")
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
        self._chains: dict[tuple[str, int], asyncio.Future[None]] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self.max_in_flight_batches = max_in_flight_batches
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
        if (
            isinstance(ts, int)
            and ts >= 0
            and (k is None or isinstance(k, bytes))
            and (v is None or isinstance(v, bytes))
            and not record.headers
        ):  # the common case, without to_wire's conversions
            wire = WireRecord(ts, k, v)
            size = _RECORD_OVERHEAD + (len(k) if k else 0) + (len(v) if v else 0)
        else:
            wire = to_wire(record)
            size = record_size(wire)
        if partition is None:
            n = self._nparts.get(topic, 0)
            if not n or time.monotonic() - self._nparts_at[topic] > METADATA_MAX_AGE_S:
                n = self._nparts[topic] = len(await self.client.partitions_for(topic))
                self._nparts_at[topic] = time.monotonic()
            partition = choose_partition(wire.key, topic, n, self._sticky)
        key = (topic, partition)
        pend = self._pending.get(key)
        if pend is not None and pend.items and pend.size + size > self.batch_bytes:
            self._close_batch(key)  # this record would overflow the open batch
            pend = None
        loop = asyncio.get_running_loop()
        if pend is None:
            pend = self._pending[key] = _Pending()
            pend.timer = loop.call_later(self.linger_ms / 1000, self._close_batch, key)
        fut: asyncio.Future[RecordMetadata] = loop.create_future()
        pend.items.append(wire)
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
        prev = self._chains.get(key)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._chains[key] = done
        task = asyncio.get_running_loop().create_task(self._send_batch(key, pend, prev, done))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _send_batch(
        self,
        key: tuple[str, int],
        pend: _Pending,
        prev: asyncio.Future[None] | None,
        done: asyncio.Future[None],
    ) -> None:
        try:
            if prev is not None:
                await asyncio.shield(prev)
            base = await self._append(key, pend.items)
            topic, partition = key
            for i, f in enumerate(pend.futures):
                if not f.done():
                    f.set_result(RecordMetadata(topic, partition, -1 if base < 0 else base + i))
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
            done.set_result(None)
            if self._chains.get(key) is done:
                del self._chains[key]

    async def _producer_id(self) -> tuple[int, int]:
        async with self._pid_lock:
            if self._pid is None:
                self._pid = await self.client.init_producer_id()
                self._seq.clear()
            return self._pid

    async def _append(self, key: tuple[str, int], items: list[WireRecord]) -> int:
        """Send one batch; idempotent batches are re-sent on an ambiguous failure."""
        topic, partition = key
        if not self.idempotent:
            batch = rec.build_batch(items, compression=self.codec)
            return await self.client.produce_batch(topic, partition, batch, acks=self.acks)
        pid, epoch = await self._producer_id()
        seq = self._seq.get(key, 0)
        batch = rec.build_batch(
            items,
            compression=self.codec,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
        for attempt in range(self.retries + 1):
            try:
                base = await self.client.produce_batch(topic, partition, batch, acks=self.acks)
            except KafkaError as e:
                if e.code not in _RETRIABLE or attempt == self.retries:
                    raise
                await asyncio.sleep(self.retry_backoff_ms / 1000 * (attempt + 1))
                continue
            if self._pid == (pid, epoch):  # a failure elsewhere may have retired this id
                self._seq[key] = (seq + len(items)) % _SEQUENCE_MODULUS
            return base
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
