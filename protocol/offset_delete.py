"""OffsetDelete (key 47): version 0, never flexible (OffsetDeleteRequest/Response.json).

Invariant: the response puts ErrorCode BEFORE ThrottleTimeMs (KIP-496), unlike
every other API, then per-partition errors.
"""

from __future__ import annotations

from protocol.common import PARTITION_ERROR, topic_partitions
from protocol.schema import F, message

REQUEST = message(
    "OffsetDeleteRequest",
    F("group_id", "string"),
    topic_partitions(F("partition_index", "int32")),
)

RESPONSE = message(
    "OffsetDeleteResponse",
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    topic_partitions(*PARTITION_ERROR),
)
