"""Records per time bucket of a topic, from ListOffsets by timestamp alone.

For a boundary ``t`` and a partition, ``off(t)`` is the first offset whose
timestamp is >= ``t`` (ListOffsets by time), or the high watermark when no
record is at or after ``t``. The bucket ``[t1, t2)`` counts ``off(t2) - off(t1)``
per partition: exactly the offset range ``Client.time_range_offsets(t1, t2)``
gives and ``read_time_range`` reads, so the chart, the CLI and the Spark source
agree, out-of-order CreateTime included.

Invariants:
- ``off(t)`` never decreases as ``t`` grows (a record with timestamp >= t2 also
  has timestamp >= t1), so every count is >= 0 and the buckets of a range add up
  to the count of the whole range.
- One ListOffsets request per boundary carries every partition (Kafka rejects a
  partition asked twice in one request, so boundaries cannot share a request);
  the requests are pipelined on the client's connections, plus one for the high
  watermarks. No record data is read.
- A count is a number of offsets; it equals the number of records a reader gets
  except where compaction removed records or transaction markers hold offsets.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from client.aio import LATEST, Client, TopicPartition

__all__ = ["NICE_STEPS_MS", "Timeline", "boundaries", "choose_step", "compute_timeline", "max_bars_for",
           "max_buckets_for"]

_S, _M, _H, _D = 1000, 60_000, 3_600_000, 86_400_000
#: Bucket sizes a person reads at a glance; the chosen one gives at most MAX_BARS bars.
NICE_STEPS_MS: tuple[int, ...] = (
    1, 2, 5, 10, 20, 50, 100, 200, 500,
    _S, 2 * _S, 5 * _S, 10 * _S, 15 * _S, 30 * _S,
    _M, 2 * _M, 5 * _M, 10 * _M, 15 * _M, 30 * _M,
    _H, 2 * _H, 3 * _H, 6 * _H, 12 * _H,
    _D, 2 * _D, 3 * _D, 7 * _D, 14 * _D, 30 * _D, 60 * _D, 90 * _D, 180 * _D, 365 * _D,
)
MAX_BARS = 300
#: An explicit bucket count is capped here: each bucket boundary is one request.
MAX_BUCKETS = 2000
#: Partition lookups one chart may ask of the broker (boundaries x partitions).
MAX_LOOKUPS = 20_000


def choose_step(span_ms: int, max_bars: int = MAX_BARS) -> int:
    """The smallest nice bucket size that covers ``span_ms`` in at most ``max_bars`` bars.

    Consecutive nice sizes differ by at most 2.5x, so a span longer than
    ``max_bars`` ms gets between ``max_bars / 2.5`` and ``max_bars`` bars (120–300 by default).
    """
    for step in NICE_STEPS_MS:
        if -(-span_ms // step) <= max_bars:
            return step
    return -(-span_ms // max_bars)


def max_buckets_for(partitions: int) -> int:
    """The most buckets one chart of ``partitions`` may have: at most MAX_LOOKUPS
    partition lookups on the broker (boundaries x partitions), never fewer than 10."""
    return max(10, min(MAX_BUCKETS, MAX_LOOKUPS // max(1, partitions) - 1))


def max_bars_for(partitions: int) -> int:
    """The nice-step bar limit for ``partitions`` (12 partitions keep all 300 bars)."""
    return min(MAX_BARS, max_buckets_for(partitions))


def boundaries(start_ms: int, end_ms: int, buckets: int | None = None, *,
               max_bars: int = MAX_BARS) -> list[int]:
    """Bucket boundaries covering ``[start_ms, end_ms)``.

    Without ``buckets`` the size is :func:`choose_step` and the boundaries are
    aligned to multiples of it (round times), so the first may be before
    ``start_ms`` and the last after ``end_ms``. With ``buckets`` the range is cut
    into that many equal buckets of ``ceil(span / buckets)`` ms from ``start_ms``.
    """
    if start_ms < 0 or end_ms <= start_ms:
        raise ValueError(f"need 0 <= start < end, got [{start_ms}, {end_ms})")
    span = end_ms - start_ms
    if buckets is not None:
        if not 1 <= buckets <= MAX_BUCKETS:
            raise ValueError(f"buckets must be between 1 and {MAX_BUCKETS}, got {buckets}")
        step = -(-span // buckets)
        return [start_ms + i * step for i in range(buckets + 1)]
    step = choose_step(span, max_bars)
    first = start_ms - start_ms % step
    last = -(-end_ms // step) * step
    return list(range(first, last + 1, step))


@dataclass(kw_only=True)
class Chart:
    """What both meanings of a bucket give the page: ``counts[i]`` records in bucket ``i``
    = ``[bounds[i], bounds[i + 1])`` over ``partitions``, and how long the server took."""

    topic: str
    partitions: list[int]
    bounds: list[int]
    counts: list[int]
    high_watermarks: dict[int, int]
    server_ms: float = 0.0
    by: str

    @property
    def total(self) -> int:
        return sum(self.counts)

    def _json(self, **own: object) -> dict[str, object]:
        """The JSON both charts share, with ``own`` (this chart's fields) after the counts."""
        return {
            "by": self.by,
            "topic": self.topic,
            "partitions": self.partitions,
            "bounds": self.bounds,
            "counts": self.counts,
            **own,
        }


@dataclass(kw_only=True)
class Timeline(Chart):
    """Counts per bucket, and per partition the offset at every boundary.

    ``offsets[p][i]`` is ``off(bounds[i])`` for partition ``p``; bucket ``i`` is
    ``[bounds[i], bounds[i + 1])`` and ``counts[i]`` sums ``offsets[p][i + 1] -
    offsets[p][i]`` over the partitions.
    """

    offsets: dict[int, list[int]]
    by: str = "offset"

    def partition_counts(self, partition: int) -> list[int]:
        o = self.offsets[partition]
        return [o[i + 1] - o[i] for i in range(len(o) - 1)]

    def counts_from(self, floors: Mapping[int, int]) -> list[int]:
        """Counts of only the offsets at or after ``floors[p]`` in each partition (e.g. a
        consumer group's committed offsets: what it has still to read, by time)."""
        counts = [0] * (len(self.bounds) - 1)
        for p, floor in floors.items():
            o = [max(x, floor) for x in self.offsets[p]]
            for i in range(len(counts)):
                counts[i] += o[i + 1] - o[i]
        return counts

    def as_json(self) -> dict[str, object]:
        return self._json(
            offsets={str(p): v for p, v in self.offsets.items()},
            high_watermarks={str(p): v for p, v in self.high_watermarks.items()},
            total=self.total,
            server_ms=round(self.server_ms, 3),
        )


async def compute_timeline(
    client: Client,
    topic: str,
    bounds: Sequence[int],
    partitions: Sequence[int] | None = None,
) -> Timeline:
    """Count the offsets of ``topic`` in each bucket between consecutive ``bounds``."""
    t0 = time.perf_counter()
    parts = list(partitions) if partitions is not None else await client.partitions_for(topic)
    tps = [TopicPartition(topic, p) for p in parts]
    answers = await asyncio.gather(
        client.list_offsets({tp: LATEST for tp in tps}),
        *(client.list_offsets({tp: t for tp in tps}) for t in bounds),
    )
    latest, at = answers[0], answers[1:]
    hw = {tp.partition: latest[tp][0] for tp in tps}
    offsets: dict[int, list[int]] = {}
    for tp in tps:
        end = hw[tp.partition]
        # The same rule as Client.time_range_offsets: no record at or after t means
        # the range ends at the high watermark (clamped: a record may land between
        # the two requests, and off(t) must not pass the high watermark we report).
        offsets[tp.partition] = [
            end if a[tp][0] < 0 else min(a[tp][0], end) for a in at
        ]
    counts = [0] * (len(bounds) - 1)
    for o in offsets.values():
        for i in range(len(counts)):
            counts[i] += o[i + 1] - o[i]
    return Timeline(topic=topic, partitions=parts, bounds=list(bounds), offsets=offsets,
                    counts=counts, high_watermarks=hw,
                    server_ms=(time.perf_counter() - t0) * 1000)
