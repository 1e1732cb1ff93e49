"""Heartbeat (key 12): versions 0-4, flexible from 4 (HeartbeatRequest/Response.json).

Invariant: GroupInstanceId from v3; throttle time in the response from v1.
"""

from __future__ import annotations

from protocol.common import GENERATION_MEMBER
from protocol.schema import F, message

REQUEST = message("HeartbeatRequest", *GENERATION_MEMBER)

RESPONSE = message(
    "HeartbeatResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
)
