"""PlanTimeWindow (key 10000, Chronolog's own): versions 0-0, flexible from 0.

Which offset ranges of a partition may hold a record with StartTimestamp <=
timestamp < EndTimestamp (event time: any record, wherever it sits in the log), and
how out of order the partition's timestamps arrived. The key lies outside Kafka's
range (0..~90) so no Kafka client ever sends it; it is advertised in ApiVersions like
every other API.

Invariants: ``ranges`` are sorted, disjoint, within [LogStartOffset, HighWatermark)
(read_uncommitted) or [LogStartOffset, LastStableOffset) (IsolationLevel 1), merged
where one ends where the next begins; ``bytes`` is what fetching a range reads. The
disorder counts (``late_records``, ``max_lateness_ms`` over ``records``) cover
[LogStartOffset, log end). An empty window (End <= Start) has no ranges.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

#: What the two event-time APIs (this one and CountTimeWindows) share: the partitions a
#: request asks, per topic, and what every partition's answer starts with (where it
#: stands, or why it has no answer).
ASKED_TOPICS = F("topics", arr(
    F("name", "string"),
    F("partitions", "[]int32"),
))
PARTITION_POSITION = (
    F("partition_index", "int32"),
    F("error_code", "int16"),
    F("log_start_offset", "int64", default=-1),
    F("high_watermark", "int64", default=-1),
    F("last_stable_offset", "int64", default=-1),
)

REQUEST = message(
    "PlanTimeWindowRequest",
    F("isolation_level", "int8"),
    F("start_timestamp", "int64"),
    F("end_timestamp", "int64"),
    ASKED_TOPICS,
)

RESPONSE = message(
    "PlanTimeWindowResponse",
    F("throttle_time_ms", "int32"),
    F("topics", arr(
        F("name", "string"),
        F("partitions", arr(
            *PARTITION_POSITION,
            F("late_records", "int64", default=-1),
            F("max_lateness_ms", "int64", default=-1),
            F("records", "int64", default=-1),
            F("ranges", arr(
                F("start_offset", "int64"),
                F("end_offset", "int64"),
                F("bytes", "int64"),
            )),
        )),
    )),
)
