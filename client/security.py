"""Client-side security for the bundled client and the CLI: TLS and SASL (PLAIN, SCRAM),
configured with librdkafka's names.

Invariants:
- Settings are librdkafka's: ``security.protocol`` (plaintext, ssl, sasl_plaintext,
  sasl_ssl; any case), ``sasl.mechanism(s)``, ``sasl.username``, ``sasl.password``,
  ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
  ``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (https = verify the
  host name, the default; none = don't). An unknown ``ssl.*``/``sasl.*`` name, a value
  outside these, and (in a whole properties file, :meth:`ClientSecurity.from_properties`)
  a setting the protocol would ignore or a TLS file that does not load are errors, not
  ignored; a properties file's other settings (``bootstrap.servers``, ...) are not
  looked at.
- SASL runs right after connecting: SaslHandshake v1, then SaslAuthenticate v1 rounds;
  a refusal raises KafkaError(SASL_AUTHENTICATION_FAILED or the broker's code).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from client.connection import IDLE_POLL_US, BrokerConnection
from protocol import plain
from protocol.errors import ErrorCode, KafkaError
from protocol.scram import MECHANISMS, AuthenticationFailed, ScramClient
from protocol.security import PROTOCOLS, is_sasl, is_tls

KNOWN = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm", "client.id",
})
SECURITY_PREFIXES = ("ssl.", "sasl.")
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


@dataclass
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = field(default="", repr=False)
    ca_location: str = ""
    certificate_location: str = ""
    key_location: str = ""
    key_password: str | None = field(default=None, repr=False)
    verify_hostname: bool = True

    @classmethod
    def from_settings(cls, settings: dict[str, str]) -> ClientSecurity:
        unknown = sorted(set(settings) - KNOWN)
        if unknown:
            raise ValueError(f"unknown client security setting(s): {', '.join(unknown)} "
                             f"(supported: {', '.join(sorted(KNOWN))})")
        proto = settings.get("security.protocol", "plaintext").strip().upper()
        if proto not in PROTOCOLS:
            raise ValueError(f"security.protocol={proto} is not one of {', '.join(PROTOCOLS)}")
        mech = (settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "PLAIN").upper()
        if mech != "PLAIN" and mech not in MECHANISMS:
            raise ValueError(f"sasl.mechanism {mech} is not supported (PLAIN, SCRAM-SHA-256/512)")
        # librdkafka: https or none; Java: https or empty (= none). Anything else is a typo
        # that must not silently turn host name checking off (or on).
        algorithm = settings.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if algorithm not in ("https", "none", ""):
            raise ValueError(f"ssl.endpoint.identification.algorithm={algorithm} is not "
                             "https or none")
        if is_sasl(proto) and not settings.get("sasl.username"):
            raise ValueError(f"security.protocol={proto} needs sasl.username (and sasl.password)")
        return cls(
            protocol=proto, mechanism=mech,
            username=settings.get("sasl.username", ""),
            password=settings.get("sasl.password", ""),
            ca_location=settings.get("ssl.ca.location", ""),
            certificate_location=settings.get("ssl.certificate.location", ""),
            key_location=settings.get("ssl.key.location", ""),
            key_password=settings.get("ssl.key.password"),
            verify_hostname=algorithm == "https",
        )

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> ClientSecurity:
        """The security of a whole client properties file (other settings are not looked
        at), checked as far as can be without a broker: names and values as
        :meth:`from_settings`, no ``ssl.*``/``sasl.*`` setting the protocol would ignore
        (a forgotten ``security.protocol`` would otherwise send nothing of it), and
        CA/certificate/key files that load."""
        names = sorted(k for k in props if k == "security.protocol" or k.startswith(SECURITY_PREFIXES))
        sec = cls.from_settings({k: props[k] for k in names})
        ignored = [k for k in names
                   if (k.startswith("ssl.") and not is_tls(sec.protocol))
                   or (k.startswith("sasl.") and not is_sasl(sec.protocol))]
        if ignored:
            raise ValueError(
                f"{', '.join(ignored)}: not used with security.protocol={sec.protocol} "
                "(SSL/SASL_SSL use ssl.*, SASL_PLAINTEXT/SASL_SSL use sasl.*)"
            )
        try:
            sec.ssl_context()
        except OSError as e:  # a missing file, a bad PEM, a wrong ssl.key.password (SSLError)
            raise ValueError(
                "cannot load the TLS files (ssl.ca.location, ssl.certificate.location, "
                f"ssl.key.location, ssl.key.password): {e}"
            ) from None
        return sec

    def ssl_context(self) -> ssl.SSLContext | None:
        if not is_tls(self.protocol):
            return None
        ctx = ssl.create_default_context(cafile=self.ca_location or None)
        ctx.check_hostname = self.verify_hostname
        if self.certificate_location:
            ctx.load_cert_chain(self.certificate_location, self.key_location or None,
                                password=self.key_password)
        return ctx


def parse_properties(text: str) -> dict[str, str]:
    """A client properties file as Kafka's tools read it (librdkafka's ``k=v`` lines are a
    subset): Java ``.properties`` lines, ``k=v`` or ``k: v``, ``#``/``!`` comments, blank lines.

    Continuation lines (a trailing backslash) are joined, as Java does.
    """
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            key, value = line, ""
        else:
            key, value = line[:cut], line[cut + 1 :]
        out[key.strip()] = value.strip()
    if pending:
        out[pending.strip()] = ""
    return out


def read_client_config(path: str | Path) -> dict[str, str]:
    """:func:`parse_properties` of the file at ``path``; an unreadable file is a ValueError."""
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"cannot read client config {path}: {e.strerror}") from None


async def _token(conn: BrokerConnection, token: bytes) -> bytes:
    resp = await conn.request(SASL_AUTHENTICATE, 1, {"auth_bytes": token})
    if resp.error_code:
        raise KafkaError(ErrorCode(resp.error_code), resp.error_message or "")
    return bytes(resp.auth_bytes)


async def authenticate(conn: BrokerConnection, sec: ClientSecurity) -> None:
    """SASL on a fresh connection (KIP-152 framing)."""
    resp = await conn.request(SASL_HANDSHAKE, 1, {"mechanism": sec.mechanism})
    if resp.error_code:
        raise KafkaError(ErrorCode(resp.error_code),
                         f"broker offers {', '.join(resp.mechanisms)}, not {sec.mechanism}")
    if sec.mechanism == "PLAIN":
        await _token(conn, plain.token(sec.username, sec.password))
        return
    client = ScramClient(sec.mechanism, sec.username, sec.password)
    server_first = await _token(conn, client.first())
    server_final = await _token(conn, client.final(server_first))
    try:
        client.verify(server_final)
    except AuthenticationFailed as exc:
        raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None


async def open_connection(host: str, port: int, sec: ClientSecurity, *, client_id: str,
                          request_timeout: float,
                          idle_poll_us: int = IDLE_POLL_US) -> BrokerConnection:
    """A connection with TLS and SASL done as ``sec`` says."""
    conn = await BrokerConnection.open(host, port, client_id=client_id,
                                       request_timeout=request_timeout, ssl=sec.ssl_context(),
                                       idle_poll_us=idle_poll_us)
    if is_sasl(sec.protocol):
        try:
            await authenticate(conn, sec)
        except BaseException:
            await conn.close()
            raise
    return conn


def describe(sec: ClientSecurity) -> dict[str, Any]:
    """What may be printed about the settings (never the password)."""
    return {"security.protocol": sec.protocol, "sasl.mechanism": sec.mechanism,
            "sasl.username": sec.username, "ssl.ca.location": sec.ca_location}
