"""Kafka's ``security.protocol`` values, shared by the broker's listeners and the client."""

from __future__ import annotations

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def is_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def is_sasl(protocol: str) -> bool:
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")
