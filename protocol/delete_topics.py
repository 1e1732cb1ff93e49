"""DeleteTopics (key 20): versions 1-6, flexible from 4.

Invariant: up to v5 topics are a list of names (``topic_names``); v6 sends
``topics`` [{name, topic_id}] where the name may be null when only an id is
given. Chronolog resolves names; a zero topic id means "by name".
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "DeleteTopicsRequest",
    F("topics", arr(
        F("name", "string", nullable="6+", default=None),
        F("topic_id", "uuid"),
    ), "6+"),
    F("topic_names", "[]string", "0-5"),
    F("timeout_ms", "int32"),
)

RESPONSE = message(
    "DeleteTopicsResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("responses", arr(
        F("name", "string", nullable="6+"),
        F("topic_id", "uuid", "6+"),
        F("error_code", "int16"),
        F("error_message", "string", "5+", nullable="5+", default=None),
    )),
)
