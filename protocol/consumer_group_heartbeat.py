"""ConsumerGroupHeartbeat (key 68): versions 0-1, flexible in every version (KIP-848).

Invariants:
- Request fields that are null mean "unchanged since the last heartbeat"
  (InstanceId, RackId, SubscribedTopicNames, SubscribedTopicRegex,
  ServerAssignor, TopicPartitions); RebalanceTimeoutMs -1 means the same.
- SubscribedTopicRegex exists from v1 only; v1 members bring their own MemberId
  (KIP-1082), v0 members may join with "" and get one from the coordinator.
- The response's Assignment is a nullable struct: null when the assignment did
  not change; otherwise the partitions the member may own now, by topic id.
"""

from __future__ import annotations

from protocol.schema import F, StructType, arr, message, obj


def _topic_partitions() -> StructType:
    """Partitions by topic id: those a member owns (request) and those assigned to it (response)."""
    return arr(
        F("topic_id", "uuid"),
        F("partitions", "[]int32"),
    )


REQUEST = message(
    "ConsumerGroupHeartbeatRequest",
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),
    F("instance_id", "string", nullable="0+", default=None),
    F("rack_id", "string", nullable="0+", default=None),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("subscribed_topic_names", "[]string", nullable="0+", default=None),
    F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
    F("server_assignor", "string", nullable="0+", default=None),
    F("topic_partitions", _topic_partitions(), nullable="0+", default=None),
)

RESPONSE = message(
    "ConsumerGroupHeartbeatResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+", default=None),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("assignment", obj(F("topic_partitions", _topic_partitions())), nullable="0+", default=None),
)
