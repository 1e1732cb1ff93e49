"""Time lookups: ListOffsets (offsets for timestamps, earliest/latest/max), time ranges, planned windows, counts and disorder."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from client.model import (
    _SPECIAL_MIN_VERSION,
    COUNT_TIME_WINDOWS,
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    LIST_OFFSETS,
    MAX_TIMESTAMP,
    PLAN_TIME_WINDOW,
    TimeWindowPlan,
    TopicPartition,
    _raise_for,
)
from client.parts.core import ClientCore
from protocol import messages as m
from protocol.errors import ErrorCode, KafkaError
from storage.planner import DisorderStats, PlannedRange


class LookupMixin(ClientCore):
    """The lookup part of :class:`client.aio.Client`."""

    async def list_offsets(
        self, query: Mapping[TopicPartition, int], isolation_level: int = 0
    ) -> dict[TopicPartition, tuple[int, int]]:
        """One ListOffsets round for many partitions: ``{tp: (offset, timestamp)}``.

        ``timestamp`` may be epoch ms or LATEST (-1), EARLIEST (-2), MAX_TIMESTAMP (-3),
        EARLIEST_LOCAL (-4) or LATEST_TIERED (-5; offset -1 when nothing is tiered).
        No record at or after the time → ``(-1, -1)``. A partition error raises KafkaError.
        """
        return await self._retry_read(lambda: self._list_offsets_once(query, isolation_level))

    async def _list_offsets_once(
        self, query: Mapping[TopicPartition, int], isolation_level: int
    ) -> dict[TopicPartition, tuple[int, int]]:
        if not query:
            return {}
        version = self.api_version(LIST_OFFSETS)
        for ts in set(query.values()):
            need = _SPECIAL_MIN_VERSION.get(ts, 0) if ts < 0 else 0
            if ts < 0 and ts not in _SPECIAL_MIN_VERSION:
                raise ValueError(f"timestamp {ts}: only epoch ms >= 0, -1 .. -5 are valid")
            if version < need:
                raise KafkaError(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"ListOffsets timestamp {ts} needs v{need}, broker allows v{version}",
                )
        by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for tp, ts in query.items():
            leader = await self._leader(tp.topic, tp.partition)
            by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append((tp.partition, ts))
        pending = []
        for leader, topics in by_leader.items():
            body = m.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[
                    m.ListOffsetsRequestTopics(
                        name=t,
                        partitions=[
                            m.ListOffsetsRequestTopicsPartitions(
                                partition_index=p,
                                current_leader_epoch=-1,
                                timestamp=ts,
                                max_num_offsets=1,
                            )
                            for p, ts in parts
                        ],
                    )
                    for t, parts in topics.items()
                ],
                timeout_ms=int(self.request_timeout * 1000),
            )
            conn = await self._conn_for(leader)
            pending.append((conn, conn.send(LIST_OFFSETS, version, body)))
        for conn, _ in pending:
            await conn.drain()
        out: dict[TopicPartition, tuple[int, int]] = {}
        for conn, fut in pending:
            resp = await conn.wait(fut, poll=True)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    _raise_for(p["error_code"], f"list offsets of {tp.topic}-{tp.partition}")
                    out[tp] = (p["offset"], p["timestamp"])
        missing = [tp for tp in query if tp not in out]
        if missing:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no ListOffsets answer for {missing}")
        return out

    async def _per_partition(
        self, topic: str, ts: int, partitions: Iterable[int] | None, isolation_level: int = 0
    ) -> dict[int, tuple[int, int]]:
        parts = await self.partitions_for(topic) if partitions is None else list(partitions)
        res = await self.list_offsets({TopicPartition(topic, p): ts for p in parts},
                                      isolation_level)
        return {tp.partition: v for tp, v in sorted(res.items())}

    async def offsets_for_times(
        self, topic: str, ts_ms: int, partitions: Iterable[int] | None = None,
        isolation_level: int = 0,
    ) -> dict[int, tuple[int, int] | None]:
        """Per partition, the first ``(offset, timestamp)`` with timestamp >= ``ts_ms``, else None
        (under read_committed, isolation_level 1, also None at or past the last stable offset)."""
        if ts_ms < 0:
            raise ValueError(f"timestamp {ts_ms} is negative; use earliest()/latest() for specials")
        res = await self._per_partition(topic, ts_ms, partitions, isolation_level)
        return {p: (None if off < 0 else (off, ts)) for p, (off, ts) in res.items()}

    async def earliest(self, topic: str, partitions: Iterable[int] | None = None) -> dict[int, int]:
        """Per partition, the log start offset."""
        return {p: o for p, (o, _) in (await self._per_partition(topic, EARLIEST, partitions)).items()}

    async def latest(self, topic: str, partitions: Iterable[int] | None = None,
                     isolation_level: int = 0) -> dict[int, int]:
        """Per partition, the high watermark (the offset the next record will get); under
        read_committed (isolation_level 1) the last stable offset."""
        res = await self._per_partition(topic, LATEST, partitions, isolation_level)
        return {p: o for p, (o, _) in res.items()}

    async def earliest_local(self, topic: str, partitions: Iterable[int] | None = None
                             ) -> dict[int, int]:
        """Per partition, the first offset on the broker's local disk (ListOffsets -4,
        v8+, KIP-405): the log start unless older records live only in the remote tier."""
        res = await self._per_partition(topic, EARLIEST_LOCAL, partitions)
        return {p: o for p, (o, _) in res.items()}

    async def latest_tiered(self, topic: str, partitions: Iterable[int] | None = None
                            ) -> dict[int, int]:
        """Per partition, the last offset copied to the remote tier (ListOffsets -5, v9+,
        KIP-1005); -1 when nothing is."""
        res = await self._per_partition(topic, LATEST_TIERED, partitions)
        return {p: o for p, (o, _) in res.items()}

    async def max_timestamp(
        self, topic: str, partitions: Iterable[int] | None = None
    ) -> dict[int, tuple[int, int] | None]:
        """Per partition, ``(offset, timestamp)`` of the record with the largest timestamp, else None."""
        res = await self._per_partition(topic, MAX_TIMESTAMP, partitions)
        return {p: (None if off < 0 else (off, ts)) for p, (off, ts) in res.items()}

    async def time_range_offsets(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None
    ) -> dict[int, tuple[int, int]]:
        """Per partition, ``[first offset with ts >= start_ms, first offset with ts >= end_ms)``.

        A time with no record at or after it maps to the high watermark, so the
        range ends at the current end of the partition. The two ListOffsets (start,
        end) are pipelined; the high watermark is asked for afterwards, and only for
        partitions where a time had no record (a time before the end always has one).
        """
        if start_ms < 0 or end_ms < 0:
            raise ValueError("start_ms and end_ms must be epoch ms >= 0")
        parts = await self.partitions_for(topic) if partitions is None else list(partitions)
        tps = [TopicPartition(topic, p) for p in parts]
        starts, ends = await asyncio.gather(
            self.list_offsets({tp: start_ms for tp in tps}),
            self.list_offsets({tp: end_ms for tp in tps}),
        )
        open_ended = [tp for tp in tps if starts[tp][0] < 0 or ends[tp][0] < 0]
        latest = await self.list_offsets({tp: LATEST for tp in open_ended})
        out: dict[int, tuple[int, int]] = {}
        for tp in tps:
            s = starts[tp][0]
            e = ends[tp][0]
            s = latest[tp][0] if s < 0 else s
            e = latest[tp][0] if e < 0 else e
            out[tp.partition] = (s, max(s, e))
        return out

    async def plan_time_window(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None,
        *, isolation_level: int = 0,
    ) -> dict[int, TimeWindowPlan]:
        """Per partition, the event-time plan of ``[start_ms, end_ms)``: the offset
        ranges that may hold a record with start_ms <= timestamp < end_ms wherever it
        sits in the log (PlanTimeWindow, key 10000; Chronolog brokers only), plus the
        partition's offsets and disorder counts. Under read_committed
        (``isolation_level`` 1) ranges end at the last stable offset.

        Raises KafkaError UNSUPPORTED_VERSION against a broker without the API (Kafka).
        """
        if start_ms < 0 or end_ms < 0:
            raise ValueError("start_ms and end_ms must be epoch ms >= 0")
        answers = await self._ask_leaders(
            PLAN_TIME_WINDOW, topic, partitions, "plan time window",
            {"isolation_level": isolation_level, "start_timestamp": start_ms,
             "end_timestamp": end_ms})
        return {p["partition_index"]: TimeWindowPlan(
            p["partition_index"],
            tuple(PlannedRange(r["start_offset"], r["end_offset"], r["bytes"])
                  for r in p["ranges"]),
            p["log_start_offset"], p["high_watermark"], p["last_stable_offset"],
            DisorderStats(p["late_records"], p["max_lateness_ms"], p["records"]),
        ) for p in answers}

    async def count_time_windows(
        self, topic: str, boundaries: Sequence[int], partitions: Iterable[int] | None = None,
        *, isolation_level: int = 0,
    ) -> dict[int, list[int]]:
        """Per partition, exactly how many records have boundaries[k] <= timestamp <
        boundaries[k+1], for each k (CountTimeWindows, key 10001; Chronolog brokers
        only): every record wherever it sits in the log, counted by the broker, one
        request per leader. ``boundaries`` ascend, 2..10,000 of them. Under
        read_committed (``isolation_level`` 1) records past the last stable offset and
        those of aborted transactions are not counted.

        Raises KafkaError UNSUPPORTED_VERSION against a broker without the API (Kafka).
        """
        bounds = [int(b) for b in boundaries]
        if len(bounds) < 2 or any(a > b for a, b in zip(bounds, bounds[1:], strict=False)):
            raise ValueError("boundaries must ascend, at least two")
        answers = await self._ask_leaders(
            COUNT_TIME_WINDOWS, topic, partitions, "count time windows",
            {"isolation_level": isolation_level, "boundaries": bounds})
        return {p["partition_index"]: list(p["counts"]) for p in answers}

    async def _ask_leaders(self, api_key: int, topic: str, partitions: Iterable[int] | None,
                           what: str, fields: dict[str, Any]) -> list[Any]:
        """Ask each leader of ``topic``'s partitions (all by default) once, concurrently:
        ``fields`` plus the topic and its partitions there; every partition's answer. A
        partition's error is raised (naming ``what``), its metadata forgotten first when
        the error says the leader moved. Raises UNSUPPORTED_VERSION before asking a broker
        without ``api_key``."""
        self.api_version(api_key)
        parts = await self.partitions_for(topic) if partitions is None else list(partitions)
        by_leader: dict[int, list[int]] = {}
        for p in parts:
            by_leader.setdefault(await self._leader(topic, p), []).append(p)

        async def ask(leader: int, ps: list[int]) -> Any:
            body = {**fields, "topics": [{"name": topic, "partitions": ps}]}
            return await self._retry_read(lambda: self._request(api_key, body, leader))

        answers = await asyncio.gather(*(ask(n, ps) for n, ps in by_leader.items()))
        out: list[Any] = []
        for resp in answers:
            for t in resp["topics"]:
                for p in t["partitions"]:
                    index = p["partition_index"]
                    if p["error_code"] in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        self._topics.pop(topic, None)
                    _raise_for(p["error_code"], f"{what} of {topic}-{index}")
                    out.append(p)
        return out

    async def disorder_stats(
        self, topic: str, partitions: Iterable[int] | None = None
    ) -> dict[int, DisorderStats]:
        """Per partition, how out of order its timestamps arrived: records below the
        largest timestamp before them, the largest such gap, records counted (an empty
        PlanTimeWindow: no range is computed). ``late_records == 0`` means positional
        and event-time windows agree on that partition."""
        plans = await self.plan_time_window(topic, 0, 0, partitions)
        return {p: plan.disorder for p, plan in plans.items()}
