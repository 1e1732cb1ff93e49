"""Real clients against TLS and SASL listeners, and everything that must be refused.

Clients: confluent-kafka (librdkafka) with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over
SASL_SSL and SASL_PLAINTEXT; kafka-python with SCRAM; aiokafka with PLAIN and SCRAM;
each produces, consumes in a group and looks offsets up by time (oracle: the first
produced record whose timestamp is >= the target). Refusals are checked on real sockets.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.security import ClientSecurity, open_connection
from protocol import api as papi
from protocol.errors import ErrorCode, KafkaError
from tests.helpers.kafka_socket import closed_by_peer, read_frame_or_none, request_frame
from tests.security.secure_broker import (
    ALICE,
    BOB,
    METADATA_ALL,
    SecureBroker,
    chronolog,
    handshake,
    plain_login,
    sasl_socket,
    start_secure_broker,
)

N = 20
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    b = start_secure_broker(tmp_path_factory.mktemp("secure"))
    yield b
    b.proc.stop()


def _expected_offset(target: int) -> int:
    """Oracle: records i have timestamp BASE_TS + 10*i; the first with ts >= target."""
    for i in range(N):
        if BASE_TS + 10 * i >= target:
            return i
    return -1


def _librdkafka_conf(sb: SecureBroker, listener: str, mech: str, user: tuple[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": sb.bootstrap(listener), "security.protocol": listener,
        "sasl.mechanism": mech, "sasl.username": user[0], "sasl.password": user[1],
    }
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = sb.pki.ca
    return conf


@pytest.mark.parametrize("listener, mech, user", [
    ("SASL_SSL", "PLAIN", ALICE), ("SASL_SSL", "SCRAM-SHA-256", BOB),
    ("SASL_SSL", "SCRAM-SHA-512", BOB), ("SASL_PLAINTEXT", "SCRAM-SHA-256", BOB),
    ("SASL_PLAINTEXT", "PLAIN", ALICE),
])
def test_confluent_kafka_produces_consumes_in_a_group_and_looks_up_times(
        sb: SecureBroker, listener: str, mech: str, user: tuple[str, str]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = _librdkafka_conf(sb, listener, mech, user)
    topic = f"ck-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    for i in range(N):
        p.produce(topic, f"v{i}".encode(), timestamp=BASE_TS + 10 * i)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    assert got == [f"v{i}".encode() for i in range(N)]
    c.commit(asynchronous=False)
    for target in (BASE_TS - 1, BASE_TS + 55, BASE_TS + 190, BASE_TS + 191):
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)
        assert tp.offset == _expected_offset(target)
    c.close()


@pytest.mark.parametrize("listener, mech", [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "SCRAM-SHA-256")])
def test_kafka_python_scram_produces_consumes_in_a_group_and_looks_up_times(
        sb: SecureBroker, listener: str, mech: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap_servers": sb.bootstrap(listener), "security_protocol": listener,
        "sasl_mechanism": mech, "sasl_plain_username": BOB[0], "sasl_plain_password": BOB[1],
    }
    if listener == "SASL_SSL":
        conf["ssl_cafile"] = sb.pki.ca
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(**conf)
    for i in range(N):
        p.send(topic, f"v{i}".encode(), timestamp_ms=BASE_TS + 10 * i)
    p.flush(30)
    p.close()
    # Assigned, not subscribed: kafka-python 3.0's first generation can come back with an
    # empty assignment (its range assignor has no metadata yet), unrelated to security;
    # the group's coordinator and committed offsets are still exercised.
    c = KafkaConsumer(group_id=f"g-{topic}", auto_offset_reset="earliest",
                      enable_auto_commit=False, **conf)
    c.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=200).values():
            got += [r.value for r in records]
    c.commit()
    assert got == [f"v{i}".encode() for i in range(N)]
    for target in (BASE_TS + 55, BASE_TS + 190):
        res = c.offsets_for_times({TopicPartition(topic, 0): target})
        assert res[TopicPartition(topic, 0)].offset == _expected_offset(target)
    c.close()


@pytest.mark.parametrize("listener, mech, user", [
    ("SASL_SSL", "PLAIN", ALICE), ("SASL_SSL", "SCRAM-SHA-256", BOB),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", BOB),
])
async def test_aiokafka_produces_consumes_in_a_group_and_looks_up_times(
        sb: SecureBroker, listener: str, mech: str, user: tuple[str, str]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    conf: dict[str, Any] = {
        "bootstrap_servers": sb.bootstrap(listener), "security_protocol": listener,
        "sasl_mechanism": mech, "sasl_plain_username": user[0], "sasl_plain_password": user[1],
    }
    if listener == "SASL_SSL":
        conf["ssl_context"] = create_ssl_context(cafile=sb.pki.ca)
    topic = f"ak-{uuid.uuid4().hex[:8]}"
    p = AIOKafkaProducer(**conf)
    await p.start()
    try:
        for i in range(N):
            await p.send_and_wait(topic, f"v{i}".encode(), timestamp_ms=BASE_TS + 10 * i)
    finally:
        await p.stop()
    c = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
    await c.start()
    try:
        got: list[bytes] = []
        async with asyncio.timeout(30):
            async for m in c:
                got.append(m.value)
                if len(got) == N:
                    break
        assert got == [f"v{i}".encode() for i in range(N)]
        tp = TopicPartition(topic, 0)
        for target in (BASE_TS + 55, BASE_TS + 190):
            res = await c.offsets_for_times({tp: target})
            assert res[tp].offset == _expected_offset(target)
    finally:
        await c.stop()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_scram_over_sasl_ssl_produces_and_consumes(sb: SecureBroker) -> None:
    topic = f"kc-{uuid.uuid4().hex[:8]}"
    common = ["-b", sb.bootstrap("SASL_SSL"), "-X", "security.protocol=SASL_SSL",
              "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", f"sasl.username={BOB[0]}",
              "-X", f"sasl.password={BOB[1]}", "-X", f"ssl.ca.location={sb.pki.ca}", "-t", topic]
    subprocess.run(["kcat", *common, "-P"], input=b"a\nb\nc\n", check=True, timeout=60)
    out = subprocess.run(["kcat", *common, "-C", "-o", "beginning", "-e", "-q"],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.split() == [b"a", b"b", b"c"]


# ------------------------------------------------------------------ refusals


def _sec(sb: SecureBroker, listener: str, mech: str = "SCRAM-SHA-256",
         user: tuple[str, str] = BOB, **kw: Any) -> ClientSecurity:
    return ClientSecurity(protocol=listener, mechanism=mech, username=user[0], password=user[1],
                          ca_location=kw.pop("ca", sb.pki.ca), **kw)


async def _connect(sb: SecureBroker, listener: str, sec: ClientSecurity) -> Any:
    host, port = sb.bootstrap(listener).split(":")
    return await open_connection(host, int(port), sec, client_id="t", request_timeout=10)


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
@pytest.mark.parametrize("mech, user", [
    ("SCRAM-SHA-256", (BOB[0], "wrong")), ("SCRAM-SHA-512", ("nobody", BOB[1])),
    ("PLAIN", (ALICE[0], "wrong")), ("PLAIN", ("nobody", ALICE[1])),
])
async def test_wrong_password_or_unknown_user_gets_58_then_the_connection_closes(
        sb: SecureBroker, listener: str, mech: str, user: tuple[str, str]) -> None:
    started = time.monotonic()
    with pytest.raises(KafkaError) as info:
        await _connect(sb, listener, _sec(sb, listener, mech, user))
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert time.monotonic() - started >= 0.09  # connection.failed.authentication.delay.ms


def test_confluent_with_a_wrong_password_reports_an_authentication_error(sb: SecureBroker) -> None:
    from confluent_kafka import KafkaError as CKError
    from confluent_kafka import Producer

    errors: list[Any] = []
    conf = _librdkafka_conf(sb, "SASL_SSL", "SCRAM-SHA-512", (BOB[0], "nope"))
    p = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert any(e.code() == CKError._AUTHENTICATION for e in errors)


async def test_authenticated_connection_serves_metadata_with_its_listeners_address(
        sb: SecureBroker) -> None:
    for listener in ("SASL_SSL", "SASL_PLAINTEXT", "PLAINTEXT"):
        sec = _sec(sb, listener) if listener != "PLAINTEXT" else ClientSecurity()
        conn = await _connect(sb, listener, sec)
        try:
            md = await conn.request(3, 12, METADATA_ALL)
            [broker] = md.brokers
            assert (broker.host, broker.port) == tuple(
                [sb.bootstrap(listener).split(":")[0], sb.ports[listener]])
            fc = await conn.request(10, 3, {"key": "g", "key_type": 0})
            assert (fc.host, fc.port) == (broker.host, broker.port)
        finally:
            await conn.close()


def test_sasl_port_without_sasl_closes_on_the_first_real_request(sb: SecureBroker) -> None:
    with sasl_socket(sb) as s:
        s.sendall(request_frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}))
        assert read_frame_or_none(s) is not None  # ApiVersions is served before authentication
        s.sendall(request_frame(3, 12, METADATA_ALL, 2))
        assert closed_by_peer(s)


def test_requests_after_a_handshake_but_before_authentication_get_34_then_close(
        sb: SecureBroker) -> None:
    with sasl_socket(sb) as s:
        assert handshake(s, "PLAIN").error_code == 0
        s.sendall(request_frame(3, 12, {**METADATA_ALL, "topics": [{"name": "t", "topic_id": bytes(16)}]}, 2))
        resp = read_frame_or_none(s)
        assert resp is not None
        [topic] = papi.decode_response(3, 12, resp)[1].topics
        assert topic.error_code == 34
        assert closed_by_peer(s)
    with sasl_socket(sb) as s:  # legacy v0: the next frame is a token, not a request
        assert handshake(s, "PLAIN", version=0).error_code == 0
        s.sendall(request_frame(3, 12, METADATA_ALL, 2))
        assert closed_by_peer(s)


def test_sasl_requests_after_success_without_reauthentication_get_34_and_the_connection_serves_on(
        sb: SecureBroker) -> None:
    """Without connections.max.reauth.ms the SASL gate leaves the request path once the
    client is in: a later SaslHandshake or SaslAuthenticate is an ordinary request,
    answered ILLEGAL_SASL_STATE, and the connection goes on serving."""
    with sasl_socket(sb) as s:
        login = plain_login(s, ALICE)
        assert login.error_code == 0 and login.session_lifetime_ms == 0
        s.sendall(request_frame(17, 1, {"mechanism": "PLAIN"}, 3))
        resp = read_frame_or_none(s)
        assert resp is not None and papi.decode_response(17, 1, resp)[1].error_code == 34
        token = b"\x00" + ALICE[0].encode() + b"\x00" + ALICE[1].encode()
        s.sendall(request_frame(36, 1, {"auth_bytes": token}, 4))
        resp = read_frame_or_none(s)
        assert resp is not None and papi.decode_response(36, 1, resp)[1].error_code == 34
        s.sendall(request_frame(3, 12, METADATA_ALL, 5))
        resp = read_frame_or_none(s)
        assert resp is not None and papi.decode_response(3, 12, resp)[0] == 5  # correlation id


def test_unsupported_mechanism_gets_33_with_the_enabled_list(sb: SecureBroker) -> None:
    with sasl_socket(sb) as s:
        body = handshake(s, "GSSAPI")
        assert body.error_code == 33
        assert sorted(body.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert closed_by_peer(s)


async def test_client_that_does_not_trust_the_brokers_ca_cannot_connect(sb: SecureBroker) -> None:
    with pytest.raises(KafkaError) as info:
        await _connect(sb, "SASL_SSL", _sec(sb, "SASL_SSL", ca=sb.pki.path("foreign-ca.pem")))
    assert info.value.code == ErrorCode.NETWORK_EXCEPTION
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_plaintext_request_on_a_tls_port_is_closed_without_a_kafka_answer(
        sb: SecureBroker, listener: str) -> None:
    with socket.create_connection(("127.0.0.1", sb.ports[listener]), timeout=5) as s:
        s.sendall(request_frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}))
        s.settimeout(15)
        data = b""
        try:
            while chunk := s.recv(4096):
                data += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
        # At most a TLS alert record (content type 21), never a Kafka response.
        assert data == b"" or data[0] == 21


def _mtls(sb: SecureBroker, cert: str | None) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=sb.pki.ca)
    if cert:
        ctx.load_cert_chain(sb.pki.path(f"{cert}.pem"), sb.pki.path(f"{cert}.key"))
    raw = socket.create_connection(("localhost", sb.ports["SSL"]), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost")


@pytest.mark.parametrize("cert", [None, "foreign-client"])
def test_mutual_tls_refuses_no_or_a_foreign_client_certificate(sb: SecureBroker, cert: str | None) -> None:
    try:
        s = _mtls(sb, cert)
    except (ssl.SSLError, ConnectionResetError):
        return  # refused during the handshake
    with s:  # TLS 1.3: the client learns of the refusal at its first read
        try:
            s.sendall(request_frame(3, 12, METADATA_ALL))
            assert read_frame_or_none(s) is None
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            pass


def test_mutual_tls_with_the_client_certificate_is_served(sb: SecureBroker) -> None:
    with _mtls(sb, "client") as s:
        s.sendall(request_frame(3, 12, METADATA_ALL))
        resp = read_frame_or_none(s)
        assert resp is not None
        assert papi.decode_response(3, 12, resp)[1].brokers[0].port == sb.ports["SSL"]


# ------------------------------------------------------------------ users and secrets


def test_users_cli_online_adds_lists_and_deletes_a_user_who_can_then_log_in_or_not(
        sb: SecureBroker, tmp_path: Path) -> None:
    cfg = tmp_path / "client.properties"
    cfg.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                   f"sasl.username={BOB[0]}\nsasl.password={BOB[1]}\nssl.ca.location={sb.pki.ca}\n")
    online = ["--bootstrap-server", sb.bootstrap("SASL_SSL"), "--client-config", str(cfg)]
    r = chronolog("users", "add", "--user", "carol", "--password", "carol-pw",
                  "--mechanism", "SCRAM-SHA-256", "--iterations", "8192", *online)
    assert r.returncode == 0, r.stderr
    r = chronolog("users", "add", "--user", "carol", "--password", "carol-pw",
                  "--mechanism", "SCRAM-SHA-512", *online)
    assert r.returncode == 0, r.stderr
    listed = chronolog("users", "list", *online)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "bob SCRAM-SHA-256 iterations=4096", "bob SCRAM-SHA-512 iterations=4096",
        "carol SCRAM-SHA-256 iterations=8192", "carol SCRAM-SHA-512 iterations=4096"]
    async def login() -> None:
        conn = await _connect(sb, "SASL_PLAINTEXT", _sec(
            sb, "SASL_PLAINTEXT", "SCRAM-SHA-256", ("carol", "carol-pw")))
        await conn.close()

    asyncio.run(login())
    r = chronolog("users", "delete", "--user", "carol", *online)  # both mechanisms
    assert r.returncode == 0, r.stderr
    assert "carol" not in chronolog("users", "list", *online).stdout
    with pytest.raises(KafkaError):
        asyncio.run(login())
    again = chronolog("users", "delete", "--user", "carol", "--mechanism", "SCRAM-SHA-256", *online)
    assert again.returncode == 1 and "RESOURCE_NOT_FOUND" in again.stderr


def test_describe_and_mirror_read_a_sasl_ssl_broker_with_their_client_configs(
        sb: SecureBroker, broker_factory: Any, tmp_path: Path) -> None:
    import json

    from confluent_kafka import Consumer, Producer, TopicPartition

    cfg = tmp_path / "client.properties"
    cfg.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                   f"sasl.username={BOB[0]}\nsasl.password={BOB[1]}\nssl.ca.location={sb.pki.ca}\n")
    topic = f"mirror-{uuid.uuid4().hex[:8]}"
    sent = [(f"k{i % 7}".encode(), f"v{i}".encode(), BASE_TS + 10 * i) for i in range(N)]
    p = Producer(_librdkafka_conf(sb, "SASL_SSL", "SCRAM-SHA-256", BOB))
    for key, value, ts in sent:
        p.produce(topic, value, key, partition=0, timestamp=ts)
    assert p.flush(30) == 0

    secured = ["--bootstrap-server", sb.bootstrap("SASL_SSL")]
    refused = chronolog("describe", "--topic", topic, *secured)
    assert refused.returncode == 1  # no client config: a plaintext request on a TLS port
    r = chronolog("describe", "--topic", topic, *secured, "--client-config", str(cfg), "--json")
    assert r.returncode == 0, r.stderr
    [part] = json.loads(r.stdout)["partitions"]
    assert (part["log_start_offset"], part["log_end_offset"]) == (0, N)
    assert (part["first_timestamp"], part["last_timestamp"]) == (sent[0][2], sent[-1][2])

    target = broker_factory()
    r = chronolog("mirror", "--source", sb.bootstrap("SASL_SSL"), "--source-client-config",
                  str(cfg), "--target", f"127.0.0.1:{target.port}", "--topics", topic)
    assert r.returncode == 0, r.stderr
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{target.port}", "group.id": "mirror-check",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[bytes, bytes, int]] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.key(), m.value(), m.timestamp()[1]))
    c.close()
    assert got == sent


def test_users_cli_offline_is_refused_while_the_broker_holds_the_data_dir(sb: SecureBroker) -> None:
    r = chronolog("users", "list", "--data-dir", str(sb.proc.data_dir))
    assert r.returncode == 1 and "in use by a running broker" in r.stderr


def test_secrets_are_null_and_sensitive_in_describe_configs_and_absent_from_logs(
        sb: SecureBroker) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient(_librdkafka_conf(sb, "SASL_SSL", "SCRAM-SHA-256", BOB))
    [fut] = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    configs = fut.result(timeout=15)
    jaas = configs["sasl.jaas.config"]
    assert jaas.value is None and jaas.is_sensitive
    assert configs["ssl.key.password"].is_sensitive
    assert configs["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert not configs["sasl.enabled.mechanisms"].is_sensitive
    log = sb.proc.log()
    for secret in (ALICE[1], BOB[1], "carol-pw", "wrong"):
        assert secret not in log
    stored = (sb.proc.data_dir / "__chronolog" / "scram-credentials.json").read_text()
    assert BOB[1] not in stored and "iterations=4096" in stored


async def test_scram_credential_apis_answer_kafkas_error_codes(sb: SecureBroker) -> None:
    conn = await _connect(sb, "PLAINTEXT", ClientSecurity())
    salt, salted = b"s" * 16, b"p" * 32
    try:
        resp = await conn.request(51, 0, {"deletions": [
            {"name": "ghost", "mechanism": 1},          # no such credential -> 91
            {"name": "", "mechanism": 1},               # empty name -> 93
        ], "upsertions": [
            {"name": "dup", "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted},
            {"name": "dup", "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted},
            {"name": "few", "mechanism": 2, "iterations": 4095, "salt": salt, "salted_password": salted},
            {"name": "mech", "mechanism": 9, "iterations": 4096, "salt": salt, "salted_password": salted},
            {"name": "fine", "mechanism": 2, "iterations": 16384, "salt": salt, "salted_password": salted},
        ]})
        assert {r.user: r.error_code for r in resp.results} == {
            "ghost": 91, "": 93, "dup": 92, "few": 93, "mech": 33, "fine": 0}
        desc = await conn.request(50, 0, {"users": [{"name": "fine"}, {"name": "ghost"},
                                                    {"name": "bob"}, {"name": "bob"}]})
        got = {r.user: (r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
               for r in desc.results}
        assert got == {"fine": (0, [(2, 16384)]), "ghost": (91, []), "bob": (92, [])}
        everyone = await conn.request(50, 0, {"users": None})
        assert "fine" in {r.user for r in everyone.results}
        gone = await conn.request(51, 0, {"deletions": [{"name": "fine", "mechanism": 2}],
                                          "upsertions": []})
        assert [r.error_code for r in gone.results] == [0]

        # Kafka's controller judges per user, not per (user, mechanism): a user altered
        # twice in one request is DUPLICATE_RESOURCE whatever the mechanisms, and none of
        # its changes is applied; a user's first error stands.
        twice = await conn.request(51, 0, {"deletions": [
            {"name": "ghost", "mechanism": 1},          # 91 first: the upsertion is not judged
        ], "upsertions": [
            {"name": "two", "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted},
            {"name": "two", "mechanism": 2, "iterations": 4096, "salt": salt, "salted_password": salted},
            {"name": "ghost", "mechanism": 1, "iterations": 4096, "salt": salt, "salted_password": salted},
            {"name": "many", "mechanism": 1, "iterations": 16385, "salt": salt, "salted_password": salted},
        ]})
        assert {r.user: (r.error_code, r.error_message) for r in twice.results} == {
            "ghost": (91, "Attempt to delete a user credential that does not exist"),
            "two": (92, "A user credential cannot be altered twice in the same request"),
            "many": (93, "Too many iterations")}
        desc = await conn.request(50, 0, {"users": [{"name": "two"}]})
        assert [(r.user, r.error_code) for r in desc.results] == [("two", 91)]
    finally:
        await conn.close()


def test_connection_limits_hold_across_listeners(tmp_path: Path) -> None:
    b = start_secure_broker(tmp_path, {"max.connections.per.ip": "2"})
    try:
        time.sleep(0.5)  # the readiness probe's connection must be gone from the count
        held = [socket.create_connection(("127.0.0.1", b.ports["SASL_PLAINTEXT"]), timeout=5),
                socket.create_connection(("127.0.0.1", b.ports["PLAINTEXT"]), timeout=5)]
        for s in held:  # both are served (ApiVersions needs no authentication)
            s.sendall(request_frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}))
            assert read_frame_or_none(s) is not None
        with socket.create_connection(("127.0.0.1", b.ports["PLAINTEXT"]), timeout=5) as third:
            assert closed_by_peer(third)
        for s in held:
            s.close()
        assert "max.connections.per.ip (2) reached" in b.proc.log()
    finally:
        b.proc.stop()
