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

from dataclasses import dataclass, field
from pathlib import Path

from client.security import SECURITY_PREFIXES, ClientSecurity, parse_properties

__all__ = ["ClientSettings", "SettingsError", "parse_properties", "load_client_settings"]


class SettingsError(ValueError):
    """The properties file asks for something the console cannot do; the message says what."""


@dataclass(frozen=True)
class ClientSettings:
    bootstrap_servers: str | None = None
    client_id: str = "chronolog-console"
    request_timeout_ms: int = 30_000
    security: ClientSecurity = field(default_factory=ClientSecurity)
    unused: tuple[str, ...] = field(default=())


def client_settings(props: dict[str, str]) -> ClientSettings:
    """Validate ``props`` (Kafka names) into the settings the console's client uses."""
    try:
        security = ClientSecurity.from_properties(props)
    except ValueError as e:
        raise SettingsError(str(e)) from None
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
        unused=tuple(sorted(k for k in props if k not in used and not k.startswith(SECURITY_PREFIXES))),
    )


def load_client_settings(path: str | Path | None) -> ClientSettings:
    """Settings from ``path`` (None: the defaults)."""
    if path is None:
        return ClientSettings()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SettingsError(f"cannot read client config {path}: {e.strerror}") from None
    return client_settings(parse_properties(text))
