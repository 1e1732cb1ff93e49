"""InitProducerId (key 22): versions 0-4, flexible from 2.

Invariant: a null TransactionalId asks for an idempotent (non-transactional)
producer id; v3+ lets a producer re-init its existing id and epoch.
"""

from __future__ import annotations

from protocol.schema import F, message

REQUEST = message(
    "InitProducerIdRequest",
    F("transactional_id", "string", nullable="0+"),
    F("transaction_timeout_ms", "int32"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
)

RESPONSE = message(
    "InitProducerIdResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
)
