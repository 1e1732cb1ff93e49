"""CreatePartitions (key 37): versions 0-3, flexible from 2.

Invariant: ``count`` is the new total; ``assignments`` (nullable) lists the replicas
of each added partition, one entry per new partition.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "CreatePartitionsRequest",
    F("topics", arr(
        F("name", "string"),
        F("count", "int32"),
        F("assignments", arr(
            F("broker_ids", "[]int32"),
        ), nullable="0+", default=None),
    )),
    F("timeout_ms", "int32"),
    F("validate_only", "bool"),
)

RESPONSE = message(
    "CreatePartitionsResponse",
    F("throttle_time_ms", "int32"),
    F("results", arr(
        F("name", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    )),
)
