"""DeleteRecords (key 21, KIP-107): versions 0-2, flexible from 2.

Invariant: ``offset`` -1 means "up to the high watermark"; the answer's
``low_watermark`` is the partition's log start offset afterwards (-1 on error).
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "DeleteRecordsRequest",
    F("topics", arr(
        F("name", "string"),
        F("partitions", arr(
            F("partition_index", "int32"),
            F("offset", "int64"),
        )),
    )),
    F("timeout_ms", "int32"),
)

RESPONSE = message(
    "DeleteRecordsResponse",
    F("throttle_time_ms", "int32"),
    F("topics", arr(
        F("name", "string"),
        F("partitions", arr(
            F("partition_index", "int32"),
            F("low_watermark", "int64"),
            F("error_code", "int16"),
        )),
    )),
)
