"""AlterConfigs (key 33): versions 0-2, flexible from 2.

Invariant: the legacy form replaces a resource's whole set of dynamic configs:
keys not listed are deleted (Kafka's semantics, unlike IncrementalAlterConfigs).
"""

from __future__ import annotations

from protocol.common import ERROR, RESOURCE
from protocol.schema import F, arr, message

REQUEST = message(
    "AlterConfigsRequest",
    F("resources", arr(
        *RESOURCE,
        F("configs", arr(
            F("name", "string"),
            F("value", "string", nullable="0+"),
        )),
    )),
    F("validate_only", "bool"),
)

RESPONSE = message(
    "AlterConfigsResponse",
    F("throttle_time_ms", "int32"),
    F("responses", arr(*ERROR, *RESOURCE)),
)
