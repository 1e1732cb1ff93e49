"""docs/security.md's examples run as written (paths and ports substituted): the
server.properties starts a broker, the offline and online ``chronolog users`` commands
work with the documented client config, and the documented PLAIN user logs in."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

from client.security import ClientSecurity, open_connection
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.security.certs import make_pki
from tests.security.secure_broker import ROOT, chronolog

DOC = ROOT / "docs" / "security.md"


def _block(marker: str) -> str:
    m = re.search(re.escape(marker) + r"\s*\n```\w+\n(.*?)```", DOC.read_text(), re.S)
    assert m is not None, marker
    return m.group(1)


def test_documented_server_and_client_configs_and_users_commands_work(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    data = tmp_path / "data"
    ports = {p: str(free_port_number()) for p in ("9092", "9093", "9094")}
    client_file = tmp_path / "admin.properties"

    def subst(text: str) -> str:
        text = text.replace("/etc/chronolog/broker-keystore.pem", pki.broker_keystore)
        text = text.replace("/etc/chronolog/ca.pem", pki.ca)
        text = text.replace("/var/lib/chronolog", str(data))
        text = text.replace("admin.properties", str(client_file))
        return re.sub(r":(909[234])\b", lambda m: ":" + ports[m.group(1)], text)

    server = dict(line.split("=", 1) for line in subst(_block("<!-- security-example: server -->")).splitlines())
    client_file.write_text(subst(_block("<!-- security-example: client -->")))
    add, listing = subst(_block("runs it -->")).strip().splitlines()
    r = chronolog(*shlex.split(add)[1:])
    assert r.returncode == 0, r.stderr
    b = BrokerProcess(data, int(ports["9092"]), server).start()
    try:
        r = chronolog(*shlex.split(listing)[1:])
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == ["admin SCRAM-SHA-512 iterations=4096"]

        async def plain_login() -> None:
            sec = ClientSecurity(protocol="SASL_SSL", mechanism="PLAIN", username="alice",
                                 password="alice-secret", ca_location=pki.ca)
            conn = await open_connection("localhost", int(ports["9093"]), sec, client_id="doc",
                                         request_timeout=10)
            await conn.close()

        asyncio.run(plain_login())
    finally:
        b.stop()
