"""OffsetCommit (key 8): versions 2-9, flexible from 8.

Invariant: RetentionTimeMs exists only in v2-4, CommittedLeaderEpoch from v6,
GroupInstanceId from v7; CommitTimestamp (v1 only) is declared for fidelity.
v9 (KIP-848) changes no field: GenerationIdOrMemberEpoch may carry a member
epoch, and an unknown group answers GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION.
"""

from __future__ import annotations

from protocol.common import PARTITION_ERROR, topic_partitions
from protocol.schema import F, message

REQUEST = message(
    "OffsetCommitRequest",
    F("group_id", "string"),
    F("generation_id_or_member_epoch", "int32", "1+", default=-1),
    F("member_id", "string", "1+"),
    F("group_instance_id", "string", "7+", nullable="7+", default=None),
    F("retention_time_ms", "int64", "2-4", default=-1),
    topic_partitions(
        F("partition_index", "int32"),
        F("committed_offset", "int64"),
        F("committed_leader_epoch", "int32", "6+", default=-1),
        F("commit_timestamp", "int64", "1", default=-1),
        F("committed_metadata", "string", nullable="0+"),
    ),
)

RESPONSE = message(
    "OffsetCommitResponse",
    F("throttle_time_ms", "int32", "3+"),
    topic_partitions(*PARTITION_ERROR),
)
