"""SyncGroup (key 14): versions 0-5, flexible from 4 (SyncGroupRequest/Response.json).

Invariant: GroupInstanceId from v3; ProtocolType/ProtocolName in the request and
the response from v5 (KIP-559).
"""

from __future__ import annotations

from protocol.common import GENERATION_MEMBER
from protocol.schema import F, arr, message

REQUEST = message(
    "SyncGroupRequest",
    *GENERATION_MEMBER,
    F("protocol_type", "string", "5+", nullable="5+", default=None),
    F("protocol_name", "string", "5+", nullable="5+", default=None),
    F("assignments", arr(
        F("member_id", "string"),
        F("assignment", "bytes"),
    )),
)

RESPONSE = message(
    "SyncGroupResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("protocol_type", "string", "5+", nullable="5+", default=None),
    F("protocol_name", "string", "5+", nullable="5+", default=None),
    F("assignment", "bytes"),
)
