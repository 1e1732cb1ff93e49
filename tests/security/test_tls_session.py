"""protocol.tls.TlsSession (server side) without a socket: a real client ``ssl.SSLObject`` on one
side, the broker's session on the other, ciphertext handed across in arbitrary pieces.

The oracle is the client's own plaintext: whatever way the byte stream is cut, the session
must return exactly what the client wrote, in order, and the client must read back exactly
what the session encrypted.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.security.tls import principal
from protocol.tls import TlsSession
from tests.security.certs import CLIENT_PRINCIPAL, Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(Path(tmp_path_factory.mktemp("pki")))


def _server_ctx(pki: Pki, *, client_auth: bool = False,
                version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.broker_keystore)
    if client_auth:
        ctx.load_verify_locations(cafile=pki.ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


class _Client:
    """A TLS client as a pure function of bytes (what librdkafka does over its socket)."""

    def __init__(self, pki: Pki, cert: str | None = None, ca: str | None = None) -> None:
        ctx = ssl.create_default_context(cafile=ca or pki.ca)
        if cert:
            ctx.load_cert_chain(pki.path(f"{cert}.pem"), pki.path(f"{cert}.key"))
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname="localhost")

    def read_all(self) -> bytes:
        chunks = []
        try:
            while True:
                chunk = self.obj.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass
        return b"".join(chunks)


def _handshake(client: _Client, server: TlsSession) -> None:
    for _ in range(10):
        try:
            client.obj.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        assert server.receive(client.out.read()) == b""
        client.inc.write(server.outgoing())
        if done and server.handshaken:
            return
    raise AssertionError("handshake did not finish")


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(st.binary(min_size=1, max_size=40_000), min_size=1, max_size=4),
       cuts=st.lists(st.integers(min_value=0, max_value=200_000), max_size=12),
       answer=st.binary(max_size=70_000))
def test_plaintext_survives_any_cutting_of_the_ciphertext_both_ways(
        pki: Pki, version: ssl.TLSVersion, messages: list[bytes], cuts: list[int],
        answer: bytes) -> None:
    client = _Client(pki)
    server = TlsSession(_server_ctx(pki, version=version))
    _handshake(client, server)
    assert server.version == version.name.replace("_", ".")
    for m in messages:
        client.obj.write(m)
    received = b"".join(server.receive(piece) for piece in _pieces(client.out.read(), cuts))
    assert received == b"".join(messages)
    assert not server.closed
    client.inc.write(server.encrypt(answer) + server.outgoing())
    assert client.read_all() == answer


def test_client_certificate_gives_the_dn_principal_and_none_gives_anonymous(pki: Pki) -> None:
    with_cert = TlsSession(_server_ctx(pki))
    _handshake(_Client(pki, cert="client"), with_cert)
    assert principal(with_cert.peercert()) == "User:ANONYMOUS"  # not requested: not sent
    mutual = TlsSession(_server_ctx(pki, client_auth=True))
    _handshake(_Client(pki, cert="client"), mutual)
    assert principal(mutual.peercert()) == CLIENT_PRINCIPAL


@pytest.mark.parametrize("cert", [None, "foreign-client"])
def test_mutual_tls_without_a_trusted_certificate_fails_with_an_alert(pki: Pki, cert: str | None) -> None:
    client = _Client(pki, cert=cert)
    server = TlsSession(_server_ctx(pki, client_auth=True))
    with pytest.raises(ssl.SSLError):
        for _ in range(10):
            try:
                client.obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            server.receive(client.out.read())
            client.inc.write(server.outgoing())
    assert not server.handshaken
    alert = server.outgoing()  # the client learns why, not just that the socket closed
    assert alert
    client.inc.write(alert)
    with pytest.raises(ssl.SSLError) as info:
        client.obj.read(1)
    assert ("CERTIFICATE_REQUIRED" if cert is None else "UNKNOWN_CA") in str(info.value).upper()


def test_a_plaintext_kafka_request_is_refused_by_the_handshake(pki: Pki) -> None:
    server = TlsSession(_server_ctx(pki))
    api_versions = bytes.fromhex("0000001e00120003000000010001740003740131000000")
    with pytest.raises(ssl.SSLError):
        server.receive(api_versions)
    assert not server.handshaken


def test_close_notify_both_ways(pki: Pki) -> None:
    client = _Client(pki)
    server = TlsSession(_server_ctx(pki))
    _handshake(client, server)
    client.obj.write(b"last request")
    try:
        client.obj.unwrap()
    except ssl.SSLWantReadError:
        pass
    assert server.receive(client.out.read()) == b"last request"
    assert server.closed
    client.inc.write(server.close_notify())
    client.obj.unwrap()  # completes (no SSLWantReadError): the server's close_notify came
    assert TlsSession(_server_ctx(pki)).close_notify() == b""  # nothing before a handshake


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=st.binary(min_size=1, max_size=40_000),
       answers=st.lists(st.binary(min_size=1, max_size=50_000), min_size=1, max_size=3),
       cuts=st.lists(st.integers(min_value=0, max_value=200_000), max_size=12))
def test_a_client_session_reads_the_brokers_records_however_they_are_cut(
        pki: Pki, version: ssl.TLSVersion, request: bytes, answers: list[bytes],
        cuts: list[int]) -> None:
    """Both ends are TlsSession (the bundled client's and the broker's); the oracle is
    the bytes each side encrypted."""
    client = TlsSession(ssl.create_default_context(cafile=pki.ca), server_side=False,
                        server_hostname="localhost")
    server = TlsSession(_server_ctx(pki, version=version))
    flight = client.start()
    for _ in range(10):
        assert server.receive(flight) == b""
        assert client.receive(server.outgoing()) == b""
        flight = client.outgoing()
        if client.handshaken and server.handshaken and not flight:
            break
    assert client.handshaken and server.handshaken and client.version == server.version
    assert server.receive(client.encrypt(request)) == request
    stream = b"".join(server.encrypt(a) for a in answers) + server.close_notify()
    received = b"".join(client.receive(piece) for piece in _pieces(stream, cuts))
    assert received == b"".join(answers)
    assert client.closed  # the close_notify came last


def _take(wire: list[bytes]) -> bytes:
    data = b"".join(wire)
    wire.clear()
    return data


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(st.tuples(
    st.lists(st.binary(min_size=1, max_size=20_000), min_size=1, max_size=3),
    st.binary(min_size=1, max_size=40_000),
    st.lists(st.integers(min_value=0, max_value=100_000), max_size=10)), min_size=1, max_size=4))
def test_attached_sessions_deliver_every_byte_however_the_records_are_cut(
        pki: Pki, version: ssl.TLSVersion, rounds: list[tuple[list[bytes], bytes, list[int]]]
        ) -> None:
    """As the broker and the bundled client run them: each session attached to its
    socket's write (here the other end's wire), the handshake, tickets and records sent
    from inside the session. Requests and answers go back and forth with the ciphertext
    cut anywhere (a record's head in one receive, its tail and the next records in
    another); the oracle is the bytes each side wrote, and nothing is left to
    ``outgoing()``."""
    to_server: list[bytes] = []
    to_client: list[bytes] = []
    client = TlsSession(ssl.create_default_context(cafile=pki.ca), server_side=False,
                        server_hostname="localhost")
    server = TlsSession(_server_ctx(pki, version=version))
    client_write = client.attach(to_server.append)
    server_write = server.attach(to_client.append)
    assert client.start() == b"" and to_server  # the ClientHello went out
    for _ in range(10):
        assert server.receive(_take(to_server)) == b""
        assert client.receive(_take(to_client)) == b""
        if client.handshaken and server.handshaken and not to_server:
            break
    assert client.handshaken and server.handshaken
    for requests, answer, cuts in rounds:
        for r in requests:
            client_write(r)
        received = b"".join(server.receive(p) for p in _pieces(_take(to_server), cuts))
        assert received == b"".join(requests)
        server_write(answer)
        received = b"".join(client.receive(p) for p in _pieces(_take(to_client), cuts))
        assert received == answer
        assert server.outgoing() == client.outgoing() == b"" and not to_server
