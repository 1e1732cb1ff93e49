"""How the CLI says a lateness: the two largest units, truncated, never a false precision."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client.cli._disorder import format_lateness

DAY, HOUR, MINUTE, SECOND = 86_400_000, 3_600_000, 60_000, 1000


def test_lateness_reads_as_words() -> None:
    assert format_lateness(0) == "0 ms"
    assert format_lateness(1) == "1 ms"
    assert format_lateness(999) == "999 ms"
    assert format_lateness(1250) == "1 second 250 ms"
    assert format_lateness(5 * MINUTE) == "5 minutes"
    assert format_lateness(HOUR + MINUTE) == "1 hour 1 minute"
    assert format_lateness(DAY + HOUR) == "1 day 1 hour"
    assert format_lateness(3 * DAY + 2 * HOUR + 59 * MINUTE) == "3 days 2 hours"
    assert format_lateness(DAY + 30 * SECOND) == "1 day"  # not "1 day 0 hours"
    assert format_lateness(400 * DAY) == "400 days"


@given(st.integers(1, 10 * 365 * DAY))
def test_lateness_words_never_overstate(ms: int) -> None:
    words = format_lateness(ms).split()
    size = {"day": DAY, "days": DAY, "hour": HOUR, "hours": HOUR, "minute": MINUTE,
            "minutes": MINUTE, "second": SECOND, "seconds": SECOND, "ms": 1}
    said = sum(int(n) * size[u] for n, u in zip(words[::2], words[1::2], strict=True))
    order = [DAY, HOUR, MINUTE, SECOND, 1]
    first = order.index(size[words[1]])
    precision = order[first + 1] if first + 1 < len(order) else 1
    assert len(words) in (2, 4)
    assert 0 <= ms - said < precision  # truncated to the second unit, whether shown or 0
