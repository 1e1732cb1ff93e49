"""Parse the times users type into epoch milliseconds, and format them back.

Accepted forms (anything else is a :class:`TimeParseError` naming what was wrong):

- ISO-8601 with an explicit zone: ``2026-11-21T10:32:00Z``, ``2026-11-21T11:32:00+01:00``,
  ``2026-11-21 10:32:00.123456-0530``. A time *without* a zone is rejected: the
  same text means different instants on different machines, and a silent guess
  is exactly the off-by-hours bug time lookups must not have.
- Epoch milliseconds: a string of digits, ``1763721120000``. Digits always mean
  milliseconds, never seconds: guessing the unit from the magnitude would make
  small synthetic timestamps (tests, replays) mean something else. Passing seconds
  for milliseconds is the classic Kafka mistake (confluent-kafka-python#497), so
  the documentation says it loudly.
- Relative to now: ``now``, ``-15m``, ``-2h``, ``-1d``, ``+30s``, ``-250ms``,
  ``-1w``, also ``now-15m``; units ms, s, m, h, d, w.

Invariants: results are integers >= 0 (Kafka reserves negative timestamps for
the special ListOffsets queries); fractions below a millisecond are floored;
``parse_time(format_time(ms)) == ms`` for every ms in range.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone

__all__ = ["TimeParseError", "format_time", "parse_time", "MAX_MS"]

#: The last millisecond of year 9999 UTC, the largest instant ISO-8601 text can name here.
MAX_MS = 253402300799999

_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
}

_RELATIVE = re.compile(r"^(?:now)?\s*([+-])\s*(\d+)\s*(ms|s|m|h|d|w)$", re.IGNORECASE | re.ASCII)
_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"\s*(Z|z|[+-]\d{2}(?::?\d{2})?)?)?$",
    re.ASCII,
)


class TimeParseError(ValueError):
    """The text is not a time we accept; the message says why and shows an accepted form."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_time(text: str, *, now_ms: int | None = None) -> int:
    """Return epoch milliseconds for ``text`` (see the module docstring for the forms).

    ``now_ms`` pins "now" for relative forms, so callers and tests are deterministic.
    """
    if not isinstance(text, str):
        raise TimeParseError(f"expected a string, got {type(text).__name__}")
    s = text.strip()
    if not s:
        raise TimeParseError("empty time; use ISO-8601 with a zone, epoch ms, or -15m / now")
    if s.lower() == "now":
        return _check_range(text, _now_ms() if now_ms is None else now_ms)
    if s.isdigit() and s.isascii():
        return _check_range(text, int(s))
    m = _RELATIVE.match(s)
    if m:
        sign, amount, unit = m.groups()
        delta = int(amount) * _UNIT_MS[unit.lower()]
        base = _now_ms() if now_ms is None else now_ms
        return _check_range(text, base - delta if sign == "-" else base + delta)
    m = _ISO.match(s)
    if m:
        return _check_range(text, _parse_iso(text, m))
    raise TimeParseError(
        f"cannot parse time {text!r}: use ISO-8601 with a zone (2026-11-21T10:32:00Z), "
        "epoch milliseconds (1763721120000), or a relative time (now, -15m, -2h, -1d)"
    )


def _parse_iso(text: str, m: re.Match[str]) -> int:
    year, month, day, hour, minute, second, frac, zone = m.groups()
    if hour is None:
        raise TimeParseError(
            f"{text!r} is a date without a time and zone; write e.g. {text.strip()}T00:00:00Z"
        )
    if zone is None:
        raise TimeParseError(
            f"{text!r} has no time zone, so it is ambiguous; append Z for UTC "
            "or an offset such as +01:00"
        )
    if zone in ("Z", "z"):
        tz = UTC
    else:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        zh, zm = int(digits[:2]), int(digits[2:4] or "0")
        if zh > 23 or zm > 59:
            raise TimeParseError(f"{text!r}: zone offset {zone} is out of range")
        tz = timezone(sign * timedelta(hours=zh, minutes=zm))
    try:
        dt = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second or 0), tzinfo=tz
        )
    except ValueError as e:
        raise TimeParseError(f"{text!r}: {e}") from None
    # Integer arithmetic from the epoch keeps every millisecond exact (no float rounding).
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    ms = (delta.days * 86_400 + delta.seconds) * 1000
    if frac:
        ms += int(frac.ljust(9, "0")) // 1_000_000
    return ms


def _check_range(text: str, ms: int) -> int:
    if ms < 0:
        raise TimeParseError(
            f"{text!r} is before 1970-01-01T00:00:00Z; Kafka timestamps are epoch ms >= 0"
        )
    if ms > MAX_MS:
        raise TimeParseError(f"{text!r} is after year 9999 (epoch ms > {MAX_MS})")
    return ms


def format_time(ms: int) -> str:
    """ISO-8601 UTC with milliseconds (``2026-11-21T10:32:00.000Z``); negatives print as-is.

    Negative values are Kafka's "no timestamp" (-1) markers, shown raw rather than
    as a misleading 1969 date.
    """
    if ms < 0 or ms > MAX_MS:
        return str(ms)
    dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
