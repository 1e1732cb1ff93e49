"""What the overview shows: brokers, and per topic its size and time extent.

Invariants: one Metadata request, four ListOffsets requests (log start, high
watermark, the first record's timestamp via ListOffsets at time 0, the largest
timestamp via MAX_TIMESTAMP) for all partitions of all shown topics, and one
DescribeConfigs per shown topic for retention, all pipelined: the work grows with
the number of topics shown (capped), never with the number of records.
"Records" is high watermark minus log start summed over partitions (offsets;
compaction and transaction markers make the true count smaller). Bytes are the
partitions' sizes on disk from one DescribeLogDirs request (``client.admin``), summed
per topic; a broker that refuses it (no such API, not authorised) leaves them unknown.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from client.admin import describe_log_dirs
from client.aio import EARLIEST, LATEST, MAX_TIMESTAMP, Client, TopicPartition
from protocol.errors import ErrorCode, KafkaError

__all__ = ["Broker", "TopicSummary", "Overview", "overview"]

#: At most this many topics are summarised on one page (the rest are counted).
MAX_TOPICS = 200
RETENTION_KEYS = ("retention.ms", "retention.bytes", "message.timestamp.type")


@dataclass
class Broker:
    node_id: int
    host: str
    port: int


@dataclass
class TopicSummary:
    name: str
    partitions: int
    records: int
    first_timestamp: int | None  # timestamp of the first record in offset order
    max_timestamp: int | None
    configs: dict[str, str | None] = field(default_factory=dict)
    size_bytes: int | None = None  # summed over partitions; None when the broker will not say


@dataclass
class Overview:
    brokers: list[Broker]
    topics: list[TopicSummary]
    hidden: int  # topics matching the filter beyond MAX_TOPICS
    total_topics: int


async def cluster_metadata(client: Client) -> dict[str, Any]:
    """The Metadata answer for every topic (brokers included)."""
    return await client.cluster_metadata(None)


async def _offsets(client: Client, tps: list[TopicPartition], ts: int) -> dict[TopicPartition, tuple[int, int]]:
    if not tps:
        return {}
    try:
        return await client.list_offsets(dict.fromkeys(tps, ts))
    except KafkaError as e:
        if e.code != ErrorCode.UNSUPPORTED_VERSION:
            raise
        return {}  # e.g. MAX_TIMESTAMP needs ListOffsets v7


async def _configs(client: Client, topic: str) -> dict[str, str | None]:
    try:
        return await client.describe_configs(topic, RETENTION_KEYS) or {}
    except KafkaError:
        return {}


async def _sizes(client: Client) -> dict[tuple[str, int], int] | None:
    try:
        return await describe_log_dirs(client)
    except KafkaError:
        return None


async def overview(client: Client, name_filter: str = "") -> Overview:
    md = await cluster_metadata(client)
    brokers = sorted((Broker(b["node_id"], b["host"], b["port"]) for b in md["brokers"]),
                     key=lambda b: b.node_id)
    topics = {
        t["name"]: sorted(p["partition_index"] for p in t["partitions"])
        for t in md["topics"]
        if t["error_code"] == 0
    }
    needle = name_filter.strip().lower()
    names = sorted(n for n in topics if needle in n.lower())
    shown = names[:MAX_TOPICS]
    tps = [TopicPartition(n, p) for n in shown for p in topics[n]]
    lo, hi, first, mx = await asyncio.gather(
        *(_offsets(client, tps, ts) for ts in (EARLIEST, LATEST, 0, MAX_TIMESTAMP))
    )
    sizes, cfgs = await asyncio.gather(
        _sizes(client), asyncio.gather(*(_configs(client, n) for n in shown)))
    out = []
    for name, cfg in zip(shown, cfgs, strict=True):
        mine = [TopicPartition(name, p) for p in topics[name]]
        records = sum(max(0, hi[tp][0] - lo[tp][0]) for tp in mine if tp in hi and tp in lo)
        firsts = [first[tp] for tp in mine if tp in first and first[tp][0] >= 0]
        # The first record of the topic in time order of log position: of each
        # partition's first record, the earliest timestamp.
        first_ts = min((ts for _, ts in firsts), default=None)
        maxes = [mx[tp][1] for tp in mine if tp in mx and mx[tp][0] >= 0]
        size = None if sizes is None else sum(sizes.get((name, p), 0) for p in topics[name])
        out.append(TopicSummary(name, len(topics[name]), records, first_ts,
                                max(maxes, default=None), cfg, size))
    return Overview(brokers, out, len(names) - len(shown), len(topics))
