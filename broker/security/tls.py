"""TLS for SSL and SASL_SSL listeners: Kafka's ``ssl.*`` settings to an ``ssl.SSLContext``,
and the principal of a client certificate.

Invariants (Kafka's ``DefaultSslEngineFactory``, ``ChannelBuilders``,
``DefaultKafkaPrincipalBuilder``):
- Key and trust stores are PEM (KIP-651): a file with the PKCS#8 key and the chain, or
  both inline; JKS/PKCS12 are refused with a message. Inline material is written to a
  private temporary file only for the time ``load_cert_chain`` reads it.
- ``ssl.client.auth``: none / requested (verified if sent) / required. On SASL_SSL only
  the listener-prefixed form counts; the broker-wide one is ignored, as Kafka forces none.
- A TLS client's principal is ``User:`` + its subject DN in RFC 2253 form (most specific
  RDN first, as Java's ``X500Principal.getName()`` prints it); no certificate means
  ``User:ANONYMOUS``.
- The record layer itself (``ssl.SSLObject`` over memory buffers) is
  ``protocol.tls.TlsSession``, shared with the bundled client.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import TYPE_CHECKING, Any

from broker.config import LISTENER_PREFIX, ConfigError

if TYPE_CHECKING:
    from broker.config import BrokerConfig

ANONYMOUS = "User:ANONYMOUS"
_VERSIONS = {
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}
# Python's names for the attribute types Java's RFC 2253 output spells as keywords.
_KEYWORDS = {
    "commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}
# Attribute types Java prints as OID=#<hex DER> (tag: IA5String for these).
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16)}


def _get(cfg: BrokerConfig, listener: str, name: str) -> Any:
    return cfg.for_listener(listener, name)


def _client_auth(cfg: BrokerConfig, listener: str, protocol: str) -> str:
    key = f"{LISTENER_PREFIX}{listener.lower()}.ssl.client.auth"
    if key in cfg.listener_overrides:
        value = cfg.listener_overrides[key].lower()
    elif protocol == "SASL_SSL":
        value = "none"
    else:
        value = cfg.ssl_client_auth
    if value not in ("none", "requested", "required"):
        raise ConfigError(f"{key}: must be none, requested or required, got {value!r}")
    return value


def _pem(text: str) -> str:
    """Inline PEM as Kafka takes it (possibly on one line): restore the line breaks."""
    return text.replace("\\n", "\n")


def server_context(cfg: BrokerConfig, listener: str, protocol: str) -> ssl.SSLContext:
    """The server-side context of one TLS listener; ConfigError names the bad setting."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if str(_get(cfg, listener, "ssl.keystore.type")).upper() != "PEM":
        raise ConfigError(f"listener {listener}: ssl.keystore.type must be PEM "
                          "(JKS and PKCS12 key stores are not supported)")
    location = str(_get(cfg, listener, "ssl.keystore.location") or "")
    key = _get(cfg, listener, "ssl.keystore.key")
    chain = str(_get(cfg, listener, "ssl.keystore.certificate.chain") or "")
    password = _get(cfg, listener, "ssl.key.password")
    try:
        if location:
            if key or chain:
                raise ConfigError(f"listener {listener}: give ssl.keystore.location or "
                                  "ssl.keystore.key/.certificate.chain, not both")
            ctx.load_cert_chain(location, password=password or None)
        elif key and chain:
            with tempfile.TemporaryDirectory(prefix="chronolog-tls-") as tmp:
                path = os.path.join(tmp, "keystore.pem")
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(_pem(str(key)).strip() + "\n" + _pem(chain).strip() + "\n")
                ctx.load_cert_chain(path, password=password or None)
        else:
            raise ConfigError(f"listener {listener} ({protocol}) needs a key store: "
                              "ssl.keystore.location, or ssl.keystore.key and "
                              "ssl.keystore.certificate.chain")
    except (ssl.SSLError, OSError) as exc:
        # The message never carries the key or its password.
        raise ConfigError(f"listener {listener}: cannot load the key store: "
                          f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    auth = _client_auth(cfg, listener, protocol)
    trust_loc = str(_get(cfg, listener, "ssl.truststore.location") or "")
    trust_pem = str(_get(cfg, listener, "ssl.truststore.certificates") or "")
    if trust_loc or trust_pem:
        if str(_get(cfg, listener, "ssl.truststore.type")).upper() != "PEM":
            raise ConfigError(f"listener {listener}: ssl.truststore.type must be PEM")
        try:
            if trust_loc:
                ctx.load_verify_locations(cafile=trust_loc)
            else:
                ctx.load_verify_locations(cadata=_pem(trust_pem))
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"listener {listener}: cannot load the trust store: {exc}") from None
    elif auth != "none":
        raise ConfigError(f"listener {listener}: ssl.client.auth={auth} needs a trust store "
                          "(ssl.truststore.location)")
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                       "required": ssl.CERT_REQUIRED}[auth]
    versions = []
    for item in str(_get(cfg, listener, "ssl.enabled.protocols")).split(","):
        v = _VERSIONS.get(item.strip().upper())
        if v is None:
            raise ConfigError(f"listener {listener}: ssl.enabled.protocols: {item.strip()!r} "
                              "is not one of TLSv1.2, TLSv1.3")
        versions.append(v)
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)
    ciphers = str(_get(cfg, listener, "ssl.cipher.suites") or "")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",") if c.strip()))
        except ssl.SSLError:
            raise ConfigError(f"listener {listener}: ssl.cipher.suites: no usable cipher "
                              f"in {ciphers!r}") from None
    return ctx


def _escape(value: str) -> str:
    """RFC 2253 escaping of an attribute value."""
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(tag: int, value: str) -> str:
    data = value.encode()
    if len(data) < 128:
        head = bytes([tag, len(data)])
    else:
        n = (len(data).bit_length() + 7) // 8
        head = bytes([tag, 0x80 | n]) + len(data).to_bytes(n, "big")
    return "#" + (head + data).hex()


def distinguished_name(subject: Any) -> str:
    """RFC 2253 text of ``SSLSocket.getpeercert()['subject']`` (RDNs in certificate
    order; multi-valued RDNs joined with '+')."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attr, value in rdn:
            if attr in _KEYWORDS:
                parts.append(f"{_KEYWORDS[attr]}={_escape(value)}")
            elif attr in _OIDS:
                oid, tag = _OIDS[attr]
                parts.append(f"{oid}={_der_hex(tag, value)}")
            else:
                parts.append(f"{attr}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def principal(peercert: Any) -> str:
    """Kafka's default principal for a TLS client (``User:ANONYMOUS`` without a cert)."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    return "User:" + distinguished_name(peercert["subject"])
