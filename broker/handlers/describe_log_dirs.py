"""DescribeLogDirs (35), v0-4: the one data directory and each partition's size in it.

Invariants: LogDir is the absolute path of ``log.dirs``; null Topics = every partition,
otherwise only the listed partitions that exist (unknown ones are left out, as Kafka
does); PartitionSize = the bytes of the partition's segments (``.log`` files);
OffsetLag 0, IsFutureKey false (no replica movement); v4 adds the file system's total
and usable bytes (``shutil.disk_usage``, -1 if unknown).
"""

from __future__ import annotations

import shutil

from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.DescribeLogDirsRequest], ctx: RequestContext) -> m.DescribeLogDirsResponse:
    pm = ctx.partitions
    logs = pm.logs()
    wanted: dict[str, list[int]]
    if request.body.topics is None:
        wanted = {}
        for (topic, partition) in sorted(logs):
            wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {}
        for t in request.body.topics:
            wanted.setdefault(t.topic, []).extend(t.partitions)
    topics = []
    for name, partitions in wanted.items():
        parts = []
        for p in dict.fromkeys(partitions):
            plog = logs.get((name, p))
            if plog is None:
                continue
            parts.append(m.DescribeLogDirsResponseResultsTopicsPartitions(
                partition_index=p, partition_size=plog.size_in_bytes(), offset_lag=0, is_future_key=False))
        if parts:
            topics.append(m.DescribeLogDirsResponseResultsTopics(name=name, partitions=parts))
    path = pm.data_dir.resolve()
    try:
        usage = shutil.disk_usage(path)
        total, usable = usage.total, usage.free
    except OSError:
        total = usable = -1
    return m.DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[m.DescribeLogDirsResponseResults(
        error_code=0, log_dir=str(path), topics=topics, total_bytes=total, usable_bytes=usable,
    )])


def error_body(request: Request[m.DescribeLogDirsRequest], code: int) -> m.DescribeLogDirsResponse:
    return m.DescribeLogDirsResponse(throttle_time_ms=0, error_code=code, results=[])
