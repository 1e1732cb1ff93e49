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

from broker.acl.authorizer import DESCRIBE, TOPIC
from broker.acl.check import allowed
from broker.dispatch import RequestContext
from broker.errors import partition_error
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

READ_COMMITTED = 1


Answer = m.PlanTimeWindowResponseTopicsPartitions


def _answer(index: int, error: int) -> Answer:
    return Answer(partition_index=index, error_code=error, log_start_offset=-1, high_watermark=-1,
                  last_stable_offset=-1, late_records=-1, max_lateness_ms=-1, records=-1, ranges=[])


def _partition(ctx: RequestContext, name: str, index: int, t1: int, t2: int,
               committed: bool) -> Answer:
    if t1 < 0 or t2 < 0:
        return _answer(index, int(ErrorCode.INVALID_REQUEST))
    pm = ctx.partitions
    try:
        plog = pm.get_log(name, index)
    except KafkaError as exc:
        return _answer(index, int(exc.code))
    try:
        lso = pm.last_stable_offset(name, index, plog)
        plan = plog.plan_time_window(t1, t2, max_offset=lso if committed else None)
        stats = plog.disorder_stats()
    except Exception as exc:
        return _answer(index, int(partition_error(exc, f"plan {name}-{index}").code))
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


async def handle(request: Request[m.PlanTimeWindowRequest], ctx: RequestContext) -> m.PlanTimeWindowResponse:
    body = request.body
    t1, t2 = body.start_timestamp, body.end_timestamp
    committed = body.isolation_level == READ_COMMITTED
    authz = ctx.broker.authorizer
    topics = []
    for topic in body.topics:
        name = topic.name
        if authz is not None and not allowed(ctx, DESCRIBE, TOPIC, name):
            denied = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            topics.append(m.PlanTimeWindowResponseTopics(
                name=name, partitions=[_answer(p, denied) for p in topic.partitions]))
            continue
        failed: dict[int, int] = {}
        for p in topic.partitions:
            await ctx.partitions.event_time_ready(name, p, sorted_index=False)
            if ctx.broker.tier is not None:
                # Remote segments' zone maps are fetched in the tier's threads first.
                err = await ctx.broker.tier.event_time_ready(name, p)
                if err is not None:
                    failed[p] = int(partition_error(err, f"remote zone maps of {name}-{p}").code)
        topics.append(m.PlanTimeWindowResponseTopics(name=name, partitions=[
            _answer(p, failed[p]) if p in failed else _partition(ctx, name, p, t1, t2, committed)
            for p in topic.partitions]))
    return m.PlanTimeWindowResponse(throttle_time_ms=0, topics=topics)


def error_body(request: Request[m.PlanTimeWindowRequest], code: int) -> m.PlanTimeWindowResponse:
    return m.PlanTimeWindowResponse(throttle_time_ms=0, topics=[
        m.PlanTimeWindowResponseTopics(name=t.name, partitions=[_answer(p, code) for p in t.partitions])
        for t in request.body.topics])
