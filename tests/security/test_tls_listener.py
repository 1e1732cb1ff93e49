"""The broker's own TLS record layer on a real listener: pipelined requests that share and
split TLS records, a stalled handshake cut off by the timeout, refusals logged."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator

import pytest

from broker.tls_connection import SSL_HANDSHAKE_TIMEOUT_S
from protocol import api as papi
from tests.helpers.kafka_socket import read_frame_or_none, request_frame
from tests.helpers.wait import wait_until
from tests.security.secure_broker import SecureBroker, start_secure_broker


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    b = start_secure_broker(tmp_path_factory.mktemp("tls"))
    yield b
    b.proc.stop()


def _tls(sb: SecureBroker) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=sb.pki.ca)
    raw = socket.create_connection(("localhost", sb.ports["SASL_SSL"]), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def _api_versions(correlation_id: int) -> bytes:
    return request_frame(18, 3, {"client_software_name": "t" * (1 + correlation_id % 50),
                         "client_software_version": "1"}, correlation_id)


@pytest.mark.parametrize("how", ["one write", "byte by byte", "small records"])
def test_pipelined_requests_are_answered_in_order_however_tls_records_cut_them(
        sb: SecureBroker, how: str) -> None:
    requests = [_api_versions(cid) for cid in range(1, 201)]
    stream = b"".join(requests)
    with _tls(sb) as s:
        if how == "one write":
            s.sendall(stream)  # several requests per TLS record
        elif how == "byte by byte":
            for i in range(0, 600):  # the first requests, one byte per record
                s.sendall(stream[i:i + 1])
            s.sendall(stream[600:])
        else:  # records that end mid-frame
            for i in range(0, len(stream), 37):
                s.sendall(stream[i:i + 37])
        got = []
        for _ in requests:
            resp = read_frame_or_none(s)
            assert resp is not None
            got.append(struct.unpack_from(">i", resp)[0])
            assert papi.decode_response(18, 3, resp)[1].error_code == 0
    assert got == list(range(1, 201))


def test_a_stalled_handshake_is_closed_after_the_timeout_and_others_are_served(
        sb: SecureBroker) -> None:
    # The first bytes of a real ClientHello, then nothing.
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = ssl.create_default_context().wrap_bio(inc, out, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        hello.do_handshake()
    partial = out.read()[:20]
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", sb.ports["SASL_SSL"]), timeout=5) as stalled:
        stalled.sendall(partial)
        with _tls(sb) as other:  # meanwhile the listener serves everyone else
            other.sendall(_api_versions(7))
            assert read_frame_or_none(other) is not None
        stalled.settimeout(SSL_HANDSHAKE_TIMEOUT_S + 10)
        try:
            assert stalled.recv(65536) == b""
        except ConnectionResetError:
            pass
    waited = time.monotonic() - started
    assert SSL_HANDSHAKE_TIMEOUT_S - 1 <= waited <= SSL_HANDSHAKE_TIMEOUT_S + 10
    assert f"TLS handshake not done within {SSL_HANDSHAKE_TIMEOUT_S:g} s" in sb.proc.log()


def test_a_failed_handshake_is_logged_with_its_reason(sb: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", sb.ports["SASL_SSL"]), timeout=5) as s:
        s.sendall(_api_versions(1))
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass
    wait_until(lambda: "TLS handshake failed" in sb.proc.log(), 5.0, "the failed handshake to be logged")
    assert "TLS handshake failed" in sb.proc.log()
