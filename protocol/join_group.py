"""JoinGroup (key 11): versions 0-9, flexible from 6 (JoinGroupRequest/Response.json).

Invariant: RebalanceTimeoutMs from v1 (absent: the session timeout is used,
KAFKA-8653), GroupInstanceId from v5, Reason from v8; the response carries
ProtocolType and a nullable ProtocolName from v7 and SkipAssignment from v9.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "JoinGroupRequest",
    F("group_id", "string"),
    F("session_timeout_ms", "int32"),
    F("rebalance_timeout_ms", "int32", "1+", default=-1),
    F("member_id", "string"),
    F("group_instance_id", "string", "5+", nullable="5+", default=None),
    F("protocol_type", "string"),
    F("protocols", arr(
        F("name", "string"),
        F("metadata", "bytes"),
    )),
    F("reason", "string", "8+", nullable="8+", default=None),
)

RESPONSE = message(
    "JoinGroupResponse",
    F("throttle_time_ms", "int32", "2+"),
    F("error_code", "int16"),
    F("generation_id", "int32", default=-1),
    F("protocol_type", "string", "7+", nullable="7+", default=None),
    F("protocol_name", "string", nullable="7+"),
    F("leader", "string"),
    F("skip_assignment", "bool", "9+"),
    F("member_id", "string"),
    F("members", arr(
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("metadata", "bytes"),
    )),
)
