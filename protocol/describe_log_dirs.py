"""DescribeLogDirs (key 35): versions 0-4, flexible from 2.

Invariants: a null ``topics`` asks for every partition; v3 adds the top-level
ErrorCode, v4 each directory's TotalBytes / UsableBytes (-1 = unknown).
"""

from __future__ import annotations

from protocol.common import partitions_of_topic, topic_partitions
from protocol.schema import F, arr, message

REQUEST = message(
    "DescribeLogDirsRequest",
    F("topics", partitions_of_topic(), nullable="0+", default=None),
)

RESPONSE = message(
    "DescribeLogDirsResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "3+"),
    F("results", arr(
        F("error_code", "int16"),
        F("log_dir", "string"),
        topic_partitions(
            F("partition_index", "int32"),
            F("partition_size", "int64"),
            F("offset_lag", "int64"),
            F("is_future_key", "bool"),
        ),
        F("total_bytes", "int64", "4+", default=-1),
        F("usable_bytes", "int64", "4+", default=-1),
    )),
)
