"""TxnOffsetCommit (key 28): versions 0-3, flexible from 3.

Invariant: GenerationId/MemberId/GroupInstanceId exist from v3 (KIP-447),
CommittedLeaderEpoch from v2.
"""

from __future__ import annotations

from protocol.common import PARTITION_ERROR, topic_partitions
from protocol.schema import F, message

REQUEST = message(
    "TxnOffsetCommitRequest",
    F("transactional_id", "string"),
    F("group_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("generation_id", "int32", "3+", default=-1),
    F("member_id", "string", "3+", default=""),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    topic_partitions(
        F("partition_index", "int32"),
        F("committed_offset", "int64"),
        F("committed_leader_epoch", "int32", "2+", default=-1),
        F("committed_metadata", "string", nullable="0+"),
    ),
)

RESPONSE = message(
    "TxnOffsetCommitResponse",
    F("throttle_time_ms", "int32"),
    topic_partitions(*PARTITION_ERROR),
)
