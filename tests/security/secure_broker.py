"""One broker with every kind of listener, shared by the security tests of a module.

PLAINTEXT (127.0.0.1), SASL_SSL and SSL with required client certificates (``localhost``,
which the broker certificate names), SASL_PLAINTEXT (127.0.0.1). SASL offers PLAIN (user
alice, from the JAAS setting) and SCRAM-SHA-256/512 (user bob, created offline with
``chronolog users add --data-dir`` before the broker starts).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol import api as papi
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.kafka_socket import read_frame_or_none, request_frame
from tests.security.certs import Pki, make_pki

ALICE = ("alice", "alice-Secret-1")
BOB = ("bob", "bob-Secret-2")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'user_{ALICE[0]}="{ALICE[1]}";')
ROOT = Path(__file__).resolve().parents[2]


def chronolog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "client.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


@dataclass
class SecureBroker:
    proc: BrokerProcess
    pki: Pki
    ports: dict[str, int]

    def bootstrap(self, listener: str) -> str:
        host = "localhost" if listener in ("SASL_SSL", "SSL") else "127.0.0.1"
        return f"{host}:{self.ports[listener]}"


SCRAM_USERS = [(BOB, "SCRAM-SHA-256"), (BOB, "SCRAM-SHA-512")]


def start_secure_broker(tmp: Path, extra: dict[str, str] | None = None,
                        scram_users: list[tuple[tuple[str, str], str]] = SCRAM_USERS
                        ) -> SecureBroker:
    """``scram_users``: ((user, password), mechanism) created offline before the start."""
    pki = make_pki(tmp / "pki")
    data = tmp / "data"
    data.mkdir()
    for (user, password), mech in scram_users:
        r = chronolog("users", "add", "--data-dir", str(data), "--user", user,
                      "--password", password, "--mechanism", mech)
        assert r.returncode == 0, r.stderr
    ports = {name: free_port_number() for name in ("PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT", "SSL")}
    overrides = {
        "listeners": (f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']},"
                      f"SASL_SSL://localhost:{ports['SASL_SSL']},"
                      f"SASL_PLAINTEXT://127.0.0.1:{ports['SASL_PLAINTEXT']},"
                      f"SSL://localhost:{ports['SSL']}"),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.broker_keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
        "group.initial.rebalance.delay.ms": "0",
        **(extra or {}),
    }
    proc = BrokerProcess(data, ports["PLAINTEXT"], overrides).start()
    return SecureBroker(proc, pki, ports)


METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}


def sasl_socket(sb: SecureBroker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", sb.ports["SASL_PLAINTEXT"]), timeout=5)


def handshake(s: socket.socket, mechanism: str, version: int = 1) -> Any:
    """Send SaslHandshake and return its decoded answer."""
    s.sendall(request_frame(17, version, {"mechanism": mechanism}))
    resp = read_frame_or_none(s)
    assert resp is not None
    return papi.decode_response(17, version, resp)[1]


def plain_login(s: socket.socket, user: tuple[str, str], correlation_id: int = 2) -> Any:
    """SaslHandshake v1 + one SaslAuthenticate v1 with a PLAIN token; the decoded answer."""
    handshake(s, "PLAIN")
    token = b"\x00" + user[0].encode() + b"\x00" + user[1].encode()
    s.sendall(request_frame(36, 1, {"auth_bytes": token}, correlation_id))
    resp = read_frame_or_none(s)
    assert resp is not None
    return papi.decode_response(36, 1, resp)[1]
