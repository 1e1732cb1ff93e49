"""CreateTopics (key 19): versions 2-7, flexible from 5.

Invariant: NumPartitions / ReplicationFactor of -1 (v4+) mean "broker default";
config values are nullable strings under Kafka's topic config names.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "CreateTopicsRequest",
    F("topics", arr(
        F("name", "string"),
        F("num_partitions", "int32"),
        F("replication_factor", "int16"),
        F("assignments", arr(
            F("partition_index", "int32"),
            F("broker_ids", "[]int32"),
        )),
        F("configs", arr(
            F("name", "string"),
            F("value", "string", nullable="0+"),
        )),
    )),
    F("timeout_ms", "int32", default=60000),
    F("validate_only", "bool", "1+"),
)

RESPONSE = message(
    "CreateTopicsResponse",
    F("throttle_time_ms", "int32", "2+"),
    F("topics", arr(
        F("name", "string"),
        F("topic_id", "uuid", "7+"),
        F("error_code", "int16"),
        F("error_message", "string", "1+", nullable="0+"),
        F("topic_config_error_code", "int16", "5+", tag=0),
        F("num_partitions", "int32", "5+", default=-1),
        F("replication_factor", "int16", "5+", default=-1),
        F("configs", arr(
            F("name", "string"),
            F("value", "string", nullable="5+"),
            F("read_only", "bool"),
            F("config_source", "int8", default=-1),
            F("is_sensitive", "bool"),
        ), "5+", nullable="5+"),
    )),
)
