"""The console's client settings, read from a properties file with Kafka's names.

Users keep a ``client.properties`` for kcat/librdkafka or the Java tools; the
console reads the same file (``--client-config FILE``). Invariants: a setting
the console uses is parsed with Kafka's name and unit (``request.timeout.ms`` is
milliseconds); security (``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL with ``ssl.*``/``sasl.*``) is validated by :class:`client.security.ClientSecurity`,
the same rules as ``chronolog users --client-config``; a security setting the client
cannot honour (an unknown ``ssl.*``/``sasl.*`` name, GSSAPI, a setting the chosen
protocol would ignore, a CA or key file that does not load) is an error naming it,
never silently ignored (that would send credentials' traffic in clear or fail later
with a confusing network error); any other Kafka setting is accepted and reported as
unused, so one file can serve several tools.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from client.security import ClientSecurity

__all__ = ["ClientSettings", "SettingsError", "parse_properties", "load_client_settings"]

_SECURITY_PREFIXES = ("ssl.", "sasl.")


class SettingsError(ValueError):
    """The properties file asks for something the console cannot do; the message says what."""


@dataclass(frozen=True)
class ClientSettings:
    bootstrap_servers: str | None = None
    client_id: str = "chronolog-console"
    request_timeout_ms: int = 30_000
    security: ClientSecurity = field(default_factory=ClientSecurity)
    unused: tuple[str, ...] = field(default=())


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` lines: ``k=v`` or ``k: v``, ``#``/``!`` comments, blank lines.

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


def client_settings(props: dict[str, str]) -> ClientSettings:
    """Validate ``props`` (Kafka names) into the settings the console's client uses."""
    security = _security(props)
    timeout = props.get("request.timeout.ms", "30000")
    try:
        timeout_ms = int(timeout)
    except ValueError:
        raise SettingsError(f"request.timeout.ms={timeout!r} is not an integer") from None
    if timeout_ms <= 0:
        raise SettingsError(f"request.timeout.ms={timeout_ms} must be > 0")
    used = {"security.protocol", "request.timeout.ms", "bootstrap.servers", "client.id"}
    return ClientSettings(
        bootstrap_servers=props.get("bootstrap.servers") or None,
        client_id=props.get("client.id") or "chronolog-console",
        request_timeout_ms=timeout_ms,
        security=security,
        unused=tuple(sorted(k for k in props if k not in used and not k.startswith(_SECURITY_PREFIXES))),
    )


def _security(props: dict[str, str]) -> ClientSecurity:
    """``security.protocol`` and the ``ssl.*``/``sasl.*`` settings, checked as far as
    can be without a broker: names, values, and that the CA/key files load."""
    names = sorted(k for k in props if k == "security.protocol" or k.startswith(_SECURITY_PREFIXES))
    try:
        sec = ClientSecurity.from_settings({k: props[k] for k in names})
    except ValueError as e:
        raise SettingsError(str(e)) from None
    ignored = [k for k in names
               if (k.startswith("ssl.") and not sec.uses_tls)
               or (k.startswith("sasl.") and not sec.uses_sasl)]
    if ignored:
        raise SettingsError(
            f"{', '.join(ignored)}: not used with security.protocol={sec.protocol} "
            "(SSL/SASL_SSL use ssl.*, SASL_PLAINTEXT/SASL_SSL use sasl.*)"
        )
    try:
        sec.ssl_context()
    except (OSError, ssl.SSLError) as e:  # a missing file, a bad PEM, a wrong ssl.key.password
        raise SettingsError(
            f"cannot load the TLS files (ssl.ca.location, ssl.certificate.location, "
            f"ssl.key.location, ssl.key.password): {e}"
        ) from None
    return sec


def load_client_settings(path: str | Path | None) -> ClientSettings:
    """Settings from ``path`` (None: the defaults)."""
    if path is None:
        return ClientSettings()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SettingsError(f"cannot read client config {path}: {e.strerror}") from None
    return client_settings(parse_properties(text))
