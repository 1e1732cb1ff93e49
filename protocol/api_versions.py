"""ApiVersions (key 18): the first request of every client; versions 0-4, flexible from 3.

Invariant: the response header is always v0, even for flexible versions (clients
must read it before they know which version the broker speaks).
"""

from __future__ import annotations

import re

from protocol.schema import F, arr, message

REQUEST = message(
    "ApiVersionsRequest",
    F("client_software_name", "string", "3+"),
    F("client_software_version", "string", "3+"),
)

RESPONSE = message(
    "ApiVersionsResponse",
    F("error_code", "int16"),
    F("api_keys", arr(
        F("api_key", "int16"),
        F("min_version", "int16"),
        F("max_version", "int16"),
    )),
    F("throttle_time_ms", "int32", "1+"),
    F("supported_features", arr(
        F("name", "string"),
        F("min_version", "int16"),
        F("max_version", "int16"),
    ), "3+", tag=0),
    F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    F("finalized_features", arr(
        F("name", "string"),
        F("max_version_level", "int16"),
        F("min_version_level", "int16"),
    ), "3+", tag=2),
    F("zk_migration_ready", "bool", "3+", tag=3),
)

# KIP-511: v3+ clients name their software; anything else is INVALID_REQUEST (42).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def valid_client_software(name: str, version: str) -> bool:
    """Whether a v3+ request's ClientSoftwareName/Version pass Kafka's validation."""
    return _SOFTWARE.fullmatch(name) is not None and _SOFTWARE.fullmatch(version) is not None
