"""The bundled client's own TLS (client.connection over protocol.tls.TlsSession) against a
real broker on real sockets: answers of many TLS records, records cut into single bytes on
the way, the broker's close_notify, and certificate checks that must fail.

Oracles: what the test produced (read back over TLS), and the same request's answer on a
direct connection (through a relay that cuts every record apart).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from client.connection import BrokerConnection
from client.security import ClientSecurity, open_connection
from protocol.errors import ErrorCode, KafkaError
from storage.records import Record, build_batch, decode_batch, iter_batches
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.security.certs import Pki, make_pki

USER = ("carol", "carol-Secret-3")
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}


class Broker:
    def __init__(self, proc: BrokerProcess, pki: Pki, ports: dict[str, int]) -> None:
        self.proc, self.pki, self.ports = proc, pki, ports


@pytest.fixture(scope="module")
def b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """SASL_SSL with the broker's certificate (names localhost), and WRONGNAME, an SSL
    listener whose certificate names someone else (CN=client, no subjectAltName)."""
    tmp = tmp_path_factory.mktemp("client-tls")
    pki = make_pki(tmp / "pki")
    data = tmp / "data"
    data.mkdir()
    subprocess.run([sys.executable, "-m", "client.cli", "users", "add", "--data-dir", str(data),
                    "--user", USER[0], "--password", USER[1], "--mechanism", "SCRAM-SHA-512"],
                   check=True, capture_output=True, timeout=60)
    ports = {name: free_port_number() for name in ("PLAINTEXT", "SASL_SSL", "WRONGNAME")}
    proc = BrokerProcess(data, ports["PLAINTEXT"], {
        "listeners": ",".join(f"{name}://{'127.0.0.1' if name == 'PLAINTEXT' else 'localhost'}"
                              f":{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,WRONGNAME:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.broker_keystore,
        "listener.name.wrongname.ssl.keystore.location": pki.path("client-keystore.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }).start()
    yield Broker(proc, pki, ports)
    proc.stop()


def _sec(b: Broker, protocol: str = "SASL_SSL", **kw: Any) -> ClientSecurity:
    return ClientSecurity(protocol=protocol, mechanism="SCRAM-SHA-512", username=USER[0],
                          password=USER[1], ca_location=kw.pop("ca_location", b.pki.ca), **kw)


async def _connect(b: Broker, port: int | None = None) -> BrokerConnection:
    return await open_connection("localhost", port or b.ports["SASL_SSL"], _sec(b),
                                 client_id="t", request_timeout=10)


def _fetch(topic: str) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 8 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 8 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


async def test_a_request_and_an_answer_of_many_tls_records_carry_every_byte(b: Broker) -> None:
    # ~800 KB of incompressible values: the Produce goes out as ~50 TLS records, the Fetch
    # answer comes back as as many, read in whatever pieces the socket hands over.
    values = [os.urandom(1800 + i) for i in range(400)]
    records = [Record(0, 1_700_000_000_000 + i, None, v, []) for i, v in enumerate(values)]
    conn = await _connect(b)
    try:
        produced = await conn.request(0, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": "big", "partition_data": [
                {"index": 0, "records": build_batch(records)}]}]})
        [part] = produced.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (0, 0)
        fetched = await conn.request(1, 11, _fetch("big"))
    finally:
        await conn.close()
    [part] = fetched.responses[0].partitions
    assert part.error_code == 0
    data = bytes(part.records)
    assert len(data) > 45 * 16384
    got = [r.value for pos, _ in iter_batches(data) for r in decode_batch(data, pos)]
    assert got == values


async def _relay(target: int, cut: int) -> tuple[asyncio.Server, int]:
    """A TCP relay to the broker that forwards what the broker sends in pieces of ``cut``
    bytes, one write (and one loop pass) each, so the client sees TLS records cut apart."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        try:
            while data := await reader.read(65536):
                for i in range(0, len(data), n):
                    writer.write(data[i:i + n])
                    await writer.drain()
                    if n < 65536:
                        await asyncio.sleep(0)
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def serve(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        br, bw = await asyncio.open_connection("localhost", target)
        await asyncio.gather(pipe(cr, bw, 65536), pipe(br, cw, cut))

    server = await asyncio.start_server(serve, "localhost", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("cut", [1, 7])
async def test_records_cut_into_pieces_on_the_way_give_the_same_answers(b: Broker, cut: int) -> None:
    direct = await _connect(b)
    server, port = await _relay(b.ports["SASL_SSL"], cut)
    try:
        relayed = await _connect(b, port)  # handshake and SCRAM through the relay
        try:
            for key, version, body in ((18, 3, API_VERSIONS), (3, 12, METADATA_ALL)):
                expected = await direct.request(key, version, body)
                assert await relayed.request(key, version, body) == expected
        finally:
            await relayed.close()
    finally:
        await direct.close()
        server.close()


async def test_the_brokers_close_notify_fails_the_waiting_request_at_once(b: Broker) -> None:
    # TLS but no SASL on a SASL_SSL port: the first real request makes the broker close,
    # and it closes TLS first (close_notify), which the client reports as the broker's close.
    conn = await BrokerConnection.open("localhost", b.ports["SASL_SSL"], client_id="t",
                                       request_timeout=10, ssl=_sec(b).ssl_context())
    with pytest.raises(KafkaError) as info:
        await asyncio.wait_for(conn.request(3, 12, METADATA_ALL), 5)
    assert info.value.code == ErrorCode.NETWORK_EXCEPTION
    assert "closed by the broker (TLS close_notify)" in str(info.value)
    assert conn.closed


async def test_a_certificate_for_another_name_is_refused_unless_names_are_not_checked(
        b: Broker) -> None:
    port = b.ports["WRONGNAME"]
    with pytest.raises(KafkaError) as info:
        await open_connection("localhost", port, _sec(b, "SSL"), client_id="t",
                              request_timeout=10)
    assert info.value.code == ErrorCode.NETWORK_EXCEPTION
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    assert "Hostname mismatch" in str(info.value)
    # ssl.endpoint.identification.algorithm=none: the chain is still verified, not the name.
    conn = await open_connection("localhost", port, _sec(b, "SSL", verify_hostname=False),
                                 client_id="t", request_timeout=10)
    try:
        assert (await conn.request(18, 3, API_VERSIONS)).error_code == 0
    finally:
        await conn.close()



async def test_a_peer_that_never_answers_the_hello_times_out_with_a_reason(b: Broker) -> None:
    hellos: list[bytes] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hellos.append(await reader.read(65536))  # the ClientHello, never answered
        try:
            await reader.read()  # until the client gives up and closes
        except ConnectionError:
            pass
        writer.close()

    server = await asyncio.start_server(mute, "localhost", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(KafkaError) as info:
            await open_connection("localhost", port, _sec(b), client_id="t", request_timeout=0.5)
        assert asyncio.get_running_loop().time() - started < 3
    finally:
        server.close()
    assert info.value.code == ErrorCode.NETWORK_EXCEPTION
    assert str(info.value).endswith("timed out")
    assert hellos and hellos[0][0] == 22  # a TLS handshake record was sent
