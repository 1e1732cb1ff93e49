"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them, and
Kafka's credential format.

Invariants (Kafka's ``ScramSaslServer``, ``ScramFormatter``, ``ScramCredentialUtils``):
- A credential is (salt, StoredKey, ServerKey, iterations) — never the password;
  SaltedPassword = PBKDF2-HMAC(password, salt, iterations), no SASLprep; iterations
  4096..16384. Text form ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.
- client-first: gs2 flag ``n`` only (``y``/``p`` fail), an optional authzid equal to the
  user, ``=2C``/``=3D`` unescaped, unknown extensions ignored, ``tokenauth=true`` refused
  (no delegation tokens here).
- client-final: its nonce must END with client+server nonce (librdkafka <= 2.6.0 sends
  ``<c><c+s>``; Kafka accepts it since CVE-2024-56128's fix), the proof is checked in
  constant time over the message as received; the answer is ``v=<ServerSignature>``.
- Every failure raises :class:`AuthenticationFailed` with a generic message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS: dict[str, tuple[str, int]] = {
    # mechanism -> (hashlib name, KIP-554 ScramMechanism code)
    "SCRAM-SHA-256": ("sha256", 1),
    "SCRAM-SHA-512": ("sha512", 2),
}
MECHANISM_BY_CODE = {code: name for name, (_, code) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
_NAME = re.compile(r"^[\x01-\x7f]+$")


class AuthenticationFailed(Exception):
    """SASL authentication failed (the message is safe to send and log)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode(), validate=True)


def hash_name(mechanism: str) -> str:
    return MECHANISMS[mechanism][0]


def hmac_(mechanism: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name(mechanism)).digest()


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password, salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(","))
        return cls(_unb64(fields["salt"]), _unb64(fields["stored_key"]),
                   _unb64(fields["server_key"]), int(fields["iterations"]))


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    """The stored form of a salted password (what AlterUserScramCredentials sends)."""
    client_key = hmac_(mechanism, salted, b"Client Key")
    stored_key = hashlib.new(hash_name(mechanism), client_key).digest()
    server_key = hmac_(mechanism, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salt = os.urandom(32) if salt is None else salt
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def _unescape(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise AuthenticationFailed("Invalid user name encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attrs(parts: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in parts:
        if len(p) < 2 or p[1] != "=":
            raise AuthenticationFailed("Invalid SCRAM message")
        out.setdefault(p[0], p[2:])
    return out


class ScramServer:
    """The server side of one SCRAM exchange: two client messages in, two answers out."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._state = 0
        self.user: str | None = None
        self._cred: ScramCredential | None = None
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""

    @property
    def complete(self) -> bool:
        return self._state == 2

    def step(self, token: bytes) -> bytes:
        """Answer the next client message; raises AuthenticationFailed."""
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SCRAM message encoding") from None
        if self._state == 0:
            return self._first(text)
        if self._state == 1:
            return self._final(text)
        raise AuthenticationFailed("Unexpected SCRAM message after completion")

    def _first(self, text: str) -> bytes:
        parts = text.split(",")
        if len(parts) < 4 or parts[0] != "n":
            raise AuthenticationFailed("Invalid SCRAM client-first message (gs2 header)")
        authzid = parts[1]
        if authzid and not authzid.startswith("a="):
            raise AuthenticationFailed("Invalid SCRAM client-first message (authzid)")
        bare = parts[2:]
        if not bare[0].startswith("n=") or not bare[1].startswith("r="):
            raise AuthenticationFailed("Invalid SCRAM client-first message")
        raw_name = bare[0][2:]
        if not raw_name or not _NAME.match(raw_name):
            raise AuthenticationFailed("Invalid user name")
        user = _unescape(raw_name)
        nonce = bare[1][2:]
        if not nonce or not re.fullmatch(r"[\x21-\x2b\x2d-\x7e]+", nonce):
            raise AuthenticationFailed("Invalid client nonce")
        extensions = {}
        for p in bare[2:]:
            key, _, value = p.partition("=")
            extensions[key] = value
        if extensions.get("tokenauth", "false").lower() == "true":
            raise AuthenticationFailed("Delegation tokens are not supported")
        if authzid and _unescape(authzid[2:]) != user:
            raise AuthenticationFailed("Authorization id does not match the user name")
        cred = self._lookup(user, self.mechanism)
        if cred is None:
            raise AuthenticationFailed("Authentication failed: invalid credentials")
        self.user = user
        self._cred = cred
        self._first_bare = ",".join(bare)
        self._nonce = nonce + base64.b64encode(os.urandom(24)).decode().rstrip("=").replace(",", "-")
        self._server_first = f"r={self._nonce},s={_b64(cred.salt)},i={cred.iterations}"
        self._state = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        cut = text.rfind(",p=")
        if cut < 0:
            raise AuthenticationFailed("Invalid SCRAM client-final message")
        without_proof = text[:cut]
        attrs = _attrs(without_proof.split(","))
        if "c" not in attrs or "r" not in attrs:
            raise AuthenticationFailed("Invalid SCRAM client-final message")
        if not attrs["r"].endswith(self._nonce):
            raise AuthenticationFailed("Invalid nonce")
        try:
            proof = _unb64(text[cut + 3:])
        except ValueError:
            raise AuthenticationFailed("Invalid client proof encoding") from None
        cred = self._cred
        assert cred is not None
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac_(self.mechanism, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed("Authentication failed: invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        computed = hashlib.new(hash_name(self.mechanism), client_key).digest()
        if not hmac.compare_digest(computed, cred.stored_key):
            raise AuthenticationFailed("Authentication failed: invalid credentials")
        self._state = 2
        return ("v=" + _b64(hmac_(self.mechanism, cred.server_key, auth_message))).encode()


class ScramClient:
    """The client side (for the bundled client and CLI): RFC 5802 messages."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.mechanism = mechanism
        self._password = password.encode()
        name = user.replace("=", "=3D").replace(",", "=2C")
        self._nonce = base64.b64encode(os.urandom(24)).decode().rstrip("=").replace(",", "-")
        self._first_bare = f"n={name},r={self._nonce}"
        self._expected: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attrs(text.split(","))
        nonce, salt, iterations = attrs["r"], _unb64(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self._nonce):
            raise AuthenticationFailed("Server nonce does not extend ours")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = hmac_(self.mechanism, salted, b"Client Key")
        stored_key = hashlib.new(hash_name(self.mechanism), client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac_(self.mechanism, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac_(self.mechanism, salted, b"Server Key")
        self._expected = hmac_(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode()
        if not text.startswith("v=") or self._expected is None or not hmac.compare_digest(
                _unb64(text[2:]), self._expected):
            raise AuthenticationFailed("Server signature does not verify")
