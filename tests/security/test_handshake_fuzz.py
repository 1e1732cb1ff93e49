"""Malformed SASL tokens and TLS handshakes: never a crash, never a hang, the connection
closes, and the broker goes on serving everyone else.

Also the pre-KIP-152 framing (SaslHandshake v0, raw tokens) end to end, and KIP-368
re-authentication with librdkafka, against a real broker.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import api as papi
from protocol.scram import ScramClient
from tests.helpers.kafka_socket import closed_by_peer, read_frame_or_none, request_frame
from tests.security.secure_broker import (
    ALICE,
    BOB,
    METADATA_ALL,
    SecureBroker,
    plain_login,
    sasl_socket,
    start_secure_broker,
)

API_VERSIONS = request_frame(18, 3, {"client_software_name": "t", "client_software_version": "1"})


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    b = start_secure_broker(tmp_path_factory.mktemp("fuzz"), {
        "connection.failed.authentication.delay.ms": "20",
        "connections.max.reauth.ms": "1500",
    })
    yield b
    b.proc.stop()


def _still_serving(sb: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", sb.ports["PLAINTEXT"]), timeout=5) as s:
        s.sendall(API_VERSIONS)
        assert read_frame_or_none(s) is not None


def _ends_closed(s: socket.socket, deadline_s: float = 5.0) -> None:
    """Read answers until the broker closes; it must within the deadline."""
    s.settimeout(deadline_s)
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        try:
            if not s.recv(65536):
                return
        except (ConnectionResetError, BrokenPipeError):
            return
    raise AssertionError("connection still open")


@settings(max_examples=25)
@given(mech=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
       tokens=st.lists(st.binary(max_size=300) | st.sampled_from([
           b"n,,n=,r=x", b"n,,n=bob,r=" + b"\x00" * 5, b"c=biws,r=,p=", b"\x00\x00",
           b"n,,n=bob,r=abc", b"y,,n=bob,r=abc", b"\x00bob\x00",
       ]), min_size=1, max_size=3),
       version=st.sampled_from([0, 1, 2]))
def test_malformed_sasl_tokens_close_the_connection_and_nothing_else(
        sb: SecureBroker, mech: str, tokens: list[bytes], version: int) -> None:
    with socket.create_connection(("127.0.0.1", sb.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(request_frame(17, 1, {"mechanism": mech}))
        assert read_frame_or_none(s) is not None
        closed = False
        for i, token in enumerate(tokens):
            s.sendall(request_frame(36, version, {"auth_bytes": token}, 2 + i))
            resp = read_frame_or_none(s)
            if resp is None:
                closed = True
                break
            body = papi.decode_response(36, version, resp)[1]
            if body.error_code:
                assert body.error_code == 58
                assert closed_by_peer(s)
                closed = True
                break
        if not closed:  # a token that happened to be a valid first step: give up mid-way
            s.sendall(request_frame(3, 12, METADATA_ALL, 99))
            _ends_closed(s)
    _still_serving(sb)


@settings(max_examples=20)
@given(junk=st.binary(min_size=1, max_size=600))
def test_garbage_on_tls_ports_is_closed_without_an_answer(sb: SecureBroker, junk: bytes) -> None:
    for listener in ("SASL_SSL", "SSL"):
        with socket.create_connection(("127.0.0.1", sb.ports[listener]), timeout=5) as s:
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)  # a half-sent hello must not hold the slot
            except OSError:
                pass
            _ends_closed(s, 15.0)
    _still_serving(sb)


@settings(max_examples=20)
@given(junk=st.binary(max_size=64))
def test_legacy_raw_tokens_that_are_garbage_close_the_connection(sb: SecureBroker, junk: bytes) -> None:
    with socket.create_connection(("127.0.0.1", sb.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(request_frame(17, 0, {"mechanism": "PLAIN"}))
        assert read_frame_or_none(s) is not None
        s.sendall(struct.pack(">i", len(junk)) + junk)
        _ends_closed(s)
    _still_serving(sb)


def test_legacy_v0_framing_authenticates_plain_and_scram_with_raw_tokens(sb: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", sb.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(request_frame(17, 0, {"mechanism": "PLAIN"}))
        assert read_frame_or_none(s) is not None
        token = b"\x00" + ALICE[0].encode() + b"\x00" + ALICE[1].encode()
        s.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame_or_none(s) == b""  # PLAIN success: an empty frame
        s.sendall(request_frame(3, 12, METADATA_ALL, 5))
        resp = read_frame_or_none(s)
        assert resp is not None and papi.decode_response(3, 12, resp)[1].brokers
    with socket.create_connection(("127.0.0.1", sb.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(request_frame(17, 0, {"mechanism": "SCRAM-SHA-512"}))
        assert read_frame_or_none(s) is not None
        client = ScramClient("SCRAM-SHA-512", *BOB)
        first = client.first()
        s.sendall(struct.pack(">i", len(first)) + first)
        server_first = read_frame_or_none(s)
        assert server_first is not None
        final = client.final(server_first)
        s.sendall(struct.pack(">i", len(final)) + final)
        server_final = read_frame_or_none(s)
        assert server_final is not None
        client.verify(server_final)
        s.sendall(request_frame(3, 12, METADATA_ALL, 5))
        assert read_frame_or_none(s) is not None


def test_authenticate_after_success_gets_34(sb: SecureBroker) -> None:
    with sasl_socket(sb) as s:
        assert plain_login(s, ALICE).session_lifetime_ms == 1500
        token = b"\x00" + ALICE[0].encode() + b"\x00" + ALICE[1].encode()
        s.sendall(request_frame(36, 1, {"auth_bytes": token}, 3))
        resp = read_frame_or_none(s)
        assert resp is not None and papi.decode_response(36, 1, resp)[1].error_code == 34


def test_expired_session_closes_at_the_next_request(sb: SecureBroker) -> None:
    with sasl_socket(sb) as s:
        assert plain_login(s, ALICE).error_code == 0
        time.sleep(1.7)
        s.sendall(request_frame(3, 12, METADATA_ALL, 3))
        assert closed_by_peer(s)


def test_librdkafka_reauthenticates_and_keeps_producing_past_the_session_lifetime(
        sb: SecureBroker) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": sb.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                  "ssl.ca.location": sb.pki.ca, "sasl.mechanism": "SCRAM-SHA-256",
                  "sasl.username": BOB[0], "sasl.password": BOB[1]})
    failures: list[object] = []
    for i in range(8):  # 4 s: more than two session lifetimes
        p.produce("reauth", str(i).encode(), on_delivery=lambda err, m: err and failures.append(err))
        p.flush(10)
        time.sleep(0.5)
    assert failures == []
    log = sb.proc.log()
    assert "re-authenticated on listener SASL_SSL as User:bob (SASL/SCRAM-SHA-256)" in log
