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
"""

from __future__ import annotations

from broker.acl.authorizer import DESCRIBE, TOPIC
from broker.acl.check import allowed
from broker.dispatch import RequestContext
from broker.errors import partition_error
from protocol import messages as m
from protocol.api import Request
from protocol.count_time_windows import MAX_BOUNDARIES
from protocol.errors import ErrorCode, KafkaError
from storage.log import HAVE_NUMPY

READ_COMMITTED = 1

#: Served only where numpy is installed (broker/dispatch.py reads these two).
AVAILABLE = HAVE_NUMPY
UNAVAILABLE_WHY = "the sorted-timestamp index needs numpy: pip install 'chronolog[arrow]'"


Answer = m.CountTimeWindowsResponseTopicsPartitions


def _answer(index: int, error: int) -> Answer:
    return Answer(partition_index=index, error_code=error, log_start_offset=-1,
                  high_watermark=-1, last_stable_offset=-1, counts=[])


def _partition(ctx: RequestContext, name: str, index: int, bounds: list[int],
               committed: bool) -> Answer:
    pm = ctx.partitions
    try:
        plog = pm.get_log(name, index)
    except KafkaError as exc:
        return _answer(index, int(exc.code))
    try:
        lso = pm.last_stable_offset(name, index, plog)
        if committed:
            producers = pm.producers
            aborted = producers.aborted_list(name, index) if producers is not None else []
            counts = plog.count_time_windows(bounds, max_offset=lso, aborted=aborted)
        else:
            counts = plog.count_time_windows(bounds)
    except Exception as exc:
        return _answer(index, int(partition_error(exc, f"count {name}-{index}").code))
    return Answer(partition_index=index, error_code=0,
                  log_start_offset=plog.log_start_offset, high_watermark=plog.high_watermark,
                  last_stable_offset=lso, counts=counts)


def _valid(bounds: list[int]) -> bool:
    return 2 <= len(bounds) <= MAX_BOUNDARIES and all(
        a <= b for a, b in zip(bounds, bounds[1:], strict=False))


async def handle(request: Request[m.CountTimeWindowsRequest], ctx: RequestContext) -> m.CountTimeWindowsResponse:
    body = request.body
    bounds = list(body.boundaries or [])
    committed = body.isolation_level == READ_COMMITTED
    ok = _valid(bounds)
    authz = ctx.broker.authorizer
    topics = []
    for topic in body.topics:
        name = topic.name
        if authz is not None and not allowed(ctx, DESCRIBE, TOPIC, name):
            denied = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            topics.append(m.CountTimeWindowsResponseTopics(
                name=name, partitions=[_answer(p, denied) for p in topic.partitions]))
            continue
        if not ok:
            bad = int(ErrorCode.INVALID_REQUEST)
            topics.append(m.CountTimeWindowsResponseTopics(
                name=name, partitions=[_answer(p, bad) for p in topic.partitions]))
            continue
        failed: dict[int, int] = {}
        for p in topic.partitions:
            await ctx.partitions.event_time_ready(name, p, sorted_index=True)
            if ctx.broker.tier is not None:
                # Remote segments' zone maps are fetched in the tier's threads first.
                err = await ctx.broker.tier.event_time_ready(name, p)
                if err is not None:
                    failed[p] = int(partition_error(err, f"remote zone maps of {name}-{p}").code)
        topics.append(m.CountTimeWindowsResponseTopics(name=name, partitions=[
            _answer(p, failed[p]) if p in failed else _partition(ctx, name, p, bounds, committed)
            for p in topic.partitions]))
    return m.CountTimeWindowsResponse(throttle_time_ms=0, topics=topics)


def error_body(request: Request[m.CountTimeWindowsRequest], code: int) -> m.CountTimeWindowsResponse:
    return m.CountTimeWindowsResponse(throttle_time_ms=0, topics=[
        m.CountTimeWindowsResponseTopics(name=t.name, partitions=[_answer(p, code) for p in t.partitions])
        for t in request.body.topics])
