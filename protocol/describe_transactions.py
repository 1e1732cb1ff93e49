"""DescribeTransactions (key 65, KIP-664): version 0, flexible.

Invariant: one entry per requested transactional id; the state is Kafka's state
*name* (Empty, Ongoing, PrepareCommit, ...).
"""

from __future__ import annotations

from protocol.common import partitions_of_topic
from protocol.schema import F, arr, message

REQUEST = message(
    "DescribeTransactionsRequest",
    F("transactional_ids", "[]string"),
)

RESPONSE = message(
    "DescribeTransactionsResponse",
    F("throttle_time_ms", "int32"),
    F("transaction_states", arr(
        F("error_code", "int16"),
        F("transactional_id", "string"),
        F("transaction_state", "string"),
        F("transaction_timeout_ms", "int32"),
        F("transaction_start_time_ms", "int64"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("topics", partitions_of_topic()),
    )),
)
