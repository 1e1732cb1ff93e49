"""AddOffsetsToTxn (key 25): versions 0-3, flexible from 3.

Invariant: one transaction and one group per request; one error code back.
"""

from __future__ import annotations

from protocol.schema import F, message

REQUEST = message(
    "AddOffsetsToTxnRequest",
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("group_id", "string"),
)

RESPONSE = message(
    "AddOffsetsToTxnResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
)
