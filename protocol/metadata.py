"""Metadata (key 3): versions 0-12, flexible from 9.

Invariant: in v0 an empty topic list means "all topics"; from v1 null means all
and empty means none — the codec keeps null and empty distinct for that reason.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "MetadataRequest",
    F("topics", arr(
        F("topic_id", "uuid", "10+"),
        F("name", "string", nullable="10+"),
    ), nullable="1+"),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),
    F("include_topic_authorized_operations", "bool", "8+"),
)

RESPONSE = message(
    "MetadataResponse",
    F("throttle_time_ms", "int32", "3+"),
    F("brokers", arr(
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "1+", nullable="1+", default=None),
    )),
    F("cluster_id", "string", "2+", nullable="2+", default=None),
    F("controller_id", "int32", "1+", default=-1),
    F("topics", arr(
        F("error_code", "int16"),
        F("name", "string", nullable="12+"),
        F("topic_id", "uuid", "10+"),
        F("is_internal", "bool", "1+"),
        F("partitions", arr(
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("offline_replicas", "[]int32", "5+"),
        )),
        F("topic_authorized_operations", "int32", "8+", default=-2147483648),
    )),
    F("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
)
