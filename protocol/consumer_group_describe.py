"""ConsumerGroupDescribe (key 69): versions 0-1, flexible in every version (KIP-848).

Invariants: one entry per requested group id, in request order; a group that is
not a KIP-848 consumer group is GROUP_ID_NOT_FOUND (69) with an empty body, so
clients fall back to DescribeGroups. v1 adds each member's MemberType (-1
unknown, 0 classic, 1 consumer; KIP-1099) and nothing to the request.
"""

from __future__ import annotations

from protocol.schema import F, StructType, arr, message, obj


def _assignment() -> StructType:
    return obj(
        F("topic_partitions", arr(
            F("topic_id", "uuid"),
            F("topic_name", "string"),
            F("partitions", "[]int32"),
        )),
    )


REQUEST = message(
    "ConsumerGroupDescribeRequest",
    F("group_ids", "[]string"),
    F("include_authorized_operations", "bool"),
)

RESPONSE = message(
    "ConsumerGroupDescribeResponse",
    F("throttle_time_ms", "int32"),
    F("groups", arr(
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("group_epoch", "int32"),
        F("assignment_epoch", "int32"),
        F("assignor_name", "string"),
        F("members", arr(
            F("member_id", "string"),
            F("instance_id", "string", nullable="0+", default=None),
            F("rack_id", "string", nullable="0+", default=None),
            F("member_epoch", "int32"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", "[]string"),
            F("subscribed_topic_regex", "string", nullable="0+", default=None),
            F("assignment", _assignment()),
            F("target_assignment", _assignment()),
            F("member_type", "int8", "1+", default=-1),
        )),
        F("authorized_operations", "int32", default=-2147483648),
    )),
)
