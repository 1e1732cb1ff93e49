"""Chronolog's Python client: asyncio :class:`Client`, blocking :class:`SyncClient`.

Quick start (see docs/client.md)::

    from client import SyncClient, ProducerRecord
    with SyncClient("127.0.0.1:9092") as c:
        c.create_topic("events", partitions=3)
        c.produce("events", [ProducerRecord(key=b"k", value=b"hello", timestamp=1763721120000)])
        print(c.offsets_for_times("events", 1763721120000))
"""

from client.aio import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    Client,
    FetchResult,
    ProducerRecord,
    Record,
    TimeWindowPlan,
    TopicPartition,
)
from client.producer import Producer, RecordMetadata
from client.sync import SyncClient, SyncProducer
from client.timeparse import TimeParseError, format_time, parse_time
from protocol.errors import ErrorCode, KafkaError

__all__ = [
    "Client",
    "SyncClient",
    "Producer",
    "RecordMetadata",
    "SyncProducer",
    "ProducerRecord",
    "Record",
    "TopicPartition",
    "TimeWindowPlan",
    "FetchResult",
    "KafkaError",
    "ErrorCode",
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "parse_time",
    "format_time",
    "TimeParseError",
]
