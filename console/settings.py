"""The console's client settings, read from a properties file with Kafka's names.

Users keep a ``client.properties`` for kcat/librdkafka or the Java tools; the
console reads the same file (``--client-config FILE``). Invariants: a setting
the console uses is parsed with Kafka's name and unit (``request.timeout.ms`` is
milliseconds); a security setting the client cannot honour (TLS, SASL) is an
error naming it, never silently ignored (that would send credentials' traffic in
clear or fail later with a confusing network error); any other Kafka setting is
accepted and reported as unused, so one file can serve several tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ClientSettings", "SettingsError", "parse_properties", "load_client_settings"]

#: security.protocol values and whether Chronolog's client can speak them.
_SUPPORTED_PROTOCOLS = {"PLAINTEXT"}
_SECURITY_PREFIXES = ("ssl.", "sasl.")


class SettingsError(ValueError):
    """The properties file asks for something the console cannot do; the message says what."""


@dataclass(frozen=True)
class ClientSettings:
    bootstrap_servers: str | None = None
    client_id: str = "chronolog-console"
    request_timeout_ms: int = 30_000
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
    proto = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if proto not in _SUPPORTED_PROTOCOLS:
        raise SettingsError(
            f"security.protocol={proto} is not supported: Chronolog's client speaks PLAINTEXT only"
        )
    secure = sorted(k for k in props if k.startswith(_SECURITY_PREFIXES))
    if secure:
        raise SettingsError(
            f"{', '.join(secure)}: TLS/SASL settings are not supported by Chronolog's client "
            "(security.protocol must be PLAINTEXT)"
        )
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
        unused=tuple(sorted(k for k in props if k not in used)),
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
