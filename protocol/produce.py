"""Produce (key 0): served 3-11 (advertised from 0, see KAFKA-18659), flexible from 9.

Invariant: ``records`` is an opaque record-batch blob; decoding hands out a
zero-copy view of the request frame, and encoding writes it without copying.
ThrottleTimeMs is the last top-level response field.
"""

from __future__ import annotations

from protocol.common import leader_id_and_epoch, node_endpoints
from protocol.schema import F, arr, message

REQUEST = message(
    "ProduceRequest",
    F("transactional_id", "string", "3+", nullable="3+", default=None),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    F("topic_data", arr(
        F("name", "string"),
        F("partition_data", arr(
            F("index", "int32"),
            F("records", "records", nullable="0+"),
        )),
    )),
)

RESPONSE = message(
    "ProduceResponse",
    F("responses", arr(
        F("name", "string"),
        F("partition_responses", arr(
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("record_errors", arr(
                F("batch_index", "int32"),
                F("batch_index_error_message", "string", nullable="8+", default=None),
            ), "8+"),
            F("error_message", "string", "8+", nullable="8+", default=None),
            F("current_leader", leader_id_and_epoch(), "10+", tag=0),
        )),
    )),
    F("throttle_time_ms", "int32", "1+"),
    node_endpoints("10+"),
)
