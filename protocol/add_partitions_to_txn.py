"""AddPartitionsToTxn (key 24): the client versions 0-3, flexible from 3.

Invariant: v4+ (batched, VerifyOnly) is broker-to-broker (KIP-890) and not served;
v0-3 carry one transaction and answer one error per partition (Kafka's JSON names
these fields V3AndBelow*).
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "AddPartitionsToTxnRequest",
    F("v3_and_below_transactional_id", "string"),
    F("v3_and_below_producer_id", "int64"),
    F("v3_and_below_producer_epoch", "int16"),
    F("v3_and_below_topics", arr(
        F("name", "string"),
        F("partitions", "[]int32"),
    )),
)

RESPONSE = message(
    "AddPartitionsToTxnResponse",
    F("throttle_time_ms", "int32"),
    F("results_by_topic_v3_and_below", arr(
        F("name", "string"),
        F("results_by_partition", arr(
            F("partition_index", "int32"),
            F("partition_error_code", "int16"),
        )),
    )),
)
