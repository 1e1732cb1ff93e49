"""Sub-structures that recur with one meaning across messages (Kafka's ``commonStructs``).

Kafka's JSON specs share a struct between messages by naming it once
(``LeaderIdAndEpoch``, ``NodeEndpoint``); these are the same idea for the
declarations here: each is exactly the fields it replaces, so a message that uses
one is the same message on the wire (``tests/protocol/test_generated.py`` holds
the generated classes to that).

Invariant: a nested struct (``arr``/``obj``) is built afresh by a function on
every use, never shared: the generated class of a nested struct is named after
its place in its message (``codegen.struct_names``), which needs one object per
place.
"""

from __future__ import annotations

from protocol.schema import F, Field, StructType, arr, obj

#: A per-partition result: the partition and its error (``OffsetCommitResponsePartition`` & co.).
PARTITION_ERROR = (F("partition_index", "int32"), F("error_code", "int16"))

#: The error of a result, with Kafka's optional message.
ERROR = (F("error_code", "int16"), F("error_message", "string", nullable="0+"))

#: A classic-group member in its generation, as Heartbeat and SyncGroup name it
#: (KIP-345 added the static member's id to both in v3).
GENERATION_MEMBER = (
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
)

#: A config resource (``ConfigResource``: broker, topic, logger … and its name).
RESOURCE = (F("resource_type", "int8"), F("resource_name", "string"))


def topic_partitions(*partition: Field, versions: str = "0+", nullable: str | None = None) -> Field:
    """``topics: [{name, partitions: [{partition…}]}]``, Kafka's topic → partitions nesting."""
    return F("topics", arr(
        F("name", "string"),
        F("partitions", arr(*partition)),
    ), versions, nullable=nullable)


def partitions_of_topic() -> StructType:
    """``[{topic, partitions: [int32]}]``: some partitions of each topic, by name and index."""
    return arr(
        F("topic", "string"),
        F("partitions", "[]int32"),
    )


def leader_id_and_epoch() -> StructType:
    """``LeaderIdAndEpoch`` (KIP-951): the leader a client should go to instead."""
    return obj(
        F("leader_id", "int32", default=-1),
        F("leader_epoch", "int32", default=-1),
    )


def node_endpoints(versions: str) -> Field:
    """``NodeEndpoints`` (KIP-951, a tagged field): where the leaders named in ``current_leader`` listen."""
    return F("node_endpoints", arr(
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", nullable=versions, default=None),
    ), versions, tag=0)
