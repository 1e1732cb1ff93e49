"""The warning a positional time window gets when its partitions arrived out of order.

``startingTimestamp``/``endingTimestamp`` without ``eventTime`` mean Kafka's
offsetsForTimes offsets: exact by that rule, but on a partition whose timestamps
arrived out of order the rows are not "the records of that time" (some outside,
some missing), and a later ``.where()`` cannot bring back what was never read. So
the planner asks the broker how out of order each read partition is and logs one
WARNING naming ``.option("eventTime", "true")``.

Invariants:
- one WARNING per read at most, listing every read partition with late records
  (its late count and largest lateness), none when there are none;
- a broker that cannot say (a Kafka broker: no PlanTimeWindow), or any error asking,
  means no warning and no failure: the read itself does not depend on the check.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from client import KafkaError, SyncClient

__all__ = ["disorder_warning", "warn_if_disordered"]

log = logging.getLogger(__name__)


def _lateness(ms: int) -> str:
    """A lateness in the largest unit that keeps it readable (and the exact ms)."""
    for unit, size in (("days", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.1f} {unit} ({ms} ms)"
    return f"{ms} ms"


def disorder_warning(client: SyncClient, parts: Mapping[str, list[int]]) -> str | None:
    """The warning text for a positional window over ``parts``, or None (in order, or
    the broker cannot tell)."""
    late: list[str] = []
    for topic, ps in sorted(parts.items()):
        if not ps:
            continue
        try:
            stats = client.disorder_stats(topic, ps)
        except KafkaError:
            return None  # no PlanTimeWindow (a Kafka broker), or not allowed: no way to know
        for p in sorted(stats):
            s = stats[p]
            if s.late_records > 0:
                late.append(f"{topic}-{p}: {s.late_records:,} of {s.records:,} records arrived "
                            f"late, up to {_lateness(s.max_lateness_ms)}")
    if not late:
        return None
    return (
        "startingTimestamp/endingTimestamp are positional here (Kafka's offsetsForTimes: "
        "from the first offset stamped at or after the start to the first at or after the "
        "end), and these partitions' timestamps arrived out of order, so the rows can "
        "include records outside the window and miss records inside it: "
        + "; ".join(late)
        + '. For exactly the records with start <= timestamp < end, add '
        '.option("eventTime", "true").'
    )


def warn_if_disordered(client: SyncClient, parts: Mapping[str, list[int]]) -> None:
    """Log :func:`disorder_warning`'s text as one WARNING, if there is one."""
    text = disorder_warning(client, parts)
    if text is not None:
        log.warning("%s", text)
