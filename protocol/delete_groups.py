"""DeleteGroups (key 42): versions 0-2, flexible from 2 (DeleteGroupsRequest/Response.json).

Invariant: the response carries ThrottleTimeMs in every version (KIP-229) and one
result per requested group.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "DeleteGroupsRequest",
    F("groups_names", "[]string"),
)

RESPONSE = message(
    "DeleteGroupsResponse",
    F("throttle_time_ms", "int32"),
    F("results", arr(
        F("group_id", "string"),
        F("error_code", "int16"),
    )),
)
