"""LeaveGroup (key 13): versions 0-5, flexible from 4 (LeaveGroupRequest/Response.json).

Invariant: v0-2 name one MemberId and answer with the top-level ErrorCode only;
v3+ batch ``members`` [{MemberId, GroupInstanceId, Reason (v5+)}] and answer
per member.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "LeaveGroupRequest",
    F("group_id", "string"),
    F("member_id", "string", "0-2"),
    F("members", arr(
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("reason", "string", "5+", nullable="5+", default=None),
    ), "3+"),
)

RESPONSE = message(
    "LeaveGroupResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("members", arr(
        F("member_id", "string"),
        F("group_instance_id", "string", nullable="3+"),
        F("error_code", "int16"),
    ), "3+"),
)
