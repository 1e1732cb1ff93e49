"""WriteTxnMarkers (key 27): version 1 only, flexible (Kafka 4 removed v0, KIP-896).

Invariant: one marker per (producer, result) with the partitions it goes to; the answer
mirrors the request, one error code per partition. Sent by a transaction coordinator
and by ``kafka-transactions abort`` (Admin.abortTransaction) to the partition leader.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "WriteTxnMarkersRequest",
    F("markers", arr(
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("transaction_result", "bool"),
        F("topics", arr(
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        )),
        F("coordinator_epoch", "int32"),
    )),
)

RESPONSE = message(
    "WriteTxnMarkersResponse",
    F("markers", arr(
        F("producer_id", "int64"),
        F("topics", arr(
            F("name", "string"),
            F("partitions", arr(
                F("partition_index", "int32"),
                F("error_code", "int16"),
            )),
        )),
    )),
)
