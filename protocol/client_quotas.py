"""DescribeClientQuotas (48) and AlterClientQuotas (49): versions 0-1, flexible from 1
(KIP-546; Describe/AlterClientQuotas{Request,Response}.json).

Invariant: an entity is a list of (type, name) pairs; a null name is the default
entity of that type. Quota values are float64 on the wire.
"""

from __future__ import annotations

from protocol.common import ERROR
from protocol.schema import F, arr, message

# DescribeClientQuotasRequest.MatchType.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_ANY = 2

_ENTITY = arr(
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+"),
)

DESCRIBE_REQUEST = message(
    "DescribeClientQuotasRequest",
    F("components", arr(
        F("entity_type", "string"),
        F("match_type", "int8"),
        F("match", "string", nullable="0+"),
    )),
    F("strict", "bool"),
)

DESCRIBE_RESPONSE = message(
    "DescribeClientQuotasResponse",
    F("throttle_time_ms", "int32"),
    *ERROR,
    F("entries", arr(
        F("entity", _ENTITY),
        F("quota_values", arr(  # Kafka: Values (a Container method name)
            F("key", "string"),
            F("value", "float64"),
        )),
    ), nullable="0+"),
)

ALTER_REQUEST = message(
    "AlterClientQuotasRequest",
    F("entries", arr(
        F("entity", _ENTITY),
        F("ops", arr(
            F("key", "string"),
            F("value", "float64"),
            F("remove", "bool"),
        )),
    )),
    F("validate_only", "bool"),
)

ALTER_RESPONSE = message(
    "AlterClientQuotasResponse",
    F("throttle_time_ms", "int32"),
    F("entries", arr(*ERROR, F("entity", _ENTITY))),
)
