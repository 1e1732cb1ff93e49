"""ListGroups (key 16): versions 0-5, flexible from 3 (ListGroupsRequest/Response.json).

Invariant: StatesFilter and GroupState from v4 (KIP-518), TypesFilter and
GroupType from v5 (KIP-848).
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "ListGroupsRequest",
    F("states_filter", "[]string", "4+"),
    F("types_filter", "[]string", "5+"),
)

RESPONSE = message(
    "ListGroupsResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("groups", arr(
        F("group_id", "string"),
        F("protocol_type", "string"),
        F("group_state", "string", "4+"),
        F("group_type", "string", "5+"),
    )),
)
