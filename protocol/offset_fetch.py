"""OffsetFetch (key 9): versions 1-9, flexible from 6.

Invariant: up to v7 one group (``group_id``, ``topics`` null = all from v2);
v8 batches by groups (``groups`` [{group_id, topics}]) and answers per group;
v9 adds each group's MemberId (nullable) and MemberEpoch (KIP-848).
"""

from __future__ import annotations

from protocol.common import topic_partitions
from protocol.schema import F, arr, message

REQUEST = message(
    "OffsetFetchRequest",
    F("group_id", "string", "0-7"),
    F("topics", arr(
        F("name", "string"),
        F("partition_indexes", "[]int32"),
    ), "0-7", nullable="2-7"),
    F("groups", arr(
        F("group_id", "string"),
        F("member_id", "string", "9+", nullable="9+", default=None),
        F("member_epoch", "int32", "9+", default=-1),
        F("topics", arr(
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ), nullable="8+"),
    ), "8+"),
    F("require_stable", "bool", "7+"),
)

RESPONSE = message(
    "OffsetFetchResponse",
    F("throttle_time_ms", "int32", "3+"),
    topic_partitions(
        F("partition_index", "int32"),
        F("committed_offset", "int64"),
        F("committed_leader_epoch", "int32", "5+", default=-1),
        F("metadata", "string", nullable="0-7"),
        F("error_code", "int16"),
        versions="0-7",
    ),
    F("error_code", "int16", "2-7"),
    F("groups", arr(
        F("group_id", "string"),
        topic_partitions(
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", default=-1),
            F("metadata", "string", nullable="8+"),
            F("error_code", "int16"),
        ),
        F("error_code", "int16"),
    ), "8+"),
)
