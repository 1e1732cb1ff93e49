"""The consumer embedded protocol: what "consumer" groups carry in JoinGroup member
metadata and SyncGroup assignments (ConsumerProtocolSubscription/Assignment.json).

Not an API: each blob is an int16 version followed by that version's fields, never
flexible. Versions 0-3 are declared; a newer blob is read with the newest schema
here and its extra trailing fields are ignored, as Kafka's own reader does.

Invariant: OwnedPartitions from v1 (KIP-429), GenerationId from v2, RackId from v3;
the assignment has the same fields in every version.
"""

from __future__ import annotations

import struct
from typing import Any

from protocol.schema import F, arr, message

MAX_VERSION = 3

SUBSCRIPTION = message(
    "ConsumerProtocolSubscription",
    F("topics", "[]string"),
    F("user_data", "bytes", nullable="0+", default=None),
    F("owned_partitions", arr(
        F("topic", "string"),
        F("partitions", "[]int32"),
    ), "1+"),
    F("generation_id", "int32", "2+", default=-1),
    F("rack_id", "string", "3+", nullable="3+", default=None),
)

ASSIGNMENT = message(
    "ConsumerProtocolAssignment",
    F("assigned_partitions", arr(
        F("topic", "string"),
        F("partitions", "[]int32"),
    )),
    F("user_data", "bytes", nullable="0+", default=None),
)


def _decode(kind: Any, blob: bytes) -> Any:
    if len(blob) < 2:
        raise ValueError(f"{kind.name}: {len(blob)} bytes, too short for a version")
    (version,) = struct.unpack_from(">h", blob)
    if version < 0:
        raise ValueError(f"{kind.name}: negative version {version}")
    return kind.codec(min(version, MAX_VERSION), False).parse(blob[2:])


def decode_assignment(blob: bytes) -> dict[str, list[int]]:
    """Topic -> sorted partitions of an assignment blob; empty bytes mean no assignment."""
    if not blob:
        return {}
    body = _decode(ASSIGNMENT, blob)
    out: dict[str, list[int]] = {}
    for tp in body.assigned_partitions:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return {t: sorted(ps) for t, ps in out.items()}


def decode_subscription(blob: bytes) -> list[str]:
    """The subscribed topic names of a member's metadata blob."""
    if not blob:
        return []
    return list(_decode(SUBSCRIPTION, blob).topics)


def encode_assignment(assignment: dict[str, list[int]], version: int = 0) -> bytes:
    """An assignment blob (tests and tools build them; the broker only relays them)."""
    body = {"assigned_partitions": [{"topic": t, "partitions": ps} for t, ps in assignment.items()],
            "user_data": None}
    return struct.pack(">h", version) + ASSIGNMENT.codec(version, False).build(body)


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    body = {"topics": topics, "user_data": None, "owned_partitions": [], "generation_id": -1,
            "rack_id": None}
    return struct.pack(">h", version) + SUBSCRIPTION.codec(version, False).build(body)
