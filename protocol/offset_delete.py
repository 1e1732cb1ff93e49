"""OffsetDelete (key 47): version 0, never flexible (OffsetDeleteRequest/Response.json).

Invariant: the response puts ErrorCode BEFORE ThrottleTimeMs (KIP-496), unlike
every other API, then per-partition errors.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "OffsetDeleteRequest",
    F("group_id", "string"),
    F("topics", arr(
        F("name", "string"),
        F("partitions", arr(
            F("partition_index", "int32"),
        )),
    )),
)

RESPONSE = message(
    "OffsetDeleteResponse",
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    F("topics", arr(
        F("name", "string"),
        F("partitions", arr(
            F("partition_index", "int32"),
            F("error_code", "int16"),
        )),
    )),
)
