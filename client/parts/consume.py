"""Reading: Fetch, exact consumption of offset ranges, and reads of time ranges and planned ranges."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, TypedDict, Unpack

from client.model import (
    _DEFAULT_FETCH_BYTES,
    _MAX_FETCH_BYTES,
    FETCH,
    FetchResult,
    Record,
    _next_offset,
    _raise_for,
    decode_arrow,
    decode_records,
    pa,
)
from client.parts.lookup import LookupMixin
from protocol.errors import ErrorCode, KafkaError
from storage.planner import PlannedRange


class ChunkOptions(TypedDict, total=False):
    """The options of :meth:`Client.consume_chunks` and :meth:`Client.consume_arrow`.

    ``follow`` (False): long-poll for new records until ``end_offset`` (forever when
    None) instead of stopping at the high watermark. ``max_bytes`` (the default Fetch
    size): each Fetch's byte limit (doubled while one batch does not fit in it).
    ``poll_ms`` (500): how long a following Fetch waits for data. ``isolation_level``
    (0): 1 = read_committed.
    """

    follow: bool
    max_bytes: int
    poll_ms: int
    isolation_level: int


class ConsumeMixin(LookupMixin):
    """The consume part of :class:`client.aio.Client`."""

    async def fetch_raw(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = _DEFAULT_FETCH_BYTES,
        *,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        isolation_level: int = 0,
        timeout: float | None = None,
    ) -> FetchResult:
        """One Fetch for one partition: the raw batches from the one holding ``offset``.

        The bytes may start before ``offset`` and end with a torn batch (both are
        Kafka's Fetch semantics); :func:`storage.records.iter_batches` handles both.
        ``timeout`` defaults to ``request_timeout`` plus the long-poll wait.
        """
        return await self._retry_read(
            lambda: self._fetch_raw_once(
                topic, partition, offset, max_bytes, max_wait_ms, min_bytes, isolation_level, timeout
            )
        )

    async def _fetch_raw_once(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        max_wait_ms: int,
        min_bytes: int,
        isolation_level: int,
        timeout: float | None,
    ) -> FetchResult:
        version = self.api_version(FETCH)
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "topic_id": bytes(16),
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        leader = await self._leader(topic, partition)
        conn = await self._conn_for(leader)
        if timeout is None:
            timeout = self.request_timeout + max_wait_ms / 1000
        fut = conn.send(FETCH, version, body)
        await conn.drain()
        resp = await conn.wait(fut, timeout)
        _raise_for(resp.get("error_code", 0), f"fetch {topic}-{partition}")
        for t in resp["responses"]:
            for p in t["partitions"]:
                if p["partition_index"] != partition:
                    continue
                if p["error_code"] in (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ):
                    self._topics.pop(topic, None)
                _raise_for(p["error_code"], f"fetch {topic}-{partition} at offset {offset}")
                return FetchResult(
                    bytes(p["records"] or b""), p["high_watermark"], p["log_start_offset"],
                    p.get("last_stable_offset", -1),
                    tuple((a["producer_id"], a["first_offset"])
                          for a in p.get("aborted_transactions") or ()),
                )
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"fetch response lacks {topic}-{partition}"
        )

    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int = _DEFAULT_FETCH_BYTES
    ) -> tuple[list[Record], int]:
        """Decoded records at offsets >= ``offset`` from one Fetch, and the high watermark."""
        res = await self.fetch_raw(topic, partition, offset, max_bytes)
        out, _ = decode_records(res.records_bytes, topic, partition, offset, None)
        return out, res.high_watermark

    def consume_chunks(
        self, topic: str, partition: int, start_offset: int, end_offset: int | None = None,
        **options: Unpack[ChunkOptions],
    ) -> AsyncIterator[list[Record]]:
        """Lists of records covering exactly [start, end) in order (see :meth:`consume`);
        ``options`` as :class:`ChunkOptions` says.

        While one chunk is decoded the Fetch for the next one is already on the
        wire (its offset is known from a shallow walk of the batch headers), so
        the broker's read and our decode overlap. Under read_committed
        (``isolation_level`` 1) reading stops at the last stable offset and records of
        aborted transactions are dropped, as Kafka's consumer drops them.
        """
        return self._chunks(topic, partition, start_offset, end_offset, decode_records,
                            **options)

    def consume_arrow(
        self, topic: str, partition: int, start_offset: int, end_offset: int | None = None,
        **options: Unpack[ChunkOptions],
    ) -> AsyncIterator[pa.RecordBatch]:
        """Arrow record batches covering exactly [start, end) in order, one per Fetch;
        ``options`` as for :meth:`consume_chunks`.

        Columns: ``key``, ``value`` (binary, null where the record's is),
        ``offset`` (int64), ``timestamp`` (int64 epoch ms, LogAppendTime applied),
        ``timestamp_type`` (int32: 0 CreateTime, 1 LogAppendTime) and ``headers``
        (list<struct<key: string, value: binary>>). Decoding is vectorised
        (:func:`storage.columnar.decode_columns`): no Python object per record.
        The same rows as :meth:`consume_chunks`, in the same order (and the same
        ``isolation_level``).
        """
        return self._chunks(topic, partition, start_offset, end_offset, decode_arrow,
                            **options)

    async def _chunks(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None,
        decode: Callable[[bytes, str, int, int, int | None, Sequence[tuple[int, int]]],
                         tuple[Any, int]],
        *,
        follow: bool = False,
        max_bytes: int = _DEFAULT_FETCH_BYTES,
        poll_ms: int = 500,
        isolation_level: int = 0,
        budget: int | None = None,
    ) -> AsyncIterator[Any]:
        """``budget``: the bytes planned for the whole span (a planned range); each
        Fetch asks for no more than what is left of it (a Fetch still answers at least
        one whole batch), so a span across segments does not read past its end."""
        committed = isolation_level == 1
        offset = start_offset

        def sized(received: int = 0) -> int:
            if budget is None:
                return max_bytes
            return max(1, min(max_bytes, budget - received))

        received = 0
        size = sized()
        empty = 0
        wait = poll_ms if follow else 0
        ahead: tuple[int, asyncio.Future[FetchResult]] | None = None
        try:
            while end_offset is None or offset < end_offset:
                if ahead is not None and ahead[0] == offset:
                    res = await ahead[1]
                else:
                    res = await self.fetch_raw(topic, partition, offset, size, max_wait_ms=wait,
                                               isolation_level=isolation_level)
                ahead = None
                received += len(res.records_bytes)
                end_of_data = res.last_stable_offset if committed else res.high_watermark
                nxt = _next_offset(res.records_bytes, offset)
                if nxt > offset and (end_offset is None or nxt < end_offset) and (
                    follow or nxt < end_of_data
                ):
                    ahead = (
                        nxt,
                        asyncio.ensure_future(
                            self.fetch_raw(topic, partition, nxt, sized(received),
                                           max_wait_ms=wait, isolation_level=isolation_level)
                        ),
                    )
                records, next_offset = decode(
                    res.records_bytes, topic, partition, offset, end_offset, res.aborted
                )
                if records:
                    yield records
                if next_offset > offset:
                    offset = next_offset
                    size = sized(received)
                    empty = 0
                    if not follow and offset >= end_of_data:
                        return
                    continue
                if offset >= end_of_data:
                    if not follow:
                        return
                    continue  # the long poll already waited poll_ms
                if res.records_bytes:
                    # Only a torn batch came back: it is larger than the byte limit.
                    if size >= _MAX_FETCH_BYTES:
                        raise KafkaError(
                            ErrorCode.RECORD_LIST_TOO_LARGE,
                            f"{topic}-{partition}: batch at offset {offset} exceeds {size} bytes",
                        )
                    size *= 2
                    continue
                empty += 1
                if empty >= 3 and not follow:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_SERVER_ERROR,
                        f"{topic}-{partition}: fetch at {offset} returned no data below "
                        f"high watermark {res.high_watermark}",
                    )
        finally:
            if ahead is not None:
                ahead[1].cancel()
                with contextlib.suppress(asyncio.CancelledError, KafkaError):
                    await ahead[1]

    async def consume(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None = None,
        *,
        follow: bool = False,
        isolation_level: int = 0,
    ) -> AsyncIterator[Record]:
        """Yield the records of ``[start_offset, end_offset)`` in offset order.

        Without ``follow``, reading stops at ``end_offset`` or at the high
        watermark, whichever comes first; with ``follow`` it long-polls for new
        records until ``end_offset`` (forever when None). ``isolation_level`` 1 reads
        committed records only (see :meth:`consume_chunks`).
        """
        async for chunk in self.consume_chunks(topic, partition, start_offset, end_offset,
                                               follow=follow, isolation_level=isolation_level):
            for r in chunk:
                yield r

    async def read_time_range(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None,
        *, event_time: bool = False, isolation_level: int = 0,
    ) -> AsyncIterator[Record]:
        """The records of a time window, partition by partition (ascending), each in
        offset order.

        ``event_time=False`` (the default): positional, Kafka's offsetsForTimes replay
        meaning — ``[first offset with ts >= start_ms, first offset with ts >= end_ms)``.
        Under CreateTime with out-of-order timestamps that range may hold records
        outside the window and miss records inside it; it is what a Kafka consumer
        seeking by time replays, so it stays the default (existing callers, the CLI's
        and Spark's offsets, and Kafka brokers, which have no event-time plan).

        ``event_time=True``: exactly the records with start_ms <= timestamp < end_ms,
        wherever they sit, fetching only the ranges :meth:`plan_time_window` returns
        (Chronolog brokers only). Under read_committed (``isolation_level`` 1) records
        of aborted transactions are left out and reading stops at the last stable offset.
        """
        async for chunk in self._time_range_chunks(topic, start_ms, end_ms, partitions,
                                                   event_time=event_time,
                                                   isolation_level=isolation_level):
            for r in chunk:
                yield r

    def _time_range_chunks(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None,
        *, event_time: bool = False, isolation_level: int = 0,
    ) -> AsyncIterator[list[Record]]:
        """:meth:`read_time_range`'s records one list per Fetch (what SyncClient iterates,
        crossing threads once per list)."""
        return (chunk async for _, chunk in self._time_window(
            topic, start_ms, end_ms, partitions, event_time, isolation_level, arrow=False))

    def read_time_range_arrow(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None,
        *, event_time: bool = False, isolation_level: int = 0,
    ) -> AsyncIterator[tuple[int, pa.RecordBatch]]:
        """:meth:`read_time_range` as (partition, Arrow record batch) pairs, columns as
        :meth:`consume_arrow`'s; the same rows in the same order, the same two meanings
        (``event_time``), decoded column-wise. Batches left empty by the window's
        filter are not yielded."""
        return self._time_window(topic, start_ms, end_ms, partitions, event_time,
                                 isolation_level, arrow=True)

    async def _time_window(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None,
        event_time: bool, isolation_level: int, *, arrow: bool,
    ) -> AsyncIterator[tuple[int, Any]]:
        """(partition, chunk) pairs of a time window in both meanings of ``event_time``;
        chunks are record lists, or Arrow batches with ``arrow``. One walk serves
        :meth:`read_time_range` and :meth:`read_time_range_arrow`, so they cannot differ
        in which rows they read."""
        whole = self.consume_arrow if arrow else self.consume_chunks
        planned = self.read_planned_range_arrow if arrow else self.read_planned_range
        if not event_time:
            ranges = await self.time_range_offsets(topic, start_ms, end_ms, partitions)
            for p, (s, e) in sorted(ranges.items()):
                if s < e:
                    async for chunk in whole(topic, p, s, e, isolation_level=isolation_level):
                        yield p, chunk
            return
        plans = await self.plan_time_window(topic, start_ms, end_ms, partitions,
                                            isolation_level=isolation_level)
        for p, plan in sorted(plans.items()):
            for rng in plan.ranges:
                async for chunk in planned(topic, p, rng, start_ms, end_ms,
                                           isolation_level=isolation_level):
                    yield p, chunk

    async def read_planned_range(
        self, topic: str, partition: int, rng: PlannedRange, start_ms: int, end_ms: int,
        *, isolation_level: int = 0,
    ) -> AsyncIterator[list[Record]]:
        """The records of one planned range (:meth:`plan_time_window`) with start_ms <=
        timestamp < end_ms, in offset order, one list per Fetch (lists left empty by the
        window are not yielded). Each Fetch asks for what is left of the range's bytes,
        so the broker sends little beyond it. A plan's ranges can be read in parallel
        (e.g. one Spark task each); together they give exactly the event-time window."""
        async for chunk in self._planned_chunks(topic, partition, rng, isolation_level,
                                                decode_records):
            kept = [r for r in chunk if start_ms <= r.timestamp < end_ms]
            if kept:
                yield kept

    async def read_planned_range_arrow(
        self, topic: str, partition: int, rng: PlannedRange, start_ms: int, end_ms: int,
        *, isolation_level: int = 0,
    ) -> AsyncIterator[pa.RecordBatch]:
        """:meth:`read_planned_range` as Arrow record batches (:meth:`consume_arrow`'s
        columns), filtered column-wise."""
        import pyarrow.compute as pc

        async for batch in self._planned_chunks(topic, partition, rng, isolation_level,
                                                decode_arrow):
            ts = batch.column("timestamp")
            kept = batch.filter(pc.and_(pc.greater_equal(ts, start_ms), pc.less(ts, end_ms)))
            if kept.num_rows:
                yield kept

    def _planned_chunks(self, topic: str, partition: int, rng: PlannedRange,
                        isolation_level: int, decode: Any) -> AsyncIterator[Any]:
        return self._chunks(topic, partition, rng.start_offset, rng.end_offset, decode,
                            isolation_level=isolation_level, budget=rng.bytes)
