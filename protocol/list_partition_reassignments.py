"""ListPartitionReassignments (key 46, KIP-455): version 0, flexible.

Invariant: null ``topics`` lists every ongoing reassignment (a single node never has any).
"""

from __future__ import annotations

from protocol.common import ERROR, topic_partitions
from protocol.schema import F, arr, message

REQUEST = message(
    "ListPartitionReassignmentsRequest",
    F("timeout_ms", "int32", default=60000),
    F("topics", arr(
        F("name", "string"),
        F("partition_indexes", "[]int32"),
    ), nullable="0+", default=None),
)

RESPONSE = message(
    "ListPartitionReassignmentsResponse",
    F("throttle_time_ms", "int32"),
    *ERROR,
    topic_partitions(
        F("partition_index", "int32"),
        F("replicas", "[]int32"),
        F("adding_replicas", "[]int32"),
        F("removing_replicas", "[]int32"),
    ),
)
