"""Event data that arrives out of order, as backfilled, replayed or late data does.

``month_shuffled`` gives the timestamps of a year of events in *arrival* order: whole
months arrive in a shuffled order (a backfill run month by month, not in sequence),
each month day by day with the records of a day in random order, and a share of every
day's records arrives late, one to ten days after its day. That is the shape that
makes a positional time window (Kafka's offsetsForTimes rule) miss most of the
records of an event-time window; tests and benchmarks load it through real clients.
"""

from __future__ import annotations

import calendar
import datetime as dt

import numpy as np

DAY_MS = 86_400_000

#: Windows of ``month_shuffled``'s default year that tests and docs read: (first day,
#: day after the last), UTC.
SAMPLE_WINDOWS = {
    "one day": ("2024-03-14", "2024-03-15"),
    "three days at year end": ("2024-12-29", "2025-01-01"),
    "one week": ("2024-06-10", "2024-06-17"),
}


def day_ms(day: str) -> int:
    """Epoch ms of the start of a UTC day given as YYYY-MM-DD."""
    return int(dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp() * 1000)


def month_shuffled(n: int, *, year: int = 2024, late_share: float = 0.03,
                   seed: int = 0) -> np.ndarray:
    """``n`` event timestamps (ms, int64) of ``year`` in the order they arrive."""
    rng = np.random.default_rng(seed)
    first = int(dt.datetime(year, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
    days = 366 if calendar.isleap(year) else 365
    # Event times, spread over the year and sorted: day d holds the records with
    # first + d*DAY_MS <= ts < first + (d+1)*DAY_MS.
    ts = np.sort(first + rng.integers(0, days * DAY_MS, n, dtype=np.int64))
    day = (ts - first) // DAY_MS
    month = np.array([dt.date(year, 1, 1) + dt.timedelta(days=int(d)) for d in range(days)],
                     dtype=object)
    month_of_day = np.fromiter((m.month for m in month), dtype=np.int64, count=days)
    # Arrival: a month's position in the shuffled month order, then the day (late
    # records move 1-10 days on), then a random rank within the day.
    order = rng.permutation(12)
    rank_of_month = np.empty(12, dtype=np.int64)
    rank_of_month[order] = np.arange(12)
    arrival_day = day.copy()
    late = rng.random(n) < late_share
    arrival_day[late] += rng.integers(1, 11, int(late.sum()))
    arrival_day = np.minimum(arrival_day, days - 1)
    arrival_month = rank_of_month[month_of_day[arrival_day] - 1]
    key = (arrival_month * 1000 + arrival_day) * 2.0 + rng.random(n)
    return ts[np.argsort(key, kind="stable")]
