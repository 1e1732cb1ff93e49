"""CountTimeWindows (10001), v0: exact record counts per event-time bucket.

Invariants (protocol/count_time_windows.py):
- per partition: for each bucket [Boundaries[k], Boundaries[k+1]), exactly how many
  data records in [log start, high watermark) have a timestamp in it
  (``Log.count_time_windows``); under READ_COMMITTED (IsolationLevel 1) in
  [log start, last stable offset), leaving out the records of aborted transactions;
- authorization as ListOffsets and PlanTimeWindow: DESCRIBE on the topic (READ
  implies it), else TOPIC_AUTHORIZATION_FAILED (29) for each partition asked;
- boundaries that do not ascend, fewer than two or more than MAX_BOUNDARIES are
  INVALID_REQUEST (42) for each partition; an unknown partition is
  UNKNOWN_TOPIC_OR_PARTITION (3).
Blocks the sorted-timestamp indexes cover are binary searches. What is not indexed yet
(everything right after a start or a burst of appends) is indexed first, in slices
with the event loop free between them (``PartitionManager.event_time_ready``), so
other connections are served meanwhile; the newest blocks are decoded from the .log.
A partition with remote segments (KIP-405) is counted in the remote tier's threads: its
remote records are decoded from ranged reads of the bucket, which must not hold the
event loop (a store failure is KAFKA_STORAGE_ERROR for that partition).
"""

from __future__ import annotations

from broker.dispatch import RequestContext
from broker.time_window import READ_COMMITTED, failed_topics, serve_topics
from protocol import messages as m
from protocol.api import Request
from protocol.count_time_windows import MAX_BOUNDARIES
from storage.log import HAVE_NUMPY, Log

#: Served only where numpy is installed (broker/dispatch.py reads these two).
AVAILABLE = HAVE_NUMPY
UNAVAILABLE_WHY = "the sorted-timestamp index needs numpy: pip install 'chronolog[arrow]'"


Answer = m.CountTimeWindowsResponseTopicsPartitions


def _answer(index: int, error: int) -> Answer:
    return Answer(partition_index=index, error_code=error, log_start_offset=-1,
                  high_watermark=-1, last_stable_offset=-1, counts=[])


def _valid(bounds: list[int]) -> bool:
    return 2 <= len(bounds) <= MAX_BOUNDARIES and all(
        a <= b for a, b in zip(bounds, bounds[1:], strict=False))


def _response(topics: list[tuple[str, list[Answer]]]) -> m.CountTimeWindowsResponse:
    return m.CountTimeWindowsResponse(throttle_time_ms=0, topics=[
        m.CountTimeWindowsResponseTopics(name=name, partitions=parts) for name, parts in topics])


async def handle(request: Request[m.CountTimeWindowsRequest], ctx: RequestContext) -> m.CountTimeWindowsResponse:
    body = request.body
    bounds = list(body.boundaries or [])
    committed = body.isolation_level == READ_COMMITTED

    def serve(name: str, index: int, plog: Log, lso: int) -> Answer:
        if committed:
            producers = ctx.partitions.producers
            aborted = producers.aborted_list(name, index) if producers is not None else []
            counts = plog.count_time_windows(bounds, max_offset=lso, aborted=aborted)
        else:
            counts = plog.count_time_windows(bounds)
        return Answer(partition_index=index, error_code=0,
                      log_start_offset=plog.log_start_offset, high_watermark=plog.high_watermark,
                      last_stable_offset=lso, counts=counts)

    return _response(await serve_topics(ctx, body.topics, _answer, serve, "count",
                                        sorted_index=True, remote_in_thread=True,
                                        valid=_valid(bounds)))


def error_body(request: Request[m.CountTimeWindowsRequest], code: int) -> m.CountTimeWindowsResponse:
    return _response(failed_topics(request.body.topics, _answer, code))
