"""SaslAuthenticate (key 36) outside authentication: ILLEGAL_SASL_STATE (34).

Tokens are served by the connection's SASL gate (``broker.security.sasl``); a
SaslAuthenticate that reaches this handler comes after success or on a listener
without SASL, which Kafka's ``KafkaApis`` answers with 34.
"""

from __future__ import annotations

from typing import Any

from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


async def handle(request: Request[m.SaslAuthenticateRequest], ctx: Any) -> m.SaslAuthenticateResponse:
    return m.SaslAuthenticateResponse(
        error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
        error_message="SaslAuthenticate is only valid during authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
