"""FindCoordinator (key 10): versions 0-4, flexible from 3.

Invariant: up to v3 one key and one coordinator at the top level; v4 batches
keys (``coordinator_keys``) and answers ``coordinators`` [..].
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "FindCoordinatorRequest",
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+"),
    F("coordinator_keys", "[]string", "4+"),
)

RESPONSE = message(
    "FindCoordinatorResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0-3"),
    F("error_message", "string", "1-3", nullable="1-3"),
    F("node_id", "int32", "0-3"),
    F("host", "string", "0-3"),
    F("port", "int32", "0-3"),
    F("coordinators", arr(
        F("key", "string"),
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="4+"),
    ), "4+"),
)
