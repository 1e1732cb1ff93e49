"""SaslHandshake (key 17): versions 0-1, never flexible.

Invariant: v0 means the tokens that follow travel as raw size-prefixed frames; v1 means
they travel inside SaslAuthenticate (KIP-152). Never advertise more than v1 (KAFKA-9577).
"""

from __future__ import annotations

from protocol.schema import F, message

REQUEST = message(
    "SaslHandshakeRequest",
    F("mechanism", "string"),
)

RESPONSE = message(
    "SaslHandshakeResponse",
    F("error_code", "int16"),
    F("mechanisms", "[]string"),
)
