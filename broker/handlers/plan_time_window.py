"""PlanTimeWindow (10000), v0: the event-time plan of [StartTimestamp, EndTimestamp).

Invariants (protocol/plan_time_window.py):
- per partition: the offset ranges whose zone-map blocks may hold a record with
  Start <= timestamp < End (``Log.plan_time_window``: a superset, never a miss),
  bounded by the high watermark, or by the last stable offset under READ_COMMITTED
  (IsolationLevel 1), plus the log start, high watermark, LSO and the partition's
  disorder counts (``Log.disorder_stats``);
- authorization as ListOffsets: DESCRIBE on the topic (READ implies it), else
  TOPIC_AUTHORIZATION_FAILED (29) for each partition asked;
- a negative timestamp is INVALID_REQUEST (42) for each partition; End <= Start is
  an empty plan; an unknown partition is UNKNOWN_TOPIC_OR_PARTITION (3).
"""

from __future__ import annotations

from broker.dispatch import RequestContext
from broker.time_window import READ_COMMITTED, failed_topics, serve_topics
from protocol import messages as m
from protocol.api import Request
from storage.log import Log

Answer = m.PlanTimeWindowResponseTopicsPartitions


def _answer(index: int, error: int) -> Answer:
    return Answer(partition_index=index, error_code=error, log_start_offset=-1, high_watermark=-1,
                  last_stable_offset=-1, late_records=-1, max_lateness_ms=-1, records=-1, ranges=[])


def _response(topics: list[tuple[str, list[Answer]]]) -> m.PlanTimeWindowResponse:
    return m.PlanTimeWindowResponse(throttle_time_ms=0, topics=[
        m.PlanTimeWindowResponseTopics(name=name, partitions=parts) for name, parts in topics])


async def handle(request: Request[m.PlanTimeWindowRequest], ctx: RequestContext) -> m.PlanTimeWindowResponse:
    body = request.body
    t1, t2 = body.start_timestamp, body.end_timestamp
    committed = body.isolation_level == READ_COMMITTED

    def serve(name: str, index: int, plog: Log, lso: int) -> Answer:
        plan = plog.plan_time_window(t1, t2, max_offset=lso if committed else None)
        stats = plog.disorder_stats()
        return Answer(
            partition_index=index,
            error_code=0,
            log_start_offset=plog.log_start_offset,
            high_watermark=plog.high_watermark,
            last_stable_offset=lso,
            late_records=stats.late_records,
            max_lateness_ms=stats.max_lateness_ms,
            records=stats.records,
            ranges=[m.PlanTimeWindowResponseTopicsPartitionsRanges(
                start_offset=r.start_offset, end_offset=r.end_offset, bytes=r.bytes) for r in plan],
        )

    # A negative timestamp is INVALID_REQUEST in each partition (after authorization).
    return _response(await serve_topics(ctx, body.topics, _answer, serve, "plan",
                                        sorted_index=False, remote_in_thread=False,
                                        valid=t1 >= 0 and t2 >= 0))


def error_body(request: Request[m.PlanTimeWindowRequest], code: int) -> m.PlanTimeWindowResponse:
    return _response(failed_topics(request.body.topics, _answer, code))
