"""AlterPartitionReassignments (key 45, KIP-455): versions 0-1, flexible in all.

Invariants: ``replicas`` null cancels a pending reassignment; v1 (Kafka 4.1) adds
AllowReplicationFactorChange to the request and echoes it in the answer.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "AlterPartitionReassignmentsRequest",
    F("timeout_ms", "int32", default=60000),
    F("allow_replication_factor_change", "bool", "1+", default=True),
    F("topics", arr(
        F("name", "string"),
        F("partitions", arr(
            F("partition_index", "int32"),
            F("replicas", "[]int32", nullable="0+", default=None),
        )),
    )),
)

RESPONSE = message(
    "AlterPartitionReassignmentsResponse",
    F("throttle_time_ms", "int32"),
    F("allow_replication_factor_change", "bool", "1+", default=True),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("responses", arr(
        F("name", "string"),
        F("partitions", arr(
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        )),
    )),
)
