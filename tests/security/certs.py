"""Test PKI made with the ``openssl`` command: a CA, a broker certificate for
127.0.0.1/localhost, a client certificate, and a foreign CA with its own client."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

CLIENT_SUBJECT = "/C=US/ST=CA/O=Chronolog, Inc./OU=Tests/CN=client"
# Kafka's RFC 2253 form of CLIENT_SUBJECT: most specific first, ',' escaped.
CLIENT_PRINCIPAL = r"User:CN=client,OU=Tests,O=Chronolog\, Inc.,ST=CA,C=US"


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(d: Path, name: str) -> None:
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
         "-subj", f"/CN={name}", cwd=d)


def _leaf(d: Path, name: str, ca: str, subject: str, san: str | None) -> None:
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
         "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", ext.name, cwd=d)
    # Kafka's PEM key store: the PKCS#8 key, then the chain.
    (d / f"{name}-keystore.pem").write_text(
        (d / f"{name}.key").read_text() + (d / f"{name}.pem").read_text()
        + (d / f"{ca}.pem").read_text())


@dataclass
class Pki:
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)

    @property
    def ca(self) -> str:
        return self.path("ca.pem")

    @property
    def broker_keystore(self) -> str:
        return self.path("broker-keystore.pem")


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca")
    _ca(d, "foreign-ca")
    _leaf(d, "broker", "ca", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
    _leaf(d, "client", "ca", CLIENT_SUBJECT, None)
    _leaf(d, "foreign-client", "foreign-ca", "/CN=intruder", None)
    return Pki(d)
