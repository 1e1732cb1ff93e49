"""Event time in the CLI: the disorder a partition's timestamps arrived with, said in words.

A record is late when its timestamp is below the largest timestamp of any record before
it in offset order (storage/planner.py); its lateness is that gap. Where a partition has
late records, a positional time window (Kafka's offsetsForTimes rule) and an event-time
window disagree, so ``consume`` warns and ``describe``/``topics describe`` show them.
Against a broker without PlanTimeWindow (a Kafka broker) there is nothing to show: the
counts are None and no warning is printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.aio import PLAN_TIME_WINDOW
from protocol.errors import ErrorCode, KafkaError
from storage.planner import DisorderStats

if TYPE_CHECKING:
    from client.aio import Client

_UNITS = (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1000),
          ("ms", 1))


def format_lateness(ms: int) -> str:
    """``ms`` as its two largest whole units, truncated: ``3 days 2 hours``, ``5 minutes``,
    ``1 second 250 ms``, ``0 ms``; the second unit only when it is the next one down
    (``1 day`` for one day and 30 seconds), so the text never claims a false precision."""
    if ms <= 0:
        return "0 ms"
    for i, (name, size) in enumerate(_UNITS):
        if ms >= size:
            n = ms // size
            text = f"{n} {name}" + ("s" if n != 1 and name != "ms" else "")
            if i + 1 < len(_UNITS):
                sub_name, sub_size = _UNITS[i + 1]
                m = (ms % size) // sub_size
                if m:
                    text += f" {m} {sub_name}" + ("s" if m != 1 and sub_name != "ms" else "")
            return text
    raise AssertionError("unreachable: 1 ms is the smallest unit")


async def disorder_or_none(
    client: Client, topic: str, partitions: list[int]
) -> dict[int, DisorderStats] | None:
    """Per partition, the disorder counts; None when the broker has no PlanTimeWindow."""
    if not client.supports(PLAN_TIME_WINDOW):
        return None
    return await client.disorder_stats(topic, partitions)


def require_event_time(client: Client) -> None:
    """Raise a clear UNSUPPORTED_VERSION when the broker cannot plan an event-time window."""
    if not client.supports(PLAN_TIME_WINDOW):
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION,
            "--event-time needs a Chronolog broker: this broker does not offer "
            f"PlanTimeWindow (API key {PLAN_TIME_WINDOW}), as no Kafka broker does. "
            "Without --event-time the window is positional (Kafka's offsetsForTimes rule).",
        )


def positional_warning(topic: str, stats: dict[int, DisorderStats]) -> str | None:
    """The one-line warning for a positional window over partitions with late records
    (None when every partition's timestamps arrived in order)."""
    late = {p: s for p, s in sorted(stats.items()) if s.late_records > 0}
    if not late:
        return None
    count = sum(s.late_records for s in late.values())
    worst = max(s.max_lateness_ms for s in late.values())
    parts = ", ".join(str(p) for p in late)
    return (
        f"warning: {topic} has {count} late record(s) in partition{'s' if len(late) > 1 else ''} "
        f"{parts} (up to {format_lateness(worst)} behind an earlier timestamp): this "
        "positional window "
        "(Kafka's offsetsForTimes rule) can hold records outside it and miss records "
        "inside it; --event-time reads exactly the records with --from-time <= timestamp "
        "< --until"
    )
