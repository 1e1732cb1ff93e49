"""SCRAM, PLAIN, the SASL gate and the TLS principal, driven without a socket.

Oracles: RFC 7677's published vector; an independent client (``ScramClient``, which
follows RFC 5802's client steps) for random users and passwords; ``openssl x509
-nameopt RFC2253`` for the distinguished name of real certificates.
"""

from __future__ import annotations

import base64
import hashlib
import ssl
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.security import plain
from broker.security.sasl import SaslGate
from broker.security.tls import principal
from protocol import api as papi
from protocol.scram import (
    AuthenticationFailed,
    ScramClient,
    ScramCredential,
    ScramServer,
    hash_name,
    hmac_,
    make_credential,
    salted_password,
)
from tests.helpers.kafka_socket import request_frame
from tests.security.certs import CLIENT_PRINCIPAL, make_pki


def test_rfc7677_vector_gives_the_published_keys_and_signatures() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = make_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    assert base64.b64encode(cred.stored_key).decode() == "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
    assert base64.b64encode(cred.server_key).decode() == "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
    server = ScramServer("SCRAM-SHA-256", lambda u, m: cred if u == "user" else None)
    server_first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    # Replace our random server nonce with the RFC's so the published proof applies.
    server._nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    server._server_first = f"r={server._nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert server_first.startswith(b"r=rOprNGfwEbeRWgbNEkqO")
    final = server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.user == "user"


def test_credential_text_round_trips_in_kafkas_format() -> None:
    cred = make_credential("SCRAM-SHA-512", "pw", 8192)
    text = cred.to_text()
    assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(",iterations=8192")
    assert ScramCredential.from_text(text) == cred


names = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20)
passwords = st.text(min_size=1, max_size=30)


@given(user=names, password=passwords, mech=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
       wrong=st.booleans())
def test_scram_accepts_exactly_the_right_password(user: str, password: str, mech: str,
                                                   wrong: bool) -> None:
    cred = make_credential(mech, password)
    server = ScramServer(mech, lambda u, m: cred if (u, m) == (user, mech) else None)
    client = ScramClient(mech, user, password + "x" if wrong else password)
    server_first = server.step(client.first())
    final = client.final(server_first)
    if wrong:
        with pytest.raises(AuthenticationFailed):
            server.step(final)
        return
    client.verify(server.step(final))
    assert server.user == user


def _final(mech: str, password: str, first_bare: str, server_first: str, nonce: str) -> bytes:
    """RFC 5802's client-final over the messages as sent, with nonce ``nonce``."""
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salted = salted_password(mech, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac_(mech, salted, b"Client Key")
    stored = hashlib.new(hash_name(mech), client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    sig = hmac_(mech, stored, f"{first_bare},{server_first},{without_proof}".encode())
    proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("shape, ok", [("doubled", True), ("plain", True), ("foreign", False)])
def test_scram_nonce_must_end_with_client_and_server_nonce(shape: str, ok: bool) -> None:
    cred = make_credential("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda u, m: cred)
    server_first = server.step(b"n,,n=u,r=cnonce").decode()
    full = server_first.split(",")[0][2:]
    # librdkafka <= 2.6.0 sends r=<c><c+s> (and signs it); a nonce not ending in c+s fails.
    nonce = {"doubled": "cnonce" + full, "plain": full, "foreign": full + "X"}[shape]
    final = _final("SCRAM-SHA-256", "pw", "n=u,r=cnonce", server_first, nonce)
    if ok:
        server.step(final)
        assert server.complete
    else:
        with pytest.raises(AuthenticationFailed):
            server.step(final)


@pytest.mark.parametrize("first", [
    b"n,,n=,r=abc", b"y,,n=u,r=abc", b"p=tls,,n=u,r=abc", b"n,,r=abc", b"n,,n=u",
    b"n,,n=u,r=abc,tokenauth=true", b"n,a=other,n=u,r=abc", b"\xff\xfe", b"", b"n,,n=a=b,r=x",
])
def test_bad_client_first_messages_fail_cleanly(first: bytes) -> None:
    cred = make_credential("SCRAM-SHA-256", "pw")
    with pytest.raises(AuthenticationFailed):
        ScramServer("SCRAM-SHA-256", lambda u, m: cred).step(first)


def test_client_first_with_unknown_extensions_and_tokenauth_false_parses() -> None:
    cred = make_credential("SCRAM-SHA-256", "pw")
    out = ScramServer("SCRAM-SHA-256", lambda u, m: cred).step(
        b"n,,n=u,r=abc,tokenauth=false,foo=bar")
    assert out.startswith(b"r=abc")


@pytest.mark.parametrize("token, ok", [
    (b"u\x00u\x00p", True), (b"\x00u\x00p", True), (b"x\x00u\x00p", False),
    (b"u\x00p", False), (b"a\x00u\x00p\x00q", False), (b"\x00u\x00wrong", False),
    (b"\x00\x00p", False), (b"\x00u\x00", False), (b"\x00nobody\x00p", False),
])
def test_plain_tokens_follow_kafkas_rules(token: bytes, ok: bool) -> None:
    users = {"u": "p"}
    if ok:
        assert plain.authenticate(token, users) == "u"
    else:
        with pytest.raises(AuthenticationFailed):
            plain.authenticate(token, users)


def test_jaas_users_parse_with_quotes_and_escapes() -> None:
    module, opts = plain.parse_jaas(
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="a;b" user_admin="a;b" user_x="q\\"uote";')
    assert module == plain.PLAIN_MODULE
    assert opts["user_admin"] == "a;b" and opts["user_x"] == 'q"uote'


def _frame(api_key: int, version: int, body: dict) -> bytes:  # type: ignore[type-arg]
    return request_frame(api_key, version, body, 7, "test")[4:]


def _gate(reauth_ms: int = 0) -> SaslGate:
    return SaslGate(["PLAIN"], lambda: {"u": "p"}, lambda u, m: None, reauth_ms, 0)


def test_gate_closes_on_a_request_before_authentication_and_lets_api_versions_through() -> None:
    gate = _gate()
    assert gate.on_frame(_frame(18, 3, {"client_software_name": "x",
                                        "client_software_version": "1"})) is None
    out = gate.on_frame(_frame(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False}))
    assert out is not None and out.close and out.data is None


def test_gate_answers_33_for_a_mechanism_not_enabled_then_closes() -> None:
    out = _gate().on_frame(_frame(17, 1, {"mechanism": "GSSAPI"}))
    assert out is not None and out.close
    assert out.data is not None
    resp = papi.decode_response(17, 1, out.data[4:])[1]
    assert (resp.error_code, list(resp.mechanisms)) == (33, ["PLAIN"])


def test_gate_legacy_v0_framing_answers_plain_success_with_an_empty_frame() -> None:
    gate = _gate()
    gate.on_frame(_frame(17, 0, {"mechanism": "PLAIN"}))
    out = gate.on_frame(b"\x00u\x00p")
    assert out is not None and out.data == struct.pack(">i", 0) and gate.complete
    assert gate.principal == "User:u"


def test_gate_expired_session_closes_on_the_next_request_but_allows_reauthentication() -> None:
    gate = _gate(reauth_ms=1000)
    gate.on_frame(_frame(17, 1, {"mechanism": "PLAIN"}))
    ok = gate.on_frame(_frame(36, 1, {"auth_bytes": b"\x00u\x00p"}))
    assert ok is not None and ok.data is not None
    assert papi.decode_response(36, 1, ok.data[4:])[1].session_lifetime_ms == 1000
    assert gate.expires is not None
    md = _frame(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False})
    assert gate.on_frame(md, now=gate.expires - 0.5) is None
    again = gate.on_frame(_frame(17, 1, {"mechanism": "PLAIN"}), now=gate.expires + 1)
    assert again is not None and again.close is None  # re-authentication, not 33
    gate.on_frame(_frame(36, 1, {"auth_bytes": b"\x00u\x00p"}))
    assert gate.complete
    closed = gate.on_frame(md, now=gate.expires + 1)
    assert closed is not None and closed.close


def test_gate_failed_authentication_answers_58_after_the_delay() -> None:
    gate = SaslGate(["PLAIN"], lambda: {"u": "p"}, lambda u, m: None, 0, 100)
    gate.on_frame(_frame(17, 1, {"mechanism": "PLAIN"}))
    out = gate.on_frame(_frame(36, 2, {"auth_bytes": b"\x00u\x00bad"}))
    assert out is not None and out.close and out.delay == pytest.approx(0.1)
    assert out.data is not None
    assert papi.decode_response(36, 2, out.data[4:])[1].error_code == 58


def test_certificate_principal_is_the_rfc2253_dn_openssl_prints(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    for name in ("client.pem", "foreign-client.pem", "broker.pem"):
        decoded = ssl._ssl._test_decode_cert(pki.path(name))  # type: ignore[attr-defined]
        oracle = subprocess.run(
            ["openssl", "x509", "-in", pki.path(name), "-noout", "-subject", "-nameopt", "RFC2253"],
            capture_output=True, text=True, check=True).stdout.strip().removeprefix("subject=")
        assert principal(decoded) == "User:" + oracle
    assert principal(ssl._ssl._test_decode_cert(pki.path("client.pem"))) == CLIENT_PRINCIPAL  # type: ignore[attr-defined]
    assert principal(None) == "User:ANONYMOUS"
