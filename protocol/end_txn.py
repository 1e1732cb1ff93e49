"""EndTxn (key 26): versions 0-3, flexible from 3.

Invariant: Committed true commits, false aborts; v5's ProducerId/ProducerEpoch answer
(transactions v2) is not served, so every client stays on the TV1 protocol.
"""

from __future__ import annotations

from protocol.schema import F, message

REQUEST = message(
    "EndTxnRequest",
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("committed", "bool"),
)

RESPONSE = message(
    "EndTxnResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
)
