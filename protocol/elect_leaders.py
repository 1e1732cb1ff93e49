"""ElectLeaders (key 43): versions 0-2, flexible from 2.

Invariants: null ``topic_partitions`` means every partition; v1 adds ElectionType
(0 preferred, 1 unclean) and the top-level ErrorCode of the answer.
"""

from __future__ import annotations

from protocol.common import ERROR, partitions_of_topic
from protocol.schema import F, arr, message

REQUEST = message(
    "ElectLeadersRequest",
    F("election_type", "int8", "1+"),
    F("topic_partitions", partitions_of_topic(), nullable="0+", default=None),
    F("timeout_ms", "int32", default=60000),
)

RESPONSE = message(
    "ElectLeadersResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "1+"),
    F("replica_election_results", arr(
        F("topic", "string"),
        F("partition_result", arr(
            F("partition_id", "int32"),
            *ERROR,
        )),
    )),
)
