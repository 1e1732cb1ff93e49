"""The SASL gate of one connection on a SASL_PLAINTEXT / SASL_SSL listener (sans-I/O).

Invariants (Kafka's ``SaslServerAuthenticator``):
- Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are
  served; any other request closes the connection without an answer.
- A mechanism the listener does not offer -> UNSUPPORTED_SASL_MECHANISM (33) with the
  offered list, then close. Handshake v1: tokens travel in SaslAuthenticate (v0-2),
  failure = SASL_AUTHENTICATION_FAILED (58) with a generic message, then close; another
  request meanwhile gets ILLEGAL_SASL_STATE (34) in its API's error body, then close. Handshake
  v0: tokens travel as raw size-prefixed frames (PLAIN success = an empty frame),
  failure = a bare close. Failure answers and closes wait
  ``connection.failed.authentication.delay.ms``.
- KIP-368: with ``connections.max.reauth.ms`` > 0 the session lifetime is sent in
  SaslAuthenticate v1+; a SaslHandshake on an authenticated connection starts
  re-authentication (same mechanism and principal); once the session has expired any
  other request closes the connection.
- Tokens and passwords are never logged; the principal is ``User:<user>``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.security import plain
from protocol import api as papi
from protocol.errors import ErrorCode
from protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from protocol.scram import AuthenticationFailed, ScramCredential, ScramServer

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_HEADER = struct.Struct(">hhi")
GENERIC_FAILURE = "Authentication failed: Invalid username or password"


@dataclass
class Outcome:
    """What the connection must do with a frame the gate took."""

    data: bytes | None = None  # a whole response frame (size prefix included)
    close: str | None = None  # close after ``data``, for this reason
    delay: float = 0.0  # wait this long before sending ``data`` and closing
    # Answer this frame with ILLEGAL_SASL_STATE in its own API's error body (where the
    # API has one) before closing: a request between a v1 handshake and success.
    illegal_state: bytes | None = None


class SaslGate:
    """Authentication state of one connection."""

    def __init__(self, mechanisms: list[str], plain_users: Callable[[], dict[str, str]],
                 scram_lookup: Callable[[str, str], ScramCredential | None],
                 reauth_ms: int, failure_delay_ms: int) -> None:
        self.mechanisms = mechanisms
        self._plain_users = plain_users
        self._scram_lookup = scram_lookup
        self.reauth_ms = reauth_ms
        self.failure_delay = failure_delay_ms / 1000.0
        self.complete = False
        self.principal: str | None = None
        self.mechanism: str | None = None
        self.expires: float | None = None  # monotonic seconds, with KIP-368
        self._state = "handshake"  # handshake | authenticate | legacy | done
        self._scram: ScramServer | None = None
        self._reauth = False
        self.logins = 0  # successful authentications on this connection (re-auth: > 1)

    # ------------------------------------------------------------ entry point

    def on_frame(self, frame: bytes, now: float | None = None) -> Outcome | None:
        """Take a frame (``None`` = not ours: serve it as a normal request)."""
        now = time.monotonic() if now is None else now
        if self._state == "legacy":
            return self._legacy_token(frame)
        if len(frame) < 8:
            return Outcome(close="request too short for a header during authentication")
        api_key = _HEADER.unpack_from(frame)[0]
        if self.complete:
            if api_key == SASL_HANDSHAKE and self.reauth_ms > 0:
                self._reauth = True
                self._state = "handshake"
                return self._handshake(frame)
            if self.expires is not None and now >= self.expires:
                return Outcome(close="SASL session expired (connections.max.reauth.ms) "
                                     "without re-authentication")
            return None
        if api_key == API_VERSIONS:
            return None
        if api_key == SASL_HANDSHAKE and self._state == "handshake":
            return self._handshake(frame)
        if api_key == SASL_AUTHENTICATE and self._state == "authenticate":
            return self._authenticate(frame, now)
        reason = f"request (API key {api_key}) before SASL authentication completed"
        if self._state == "authenticate":
            return Outcome(close=reason, illegal_state=frame)
        return Outcome(close=reason)

    # ------------------------------------------------------------ steps

    def _decode(self, frame: bytes) -> papi.Request | Outcome:
        try:
            return papi.decode_request(frame)
        except (papi.MalformedRequestError, papi.UnsupportedVersionError) as exc:
            return Outcome(close=f"cannot decode SASL request: {exc}")

    def _handshake(self, frame: bytes) -> Outcome:
        req = self._decode(frame)
        if isinstance(req, Outcome):
            return req
        mech = str(req.body.mechanism)
        ok = mech in self.mechanisms and (not self._reauth or mech == self.mechanism)
        body = {"error_code": 0 if ok else int(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                "mechanisms": self.mechanisms}
        data = papi.encode_response(req.api_key, req.api_version, req.correlation_id, body)
        if not ok:
            return Outcome(data, close=f"SASL mechanism {mech[:64]!r} not enabled on this listener")
        self.mechanism = mech
        self._scram = ScramServer(mech, self._scram_lookup) if mech in SCRAM_MECHANISMS else None
        self._state = "legacy" if req.api_version == 0 else "authenticate"
        if self._reauth:
            self.complete = False
        return Outcome(data)

    def _step(self, token: bytes) -> bytes:
        """The server's next token; sets ``complete`` on success; raises on failure."""
        if self.mechanism == "PLAIN":
            user = plain.authenticate(token, self._plain_users())
            self._finish(user)
            return b""
        scram = self._scram
        assert scram is not None
        out = scram.step(token)
        if scram.complete:
            assert scram.user is not None
            self._finish(scram.user)
        return out

    def _finish(self, user: str) -> None:
        principal = "User:" + user
        if self._reauth and principal != self.principal:
            raise AuthenticationFailed("Re-authentication must keep the same principal")
        self.principal = principal
        self.complete = True
        self.logins += 1
        self._state = "done"
        self._reauth = False
        self.expires = (time.monotonic() + self.reauth_ms / 1000.0) if self.reauth_ms > 0 else None

    def _authenticate(self, frame: bytes, now: float) -> Outcome:
        req = self._decode(frame)
        if isinstance(req, Outcome):
            return req
        try:
            token = self._step(bytes(req.body.auth_bytes))
        except AuthenticationFailed as exc:
            body = {"error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED),
                    "error_message": str(exc), "auth_bytes": b"", "session_lifetime_ms": 0}
            data = papi.encode_response(req.api_key, req.api_version, req.correlation_id, body)
            return Outcome(data, close=f"SASL/{self.mechanism} authentication failed: {exc}",
                           delay=self.failure_delay)
        lifetime = self.reauth_ms if self.complete and self.reauth_ms > 0 else 0
        body = {"error_code": 0, "error_message": None, "auth_bytes": token,
                "session_lifetime_ms": lifetime}
        return Outcome(papi.encode_response(req.api_key, req.api_version, req.correlation_id, body))

    def _legacy_token(self, frame: bytes) -> Outcome:
        try:
            token = self._step(frame)
        except AuthenticationFailed as exc:
            return Outcome(close=f"SASL/{self.mechanism} authentication failed: {exc}",
                           delay=self.failure_delay)
        if self.complete:
            # Legacy framing has no lifetime to tell: no re-authentication either.
            self.expires = None
        return Outcome(struct.pack(">i", len(token)) + token)
