"""SaslHandshake (key 17) outside authentication: ILLEGAL_SASL_STATE (34).

The handshake itself is served by the connection's SASL gate
(``broker.security.sasl``) before a connection is authenticated (and at
re-authentication); once this handler sees one — on a listener without SASL or on an
authenticated connection — Kafka's ``KafkaApis`` answers 34, and so do we.
"""

from __future__ import annotations

from typing import Any

from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


async def handle(request: Request[m.SaslHandshakeRequest], ctx: Any) -> m.SaslHandshakeResponse:
    return m.SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=[])
