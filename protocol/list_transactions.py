"""ListTransactions (key 66, KIP-664): versions 0-1, flexible.

Invariant: DurationFilter (v1, KIP-994) keeps transactions running longer than it;
v2's TransactionalIdPattern is not served.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "ListTransactionsRequest",
    F("state_filters", "[]string"),
    F("producer_id_filters", "[]int64"),
    F("duration_filter", "int64", "1+", default=-1),
)

RESPONSE = message(
    "ListTransactionsResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("unknown_state_filters", "[]string"),
    F("transaction_states", arr(
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("transaction_state", "string"),
    )),
)
