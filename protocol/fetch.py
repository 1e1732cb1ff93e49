"""Fetch (key 1): versions 4-12, flexible from 12 (topic names, never topic ids).

Invariant: ``records`` is an opaque blob of whole batches (a trailing partial
batch is allowed by Kafka); it is written into the response without parsing.
"""

from __future__ import annotations

from protocol.common import PARTITION_ERROR, leader_id_and_epoch, node_endpoints
from protocol.schema import F, Field, arr, message, obj


def _topics(name: str, *partition: Field) -> Field:
    """Fetch's topics: by name up to v12, by id from v13 (KIP-516), each with its partitions."""
    return F(name, arr(
        F("topic", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partitions", arr(*partition)),
    ))


REQUEST = message(
    "FetchRequest",
    F("cluster_id", "string", "12+", nullable="12+", tag=0, default=None),
    F("replica_id", "int32", "0-14", default=-1),
    F("replica_state", obj(
        F("replica_id", "int32", default=-1),
        F("replica_epoch", "int64", default=-1),
    ), "15+", tag=1),
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    F("isolation_level", "int8", "4+"),
    F("session_id", "int32", "7+"),
    F("session_epoch", "int32", "7+", default=-1),
    _topics(
        "topics",
        F("partition", "int32"),
        F("current_leader_epoch", "int32", "9+", default=-1),
        F("fetch_offset", "int64"),
        F("last_fetched_epoch", "int32", "12+", default=-1),
        F("log_start_offset", "int64", "5+", default=-1),
        F("partition_max_bytes", "int32"),
        F("replica_directory_id", "uuid", "17+", tag=0),
    ),
    F("forgotten_topics_data", arr(
        F("topic", "string", "7-12"),
        F("topic_id", "uuid", "13+"),
        F("partitions", "[]int32"),
    ), "7+"),
    F("rack_id", "string", "11+"),
)

RESPONSE = message(
    "FetchResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "7+"),
    F("session_id", "int32", "7+"),
    _topics(
        "responses",
        *PARTITION_ERROR,
        F("high_watermark", "int64"),
        F("last_stable_offset", "int64", "4+", default=-1),
        F("log_start_offset", "int64", "5+", default=-1),
        F("diverging_epoch", obj(
            F("epoch", "int32", default=-1),
            F("end_offset", "int64", default=-1),
        ), "12+", tag=0),
        F("current_leader", leader_id_and_epoch(), "12+", tag=1),
        F("snapshot_id", obj(
            F("end_offset", "int64", default=-1),
            F("epoch", "int32", default=-1),
        ), "12+", tag=2),
        F("aborted_transactions", arr(
            F("producer_id", "int64"),
            F("first_offset", "int64"),
        ), "4+", nullable="4+"),
        F("preferred_read_replica", "int32", "11+", default=-1),
        F("records", "records", nullable="0+"),
    ),
    node_endpoints("16+"),
)
