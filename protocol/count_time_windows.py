"""CountTimeWindows (key 10001, Chronolog's own): versions 0-0, flexible from 0.

Exactly how many records of a partition have a timestamp in each bucket
[Boundaries[k], Boundaries[k+1]) (event time: any record, wherever it sits in the
log), so an event-time timeline is one request instead of a read of every record.
The key lies outside Kafka's range (0..~90) so no Kafka client ever sends it; it is
advertised in ApiVersions like every other API.

Invariants: ``boundaries`` ascend, 2..MAX_BOUNDARIES of them; ``counts`` has one entry
per bucket (len(boundaries) - 1) and counts the data records in [LogStartOffset,
HighWatermark) (IsolationLevel 0) or [LogStartOffset, LastStableOffset) without the
records of aborted transactions (IsolationLevel 1).
"""

from __future__ import annotations

from protocol.plan_time_window import ASKED_TOPICS, PARTITION_POSITION
from protocol.schema import F, arr, message

#: The most boundaries one request may carry (a chart has a few hundred).
MAX_BOUNDARIES = 10_000

REQUEST = message(
    "CountTimeWindowsRequest",
    F("isolation_level", "int8"),
    F("boundaries", "[]int64"),
    ASKED_TOPICS,
)

RESPONSE = message(
    "CountTimeWindowsResponse",
    F("throttle_time_ms", "int32"),
    F("topics", arr(
        F("name", "string"),
        F("partitions", arr(
            *PARTITION_POSITION,
            F("counts", "[]int64"),
        )),
    )),
)
