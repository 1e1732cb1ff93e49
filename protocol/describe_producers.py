"""DescribeProducers (key 61, KIP-664): version 0, flexible.

Invariant: one entry per active idempotent producer of a partition; ProducerEpoch
is an int32 here although it is an int16 everywhere else.
"""

from __future__ import annotations

from protocol.common import PARTITION_ERROR, topic_partitions
from protocol.schema import F, arr, message

REQUEST = message(
    "DescribeProducersRequest",
    F("topics", arr(
        F("name", "string"),
        F("partition_indexes", "[]int32"),
    )),
)

RESPONSE = message(
    "DescribeProducersResponse",
    F("throttle_time_ms", "int32"),
    topic_partitions(
        *PARTITION_ERROR,
        F("error_message", "string", nullable="0+", default=None),
        F("active_producers", arr(
            F("producer_id", "int64"),
            F("producer_epoch", "int32"),
            F("last_sequence", "int32", default=-1),
            F("last_timestamp", "int64", default=-1),
            F("coordinator_epoch", "int32"),
            F("current_txn_start_offset", "int64", default=-1),
        )),
    ),
)
