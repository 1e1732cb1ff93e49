"""DescribeUserScramCredentials (key 50): version 0, flexible (KIP-554).

Invariant: a null or empty Users list means every user; mechanisms are 1 (SCRAM-SHA-256)
and 2 (SCRAM-SHA-512).
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "DescribeUserScramCredentialsRequest",
    F("users", arr(F("name", "string")), nullable="0+", default=None),
)

RESPONSE = message(
    "DescribeUserScramCredentialsResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("results", arr(
        F("user", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("credential_infos", arr(
            F("mechanism", "int8"),
            F("iterations", "int32"),
        )),
    )),
)
