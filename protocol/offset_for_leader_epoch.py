"""OffsetForLeaderEpoch (key 23): versions 0-4, flexible from 4.

Invariants: v2 adds CurrentLeaderEpoch (-1 = do not check) and ThrottleTimeMs,
v3 ReplicaId (-1 = a consumer, -2 = the default); v1+ answers carry the epoch.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "OffsetForLeaderEpochRequest",
    F("replica_id", "int32", "3+", default=-2),
    F("topics", arr(
        F("topic", "string"),
        F("partitions", arr(
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "2+", default=-1),
            F("leader_epoch", "int32"),
        )),
    )),
)

RESPONSE = message(
    "OffsetForLeaderEpochResponse",
    F("throttle_time_ms", "int32", "2+"),
    F("topics", arr(
        F("topic", "string"),
        F("partitions", arr(
            F("error_code", "int16"),
            F("partition", "int32"),
            F("leader_epoch", "int32", "1+", default=-1),
            F("end_offset", "int64", default=-1),
        )),
    )),
)
