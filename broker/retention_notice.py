"""A WARNING when time retention deletes data that was written only recently.

Retention measures a segment's age by its largest record timestamp (Kafka's
rule). Historical data produced with its own CreateTime timestamps (a replay, an
import of last year's events) is therefore older than the 7-day default
``retention.ms`` the moment it arrives, and the next retention check deletes it:
to its producer the data simply vanishes. Kafka logs that deletion at INFO among
every routine one; this says it once per partition, at WARNING, with the
setting to change.

Invariants: a segment counts as "written recently" when its ``.log`` was last
written less than half of ``retention.ms`` before the check (ordinary data,
whose timestamps are its write times, is deleted about ``retention.ms`` after its
last write, so producer clock skew cannot trigger this); only the segments the
time rule deletes are looked at (retention runs it first, oldest first); one
warning per partition per broker run.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.log import Log

log = logging.getLogger("broker.retention")

_DAY_MS = 86_400_000


def _age(ms: int) -> str:
    if ms >= 2 * _DAY_MS:
        return f"{ms / _DAY_MS:.0f} days"
    if ms >= 2 * 3_600_000:
        return f"{ms / 3_600_000:.0f} hours"
    if ms >= 2 * 60_000:
        return f"{ms / 60_000:.0f} minutes"
    return f"{max(ms, 0) / 1000:.0f} seconds"


def _iso(ms: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


class OldTimestampRetention:
    """Call :meth:`before` ahead of a partition's retention pass and :meth:`after` with
    the number of segments it deleted."""

    def __init__(self) -> None:
        self._warned: set[tuple[str, int]] = set()

    def before(self, key: tuple[str, int], plog: Log, now_ms: int) -> list[tuple[int, int]]:
        """(largest timestamp, last write) of the segments the time rule is about to
        delete; empty when nothing is to be said for this partition."""
        cfg = plog.config
        if key in self._warned or cfg.retention_ms < 0 or not cfg.delete_enabled:
            return []
        doomed = []
        for seg in plog.segments:
            largest = seg.largest_timestamp()
            if now_ms - largest <= cfg.retention_ms:
                break
            doomed.append((largest, seg.mtime_ms()))
        return doomed

    def after(self, key: tuple[str, int], plog: Log, doomed: list[tuple[int, int]],
              deleted: int, now_ms: int) -> None:
        retention = plog.config.retention_ms
        gone = doomed[:deleted]
        if not gone:
            return
        written = max(w for _, w in gone)
        if now_ms - written >= retention / 2:
            return
        self._warned.add(key)
        topic, partition = key
        newest = max(ts for ts, _ in gone)
        log.warning(
            "retention deleted %d segment(s) of %s-%d written only %s ago: their records' "
            "timestamps (CreateTime, the newest %s) are older than retention.ms=%d (%s). "
            "To keep historical data, raise the topic's retention.ms (chronolog topics alter "
            "%s --config retention.ms=-1 keeps it forever) or the broker's log.retention.ms. "
            "Said once per partition.",
            len(gone), topic, partition, _age(now_ms - written), _iso(newest),
            retention, _age(retention), topic,
        )
