"""DescribeTopicPartitions (key 75, KIP-966): version 0, flexible.

Invariants: topics are answered in name order, at most ResponsePartitionLimit
partitions per response; a non-null ``next_cursor`` says where the next page starts.
"""

from __future__ import annotations

from protocol.schema import F, StructType, arr, message, obj

AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def _cursor() -> StructType:
    """Where a listing stopped: the request resumes at it, the response names the next one."""
    return obj(
        F("topic_name", "string"),
        F("partition_index", "int32"),
    )


REQUEST = message(
    "DescribeTopicPartitionsRequest",
    F("topics", arr(F("name", "string"))),
    F("response_partition_limit", "int32", default=2000),
    F("cursor", _cursor(), nullable="0+", default=None),
)

RESPONSE = message(
    "DescribeTopicPartitionsResponse",
    F("throttle_time_ms", "int32"),
    F("topics", arr(
        F("error_code", "int16"),
        F("name", "string", nullable="0+"),
        F("topic_id", "uuid"),
        F("is_internal", "bool"),
        F("partitions", arr(
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("eligible_leader_replicas", "[]int32", nullable="0+", default=None),
            F("last_known_elr", "[]int32", nullable="0+", default=None),
            F("offline_replicas", "[]int32"),
        )),
        F("topic_authorized_operations", "int32", default=AUTHORIZED_OPERATIONS_OMITTED),
    )),
    F("next_cursor", _cursor(), nullable="0+", default=None),
)
