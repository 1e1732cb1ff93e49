"""AlterUserScramCredentials (key 51): version 0, flexible (KIP-554).

Invariant: the password never travels: upsertions carry the salt and the salted password.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

REQUEST = message(
    "AlterUserScramCredentialsRequest",
    F("deletions", arr(
        F("name", "string"),
        F("mechanism", "int8"),
    )),
    F("upsertions", arr(
        F("name", "string"),
        F("mechanism", "int8"),
        F("iterations", "int32"),
        F("salt", "bytes"),
        F("salted_password", "bytes"),
    )),
)

RESPONSE = message(
    "AlterUserScramCredentialsResponse",
    F("throttle_time_ms", "int32"),
    F("results", arr(
        F("user", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    )),
)
