"""SaslAuthenticate (key 36): versions 0-2, flexible from 2.

Invariant: v1 adds SessionLifetimeMs (KIP-368); AuthBytes is never null.
"""

from __future__ import annotations

from protocol.schema import F, message

REQUEST = message(
    "SaslAuthenticateRequest",
    F("auth_bytes", "bytes"),
)

RESPONSE = message(
    "SaslAuthenticateResponse",
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+"),
)
