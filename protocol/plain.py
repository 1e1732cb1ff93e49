"""SASL/PLAIN's one message (RFC 4616): ``authzid NUL user NUL password``.

Both ends use it: the client builds the token, the broker parses it (and checks the
password against its JAAS users in ``broker/security/plain.py``).

Invariants (Kafka's ``PlainSaslServer``): a token has exactly three parts, UTF-8,
with a non-empty user and password; every failure raises ``AuthenticationFailed``
with a message that never contains the password.
"""

from __future__ import annotations

from protocol.scram import AuthenticationFailed


def token(user: str, password: str, authzid: str = "") -> bytes:
    """The client's PLAIN token."""
    return b"\x00".join(p.encode("utf-8") for p in (authzid, user, password))


def parse_token(data: bytes) -> tuple[str, str, str]:
    """(authzid, user, password) of a PLAIN token; raises AuthenticationFailed."""
    parts = data.split(b"\x00")
    if len(parts) != 3:
        raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid SASL/PLAIN response encoding") from None
    if not user:
        raise AuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise AuthenticationFailed("Authentication failed: password not specified")
    return authzid, user, password
