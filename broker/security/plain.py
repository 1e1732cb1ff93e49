"""SASL/PLAIN (RFC 4616) with users from Kafka's JAAS setting.

Invariants (Kafka's ``PlainSaslServer``, ``PlainServerCallbackHandler``):
- A token is exactly ``authzid NUL user NUL password``; an empty user or password fails,
  and a non-empty authzid must equal the user (kafka-python and aiokafka send
  ``user NUL user NUL password``).
- Users come from ``listener.name.<l>.plain.sasl.jaas.config``, else ``sasl.jaas.config``:
  ``org.apache.kafka.common.security.plain.PlainLoginModule required user_NAME="pw" ...;``.
  Passwords are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import re
from typing import TYPE_CHECKING

from broker.config import LISTENER_PREFIX, ConfigError
from protocol.plain import parse_token
from protocol.scram import AuthenticationFailed

if TYPE_CHECKING:
    from broker.config import BrokerConfig

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_HEAD = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b")
_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """(login module class, options) of a one-module JAAS config value."""
    m = _HEAD.match(text)
    if m is None:
        raise ConfigError("sasl.jaas.config: expected '<LoginModule> required key=\"value\" ...;'")
    pos = m.end()
    options: dict[str, str] = {}
    while True:
        om = _OPTION.match(text, pos)
        if om is None:
            break
        value = om.group(2) if om.group(2) is not None else om.group(3)
        options[om.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = om.end()
    if text[pos:].strip() != ";":
        # The message names the position only: the text holds passwords.
        raise ConfigError(f"sasl.jaas.config: cannot parse at character {pos} "
                          "(one login module, options key=\"value\", ending with ';')")
    return m.group(1), options


def jaas_text(cfg: BrokerConfig, listener: str, mechanism: str) -> str | None:
    key = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if key in cfg.listener_overrides:
        return cfg.listener_overrides[key]
    return cfg.sasl_jaas_config


def jaas_users(cfg: BrokerConfig, listener: str) -> dict[str, str]:
    """user -> password of the PLAIN users of a listener."""
    text = jaas_text(cfg, listener, "PLAIN")
    if not text:
        return {}
    module, options = parse_jaas(text)
    if module != PLAIN_MODULE:
        raise ConfigError(f"listener {listener}: PLAIN needs {PLAIN_MODULE} in its "
                          f"sasl.jaas.config, got {module}")
    return {k[5:]: v for k, v in options.items() if k.startswith("user_")}


def authenticate(token: bytes, users: dict[str, str]) -> str:
    """The authenticated user of a PLAIN token; raises AuthenticationFailed."""
    authzid, user, password = parse_token(token)
    expected = users.get(user)
    # Compare against something even for an unknown user: no timing difference.
    ok = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
    if expected is None or not ok:
        raise AuthenticationFailed("Authentication failed: Invalid username or password")
    if authzid and authzid != user:
        raise AuthenticationFailed("Authentication failed: Client requested an authorization "
                                   "id that is different from username")
    return user
