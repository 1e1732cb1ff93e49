"""DescribeGroups (key 15): versions 0-6, flexible from 5 (DescribeGroupsRequest/Response.json).

Invariant: authorized operations from v3 (default -2^31), member GroupInstanceId
from v4, a per-group ErrorMessage from v6 (KIP-1043).
"""

from __future__ import annotations

from protocol.schema import F, arr, message

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

REQUEST = message(
    "DescribeGroupsRequest",
    F("groups", "[]string"),
    F("include_authorized_operations", "bool", "3+"),
)

RESPONSE = message(
    "DescribeGroupsResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("groups", arr(
        F("error_code", "int16"),
        F("error_message", "string", "6+", nullable="6+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("protocol_type", "string"),
        F("protocol_data", "string"),
        F("members", arr(
            F("member_id", "string"),
            F("group_instance_id", "string", "4+", nullable="4+", default=None),
            F("client_id", "string"),
            F("client_host", "string"),
            F("member_metadata", "bytes"),
            F("member_assignment", "bytes"),
        )),
        F("authorized_operations", "int32", "3+", default=AUTHORIZED_OPERATIONS_OMITTED),
    )),
)
