"""client.timeparse: every accepted form maps to the right epoch ms; ambiguous text is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.timeparse import MAX_MS, TimeParseError, format_time, parse_time

NOW = 1_763_721_120_000  # 2025-11-21T10:32:00Z

instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30)
)
offsets_min = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59)


def _oracle_ms(dt: datetime) -> int:
    """Brute force: whole microseconds since the epoch via timedelta, floored to ms."""
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros // 1000


def test_documented_examples() -> None:
    assert parse_time("2025-11-21T10:32:00Z") == NOW
    assert parse_time("2025-11-21T11:32:00+01:00") == NOW
    assert parse_time("2025-11-21T05:02:00-0530") == NOW
    assert parse_time("2025-11-21 10:32:00.000Z") == NOW
    assert parse_time("1763721120000") == NOW
    assert parse_time("now", now_ms=NOW) == NOW
    assert parse_time("-15m", now_ms=NOW) == NOW - 15 * 60_000
    assert parse_time("-2h", now_ms=NOW) == NOW - 2 * 3_600_000
    assert parse_time("-1d", now_ms=NOW) == NOW - 86_400_000
    assert parse_time("now-1w", now_ms=NOW) == NOW - 7 * 86_400_000
    assert parse_time("+30s", now_ms=NOW) == NOW + 30_000
    assert parse_time("-250ms", now_ms=NOW) == NOW - 250


@given(instants, offsets_min)
def test_iso_with_any_zone_matches_oracle(naive: datetime, offset: int) -> None:
    tz = timezone(timedelta(minutes=offset))
    dt = naive.replace(tzinfo=tz)
    if not (0 <= _oracle_ms(dt) <= MAX_MS):
        return
    sign = "-" if offset < 0 else "+"
    zone = f"{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    text = dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{dt.microsecond:06d}" + zone
    assert parse_time(text) == _oracle_ms(dt)
    compact = dt.strftime("%Y-%m-%d %H:%M:%S") + f",{dt.microsecond:06d}" + zone.replace(":", "")
    assert parse_time(compact) == _oracle_ms(dt)


@given(st.integers(min_value=0, max_value=MAX_MS))
def test_format_then_parse_round_trips(ms: int) -> None:
    assert parse_time(format_time(ms)) == ms
    assert parse_time(str(ms)) == ms


@given(
    st.integers(min_value=10**13, max_value=10**14),
    st.sampled_from(["ms", "s", "m", "h", "d", "w"]),
    st.integers(min_value=0, max_value=10_000),
    st.sampled_from(["-", "+"]),
)
def test_relative_forms_are_offsets_from_now(now: int, unit: str, n: int, sign: str) -> None:
    scale = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
             "w": 604_800_000}[unit]
    expected = now - n * scale if sign == "-" else now + n * scale
    assert parse_time(f"{sign}{n}{unit}", now_ms=now) == expected
    assert parse_time(f"now{sign}{n}{unit}", now_ms=now) == expected


@given(instants)
def test_iso_without_zone_is_rejected_as_ambiguous(naive: datetime) -> None:
    text = naive.strftime("%Y-%m-%dT%H:%M:%S")
    with pytest.raises(TimeParseError, match="no time zone"):
        parse_time(text)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "yesterday", "-15", "15m", "-15y", "2025-11-21", "2025-13-01T00:00:00Z",
     "2025-02-30T00:00:00Z", "2025-11-21T24:00:00Z", "2025-11-21T10:32:00+25:00",
     "1969-12-31T23:59:59Z", "-1", "1e12", "١٢٣"],
)
def test_garbage_and_out_of_range_get_a_clear_error(text: str) -> None:
    with pytest.raises(TimeParseError):
        parse_time(text, now_ms=NOW)


def test_relative_before_epoch_is_rejected() -> None:
    with pytest.raises(TimeParseError, match="before 1970"):
        parse_time("-2d", now_ms=1000)


def test_format_time_shows_special_timestamps_raw() -> None:
    assert format_time(-1) == "-1"
    assert format_time(0) == "1970-01-01T00:00:00.000Z"
    assert format_time(NOW + 7) == "2025-11-21T10:32:00.007Z"
