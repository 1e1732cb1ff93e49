"""Kafka's listener settings: ``listeners``, ``listener.security.protocol.map`` and
``advertised.listeners``.

Invariants (Kafka's ``SocketServerConfigs`` / ``KafkaConfig``):
- Listener names are unique (case-insensitively) and so are their ports (port 0 excepted);
  every name maps to one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
- An advertised listener names a configured listener and is never 0.0.0.0; a listener
  not named in ``advertised.listeners`` advertises its own host (a wildcard shown as
  127.0.0.1) and its bound port.
- A TLS listener has a PEM key store; a SASL listener offers only mechanisms we implement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.config import ConfigError, parse_listener_items
from protocol.security import PROTOCOLS, is_sasl, is_tls

if TYPE_CHECKING:
    from broker.config import BrokerConfig

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_WILDCARDS = ("", "0.0.0.0", "::")


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return is_tls(self.protocol)

    @property
    def sasl(self) -> bool:
        return is_sasl(self.protocol)


def protocol_map(cfg: BrokerConfig) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (v.strip() for v in cfg.listener_security_protocol_map.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or proto not in PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: expected NAME:PROTOCOL with a "
                              f"protocol in {', '.join(PROTOCOLS)}, got {item!r}")
        out[name.strip().upper()] = proto
    return out


def listeners(cfg: BrokerConfig) -> list[Listener]:
    """Every configured listener, in the order given."""
    pmap = protocol_map(cfg)
    out: list[Listener] = []
    for name, host, port in parse_listener_items(cfg.listeners):
        proto = pmap.get(name)
        if proto is None:
            raise ConfigError(f"listeners: no security protocol for listener {name} "
                              f"(add it to listener.security.protocol.map)")
        out.append(Listener(name, proto, host, port))
    if not out:
        raise ConfigError("listeners: no listener given")
    names = [x.name for x in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"listeners: each listener must have a distinct name, got {cfg.listeners!r}")
    ports = [x.port for x in out if x.port]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"listeners: each listener must have a distinct port, got {cfg.listeners!r}")
    return out


def advertised(cfg: BrokerConfig) -> dict[str, tuple[str, int]]:
    """Listener name -> advertised (host, port), for those named in advertised.listeners."""
    known = {x.name for x in listeners(cfg)}
    out: dict[str, tuple[str, int]] = {}
    for name, host, port in parse_listener_items(cfg.advertised_listeners, "advertised.listeners"):
        if name not in known:
            raise ConfigError(f"advertised.listeners: {name} is not one of the listeners")
        if host == "0.0.0.0":
            raise ConfigError("advertised.listeners: 0.0.0.0 is not a valid advertised address")
        out[name] = (host, port)
    return out


def advertised_address(cfg: BrokerConfig, listener: str | None,
                       bound_port: int | None) -> tuple[str, int]:
    """The (host, port) a client of ``listener`` (None: the first) is told to use."""
    all_ = listeners(cfg)
    chosen = next((x for x in all_ if x.name == (listener or "").upper()), all_[0])
    adv = advertised(cfg).get(chosen.name)
    if adv is not None:
        return adv
    port = chosen.port
    if port == 0 and bound_port is not None:
        port = bound_port
    return ("127.0.0.1" if chosen.host in _WILDCARDS else chosen.host), port


def mechanisms(cfg: BrokerConfig, listener: str) -> list[str]:
    """The SASL mechanisms a listener offers (``sasl.enabled.mechanisms``, prefixable)."""
    raw = str(cfg.for_listener(listener, "sasl.enabled.mechanisms") or "")
    return [m.strip().upper() for m in raw.split(",") if m.strip()]


def check_listener_settings(cfg: BrokerConfig) -> None:
    """Raise ConfigError unless every listener can be served as configured."""
    from broker.security import tls
    from broker.security.plain import jaas_users

    all_ = listeners(cfg)
    advertised(cfg)
    if cfg.ssl_principal_mapping_rules.strip() != "DEFAULT":
        raise ConfigError("ssl.principal.mapping.rules: only DEFAULT is supported")
    for lst in all_:
        if lst.tls:
            tls.server_context(cfg, lst.name, lst.protocol)
        if lst.sasl:
            mechs = mechanisms(cfg, lst.name)
            bad = [m for m in mechs if m not in MECHANISMS]
            if bad or not mechs:
                raise ConfigError(
                    f"listener {lst.name}: sasl.enabled.mechanisms must list some of "
                    f"{', '.join(MECHANISMS)} (got {', '.join(mechs) or 'none'}; GSSAPI and "
                    f"OAUTHBEARER are not implemented)")
            if "PLAIN" in mechs:
                jaas_users(cfg, lst.name)  # raises for a malformed JAAS setting
