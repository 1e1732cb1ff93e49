"""Producing: records and columns into batches, placement on partitions, pipelined Produce requests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from client.connection import BrokerConnection
from client.model import (
    _PIPELINE_BYTES,
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_IN_FLIGHT,
    INIT_PRODUCER_ID,
    PRODUCE,
    Placement,
    ProducerRecord,
    ProduceWindow,
    _cut,
    _header_lists,
    _header_sizes,
    _int_column,
    _now_ms,
    _raise_for,
    _take,
    columnar,
    compression_codec,
    np,
    pa,
)
from client.partitioner import partitions_for_keys
from client.parts.core import ClientCore
from protocol import messages as m
from protocol.errors import ErrorCode, KafkaError
from storage import records as rec

if TYPE_CHECKING:
    import numpy.typing as npt


class ProduceMixin(ClientCore):
    """The produce part of :class:`client.aio.Client`."""

    async def init_producer_id(self) -> tuple[int, int]:
        """A fresh idempotent producer id and epoch (InitProducerId, no transactional id)."""
        body = {
            "transactional_id": None,
            "transaction_timeout_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        resp = await self._request(INIT_PRODUCER_ID, body)
        _raise_for(resp["error_code"], "InitProducerId")
        return int(resp["producer_id"]), int(resp["producer_epoch"])

    async def produce(
        self,
        topic: str,
        records: Iterable[ProducerRecord],
        *,
        partition: int | None = None,
        acks: int = 1,
        compression: str | int | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> list[int]:
        """Produce ``records`` and return each one's offset, in input order.

        ``partition=None`` places records as Kafka's default partitioner does
        (murmur2 of the key; null keys stick to one partition per call, rotating).
        One batch per partition, all partitions in one Produce request per leader;
        a partition's records beyond ``max_batch_bytes`` (an upper bound of the
        encoded size, below Kafka's default max.message.bytes) go in following
        requests, up to ``max_in_flight`` of them on the wire at once (a call of
        1 MiB or more is cut into up to ``max_in_flight`` even requests of at least
        512 KiB, so the broker appends one while the next is encoded).
        With ``acks=0`` the broker sends no answer and the offsets are all -1.
        """
        items = records if isinstance(records, list) else list(records)
        if not items:
            return []
        # One attribute a pass, columns straight from the records: no per-record
        # object is made on the way (the records themselves are the GC's work).
        hdrs = [r.headers for r in items]
        placed = await self.produce_columns(
            topic, [r.value for r in items], [r.key for r in items],
            [r.timestamp for r in items], hdrs if any(hdrs) else None, partition=partition,
            acks=acks, compression=compression, max_batch_bytes=max_batch_bytes,
            max_in_flight=max_in_flight,
        )
        return placed.offsets.tolist()  # type: ignore[no-any-return]

    async def produce_arrow(
        self,
        topic: str,
        table: pa.Table | pa.RecordBatch,
        *,
        acks: int = 1,
        compression: str | int | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> Placement:
        """Bulk-produce an Arrow table; returns each row's partition and offset (input order).

        Columns: ``value`` (binary or string, required); optional ``key``,
        ``timestamp`` (epoch ms as int64, or any Arrow timestamp; null = now),
        ``partition`` (int; null or absent = the default partitioner) and
        ``headers`` (list<struct<key: string, value: binary>>). Others are ignored.
        """
        names = table.schema.names
        if "value" not in names:
            raise ValueError(f"produce_arrow needs a 'value' column; the table has {names}")

        def col(name: str) -> Any:
            return table.column(name) if name in names else None

        parts = col("partition")
        return await self.produce_columns(
            topic, col("value"), col("key"), col("timestamp"), col("headers"),
            partitions=None if parts is None else _int_column(parts),
            acks=acks, compression=compression, max_batch_bytes=max_batch_bytes,
            max_in_flight=max_in_flight,
        )

    async def produce_columns(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        timestamps: Any = None,
        headers: Any = None,
        *,
        partition: int | None = None,
        partitions: npt.NDArray[np.int64] | None = None,
        acks: int = 1,
        compression: str | int | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        window: ProduceWindow | None = None,
    ) -> Placement:
        """Produce records given as columns (see ``storage.columnar.build_batch_columns``
        for the accepted forms); returns each record's partition and offset in input order.

        ``partition`` sends every record there; otherwise ``partitions`` (-1 = let
        the default partitioner choose) and then the default partitioner place them.
        With a ``window`` (:class:`ProduceWindow`) the call returns once its requests
        are written: requests of successive calls share the window's in-flight
        bound and order, and the returned offsets are filled in as answers arrive
        (complete after ``await window.drain()``).
        """
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        vcol = columnar.binary_column(values)
        n = len(vcol)
        offsets = np.full(n, -1, dtype=np.int64)
        if n == 0:
            return Placement(offsets.copy(), offsets)
        kcol = columnar.binary_column(keys, n)
        ts = columnar.timestamp_column(timestamps, n, _now_ms())
        if len(kcol) != n or len(ts) != n:
            raise ValueError(f"columns differ in length: {n} values, {len(kcol)} keys, "
                             f"{len(ts)} timestamps")
        if bool((ts < 0).any()):
            ts_bad = int(ts[np.argmax(ts < 0)])
            raise ValueError(
                f"record timestamp {ts_bad} is negative; Kafka timestamps are epoch ms >= 0")
        hlist: list[Any] | None = None
        if headers is not None:
            hlist = _header_lists(headers)
            if len(hlist) != n:
                raise ValueError(f"{len(hlist)} header lists for {n} records")
        codec = compression_codec(compression)
        groups = await self._place(topic, kcol, n, partition, partitions)
        sizes = columnar.encoded_sizes(kcol, vcol, _header_sizes(hlist))
        limit = max(1, max_batch_bytes - rec.HEADER_SIZE)
        # Kafka takes one batch per partition per Produce, and a batch must fit
        # max.message.bytes: round r carries chunk r of every partition. A large
        # call is cut into up to max_in_flight even requests (of at least
        # _PIPELINE_BYTES) so the broker appends one while the next is built.
        total = int(sizes.sum())
        pieces = min(max_in_flight, total // _PIPELINE_BYTES)
        if pieces > 1:
            limit = min(limit, -(-total // pieces))
        chunks: dict[int, list[npt.NDArray[np.int64] | slice]] = {
            p: _cut(idx, sizes, limit, n) for p, idx in groups.items()}

        own = window is None
        win = ProduceWindow(self, max_in_flight) if window is None else window
        part_of = np.empty(n, dtype=np.int64)
        for p, members in groups.items():
            part_of[slice(None) if members is None else members] = p

        def fill(placed: dict[int, npt.NDArray[np.int64] | slice]) -> Callable[[dict[int, int]], None]:
            def done(bases: dict[int, int]) -> None:
                for p, base in bases.items():
                    if base >= 0:
                        idx = placed[p]
                        count = idx.stop - idx.start if isinstance(idx, slice) else len(idx)
                        offsets[idx] = np.arange(base, base + count)
            return done

        try:
            for r in range(max(len(c) for c in chunks.values())):
                batches: dict[int, bytes] = {}
                placed: dict[int, npt.NDArray[np.int64] | slice] = {}
                for p, cs in chunks.items():
                    if r < len(cs):
                        idx = cs[r]
                        hs = None
                        if hlist is not None:
                            hs = hlist[idx] if isinstance(idx, slice) else [hlist[i] for i in idx]
                        batches[p] = columnar.build_batch_columns(
                            _take(kcol, idx), _take(vcol, idx), ts[idx], hs, compression=codec)
                        placed[p] = idx
                await win.send(topic, batches, acks, fill(placed))
            if own:
                await win.drain()
        finally:
            if own:
                await win.abandon()
        return Placement(part_of, offsets)

    async def _place(
        self, topic: str, keys: pa.BinaryArray, n: int, partition: int | None,
        partitions: npt.NDArray[np.int64] | None,
    ) -> dict[int, npt.NDArray[np.int64] | None]:
        """Record indexes per partition (None = every record, in order)."""
        if partition is not None:
            return {partition: None}
        meta = await self._topic_meta(topic)
        num = len(meta.partitions)
        parts = partitions_for_keys(keys, num) if keys.null_count < n else np.full(n, -1, np.int64)
        if partitions is not None:
            parts = np.where(partitions >= 0, partitions, parts)
        unplaced = parts < 0
        if bool(unplaced.any()):
            parts = np.where(unplaced, self._sticky.partition(topic, num), parts)
            self._sticky.batch_closed(topic, num)
        first = int(parts[0])
        if bool((parts == first).all()):
            return {first: None}
        present = np.flatnonzero(np.bincount(parts, minlength=num))  # 0..num-1: count, don't sort
        return {int(p): np.flatnonzero(parts == p) for p in present.tolist()}

    async def produce_batch(
        self, topic: str, partition: int, batch: bytes, *, acks: int = 1
    ) -> int:
        """Append one pre-built ``storage.records`` batch; returns its base offset (-1 for acks=0)."""
        sent = await self.send_produce(topic, {partition: batch}, acks)
        return (await self.wait_produce(topic, {partition: batch}, sent))[partition]

    async def send_produce(
        self, topic: str, batches: Mapping[int, bytes], acks: int
    ) -> list[tuple[BrokerConnection, asyncio.Future[Any]]]:
        """Write one Produce request per leader for ``batches``; returns what to hand to
        :meth:`wait_produce`. With the two halves apart a caller keeps several requests
        in flight (``ProduceWindow``, the batching ``Producer``, ``SyncClient``)."""
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        by_leader: dict[int, dict[int, bytes]] = {}
        for p, b in batches.items():
            by_leader.setdefault(await self._leader(topic, p), {})[p] = b
        version = self.api_version(PRODUCE)
        pending = []
        for leader, parts in by_leader.items():
            body = m.ProduceRequest(
                transactional_id=None,
                acks=acks,
                timeout_ms=int(self.request_timeout * 1000),
                topic_data=[
                    m.ProduceRequestTopicData(
                        name=topic,
                        partition_data=[m.ProduceRequestTopicDataPartitionData(index=p, records=b)
                                        for p, b in parts.items()],
                    )
                ],
            )
            conn = await self._conn_for(leader)
            pending.append((conn, conn.send(PRODUCE, version, body, expect_response=acks != 0)))
        for conn, _ in pending:
            await conn.drain()
        return pending

    async def wait_produce(
        self, topic: str, batches: Mapping[int, bytes],
        pending: list[tuple[BrokerConnection, asyncio.Future[Any]]],
    ) -> dict[int, int]:
        """The base offset per partition of a request from send_produce (-1 for acks=0)."""
        out = {p: -1 for p in batches}
        error: KafkaError | None = None
        for conn, fut in pending:
            try:
                resp = await conn.wait(fut)
            except KafkaError as e:
                error = error or e
                continue
            if resp is None:
                continue
            for t in resp["responses"]:
                for pr in t["partition_responses"]:
                    msg = pr.get("error_message")
                    errs = pr.get("record_errors") or []
                    if errs and not msg:
                        detail = "; ".join(
                            f"record {e['batch_index']}: {e.get('batch_index_error_message')}"
                            for e in errs[:5]
                        )
                        msg = detail
                    if pr["error_code"] in (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ):
                        self._topics.pop(topic, None)
                    try:
                        _raise_for(pr["error_code"], f"produce to {topic}-{pr['index']}", msg)
                    except KafkaError as e:
                        error = error or e
                        continue
                    out[pr["index"]] = pr["base_offset"]
        if error is not None:
            raise error
        return out
