"""ListOffsets (key 2): versions 0-10, every field of every version; flexible from 6.

Invariants: v0 asks for up to MaxNumOffsets offsets and answers OldStyleOffsets;
v1+ answer one (Timestamp, Offset). IsolationLevel from v2, CurrentLeaderEpoch
and LeaderEpoch from v4, TimeoutMs from v10. Special timestamps (-1..-5) are
plain int64 values here; which version may use which is the broker's rule.
"""

from __future__ import annotations

from protocol.common import PARTITION_ERROR, topic_partitions
from protocol.schema import F, message

REQUEST = message(
    "ListOffsetsRequest",
    F("replica_id", "int32"),
    F("isolation_level", "int8", "2+"),
    topic_partitions(
        F("partition_index", "int32"),
        F("current_leader_epoch", "int32", "4+", default=-1),
        F("timestamp", "int64"),
        F("max_num_offsets", "int32", "0", default=1),
    ),
    F("timeout_ms", "int32", "10+"),
)

RESPONSE = message(
    "ListOffsetsResponse",
    F("throttle_time_ms", "int32", "2+"),
    topic_partitions(
        *PARTITION_ERROR,
        F("old_style_offsets", "[]int64", "0"),
        F("timestamp", "int64", "1+", default=-1),
        F("offset", "int64", "1+", default=-1),
        F("leader_epoch", "int32", "4+", default=-1),
    ),
)
