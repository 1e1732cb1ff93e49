"""The bucket layout and each partition's manifest: what the tier holds, for every reader.

Layout under the store's prefix (Kafka's remote file set, one directory per partition)::

    topics/<topic>/topic.json                        TopicManifest: id, partitions, configs
    topics/<topic>/<partition>/manifest.json         PartitionManifest
    topics/<topic>/<partition>/<base:020d>-<id>.log  and .index .timeindex .txnindex
                                                     .snapshot .leader_epoch_checkpoint .zonemap

The broker (the partition's only writer), read replicas and Spark all plan from the
manifest; none of them lists the bucket to find data.

Invariants:
- a segment's files are written before the manifest that says COPY_SEGMENT_FINISHED and
  deleted only after one that says DELETE_SEGMENT_STARTED (its records are then below
  ``log_start_offset``); readers use only COPY_SEGMENT_FINISHED segments, and only the
  offsets in [log_start_offset, end_offset];
- finished segments are ordered by base offset and do not overlap;
  ``end_offset`` is the segment's last offset (inclusive), ``next_offset`` the base of
  what follows it in the log;
- ``generation`` grows by one with every manifest written, so a reader can tell a
  newer manifest from the one it holds.
"""

from __future__ import annotations

import enum

import msgspec

FORMAT_VERSION = 1
FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot",
                 ".leader_epoch_checkpoint", ".zonemap")


class SegmentState(enum.IntEnum):
    """Kafka's RemoteLogSegmentState, same numbers."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class RemoteSegment(msgspec.Struct, forbid_unknown_fields=True):
    segment_id: str  # a UUID's hex, unique per copy
    base_offset: int
    end_offset: int  # last offset held (inclusive)
    next_offset: int  # the base offset of what follows (end_offset + 1 unless compacted gaps)
    size_bytes: int  # of the .log
    max_timestamp: int  # largest record timestamp (Kafka's maxTimestampMs); -1 when none
    offset_of_max: int  # first offset carrying max_timestamp
    min_timestamp: int  # smallest record timestamp (Chronolog's; for event-time plans)
    state: SegmentState
    leader_epochs: list[tuple[int, int]]  # (epoch, start offset) ascending
    txn_index_empty: bool  # KIP-1058: a read_committed reader may skip the .txnindex
    created_ms: int


class PartitionManifest(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    topic: str
    partition: int
    topic_id: str  # hex of the 16-byte topic id
    generation: int
    log_start_offset: int  # the partition's log start as far as the tier knows it
    segments: list[RemoteSegment]

    def finished(self) -> list[RemoteSegment]:
        """The readable segments: copied, not being deleted, reaching the log start."""
        return [s for s in self.segments
                if s.state == SegmentState.COPY_SEGMENT_FINISHED
                and s.end_offset >= self.log_start_offset]

    def highest_offset(self) -> int:
        """Kafka's highestOffsetInRemoteStorage: -1 when nothing is copied."""
        done = [s.end_offset for s in self.segments
                if s.state == SegmentState.COPY_SEGMENT_FINISHED]
        return max(done, default=-1)


class TopicManifest(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    topic: str
    topic_id: str
    partitions: int
    configs: dict[str, str]  # the topic's Kafka configs (names as Kafka spells them)


def topic_key(topic: str) -> str:
    return f"topics/{topic}/topic.json"


def partition_prefix(topic: str, partition: int) -> str:
    return f"topics/{topic}/{partition}/"


def manifest_key(topic: str, partition: int) -> str:
    return partition_prefix(topic, partition) + "manifest.json"


def segment_key(topic: str, partition: int, seg: RemoteSegment, suffix: str) -> str:
    """The object holding one file of ``seg`` (``suffix`` one of FILE_SUFFIXES)."""
    assert suffix in FILE_SUFFIXES, suffix
    return f"{partition_prefix(topic, partition)}{seg.base_offset:020d}-{seg.segment_id}{suffix}"


_partition_decoder = msgspec.json.Decoder(PartitionManifest)
_topic_decoder = msgspec.json.Decoder(TopicManifest)


def encode(m: PartitionManifest | TopicManifest) -> bytes:
    return msgspec.json.encode(m)


def decode_partition(data: bytes) -> PartitionManifest:
    return _partition_decoder.decode(data)


def decode_topic(data: bytes) -> TopicManifest:
    return _topic_decoder.decode(data)
