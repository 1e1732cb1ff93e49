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
  :func:`seconds_for_ms_warning` names both readings of a 10-digit number and the
  commands print it, while still reading milliseconds.
- Relative to now: ``now``, ``-15m``, ``-2h``, ``-1d``, ``+30s``, ``-250ms``,
  ``-1w``, also ``now-15m``; units ms, s, m, h, d, w.

Data files carry other forms too (``chronolog produce --timestamp-format``):
:func:`parse_iso` reads a zone-less ISO time in a zone the caller names,
:func:`parse_epoch` reads seconds or milliseconds with fractions exactly, and
:func:`parse_strftime` reads a ``strptime`` pattern.

Invariants: results are integers >= 0 (Kafka reserves negative timestamps for
the special ListOffsets queries); fractions below a millisecond are floored;
``parse_time(format_time(ms)) == ms`` for every ms in range.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from decimal import ROUND_FLOOR, Decimal, InvalidOperation

__all__ = [
    "MAX_MS",
    "TimeParseError",
    "format_time",
    "parse_epoch",
    "parse_iso",
    "parse_strftime",
    "parse_time",
    "seconds_for_ms_warning",
]

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


def parse_time(text: str, *, now_ms: int | None = None, zone: tzinfo | None = None) -> int:
    """Return epoch milliseconds for ``text`` (see the module docstring for the forms).

    ``now_ms`` pins "now" for relative forms, so callers and tests are deterministic.
    ``zone`` is where an ISO time without a zone is read; None refuses such a time.
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
        return _check_range(text, _parse_iso(text, m, zone))
    raise TimeParseError(
        f"cannot parse time {text!r}: use ISO-8601 with a zone (2026-11-21T10:32:00Z), "
        "epoch milliseconds (1763721120000), or a relative time (now, -15m, -2h, -1d)"
    )


def parse_iso(text: str, zone: tzinfo | None = None) -> int:
    """Epoch ms of an ISO-8601 time (``T`` or a space between date and time); one
    without a zone is read in ``zone`` (None: refused as ambiguous), a bare date is
    midnight there."""
    m = _ISO.match(text.strip())
    if not m:
        raise TimeParseError(
            f"{text!r} is not an ISO-8601 time such as 2026-11-21T10:32:00Z "
            "or 2026-11-21 10:32:00.250"
        )
    return _check_range(text, _parse_iso(text, m, zone, bare_date=zone is not None))


def _parse_iso(
    text: str, m: re.Match[str], default_zone: tzinfo | None, bare_date: bool = False
) -> int:
    year, month, day, hour, minute, second, frac, zone = m.groups()
    if hour is None and not bare_date:
        raise TimeParseError(
            f"{text!r} is a date without a time and zone; write e.g. {text.strip()}T00:00:00Z"
        )
    tz: tzinfo
    if zone is None:
        if default_zone is None:
            raise TimeParseError(
                f"{text!r} has no time zone, so it is ambiguous; append Z for UTC "
                "or an offset such as +01:00"
            )
        tz = default_zone
    elif zone in ("Z", "z"):
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
            int(year), int(month), int(day), int(hour or 0), int(minute or 0),
            int(second or 0), tzinfo=tz,
        )
    except ValueError as e:
        raise TimeParseError(f"{text!r}: {e}") from None
    ms = _epoch_ms(dt)
    if frac:
        ms += int(frac.ljust(9, "0")) // 1_000_000
    return ms


def _epoch_ms(dt: datetime) -> int:
    """Integer arithmetic from the epoch keeps every millisecond exact (no float rounding)."""
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_epoch(value: str | int | float, unit_ms: int) -> int:
    """Epoch ms of a number of seconds (``unit_ms=1000``) or milliseconds (1), given as
    text or a JSON number; fractions are exact (decimal) and floored to the millisecond."""
    if isinstance(value, bool):
        raise TimeParseError(f"expected a number, got {str(value).lower()}")
    try:
        d = Decimal(value.strip() if isinstance(value, str) else str(value))
    except InvalidOperation:
        raise TimeParseError(f"{value!r} is not a number") from None
    if not d.is_finite():
        raise TimeParseError(f"{value!r} is not a finite number")
    return _check_range(str(value), int((d * unit_ms).to_integral_value(rounding=ROUND_FLOOR)))


def parse_strftime(text: str, pattern: str, zone: tzinfo) -> int:
    """Epoch ms of ``text`` read with ``datetime.strptime(text, pattern)``; without
    ``%z`` in the pattern the time is in ``zone``."""
    try:
        dt = datetime.strptime(text.strip(), pattern)
    except ValueError as e:
        raise TimeParseError(f"{text!r} does not match {pattern!r}: {e}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=zone)
    return _check_range(text, _epoch_ms(dt))


def _short(ms: int) -> str:
    text = format_time(ms)
    return text.replace(".000Z", "Z")


def seconds_for_ms_warning(ms: int, text: str | None = None) -> str | None:
    """A warning when ``ms``, read as epoch milliseconds, has ten digits: then it is
    in January 1970, while as seconds it is a date between 2001 and 2286, which is
    almost always what was meant. None otherwise."""
    if not 1_000_000_000 <= ms < 10_000_000_000:
        return None
    shown = text.strip() if text is not None else str(ms)
    return (
        f"{shown} read as milliseconds = {_short(ms)}; as seconds it would be "
        f"{_short(ms * 1000)} — pass {ms * 1000} or an ISO time"
    )


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
