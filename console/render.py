"""How the console shows a key, value or header: text, pretty JSON, or hex.

Invariants: UTF-8 that parses as a JSON object or array is shown
pretty-printed (2-space indent, keys in their original order); other UTF-8 with
no control characters but tab/newline/CR is text; anything else is a hex dump. At most ``limit`` bytes are shown and the cut is said, so a
10 MB value costs the page no more than ``limit``. A duration is written in whole
units (``2 days``, ``1 hour 30 minutes``) that add up to it exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["Shown", "show_bytes", "hexdump", "human_duration", "human_size"]

DEFAULT_LIMIT = 16 * 1024
_ALLOWED_CONTROL = {"\t", "\n", "\r"}


@dataclass(frozen=True)
class Shown:
    kind: str  # "null", "text", "json" or "hex"
    text: str
    size: int
    truncated: bool = False


def hexdump(data: bytes) -> str:
    """16 bytes a line: offset, hex pairs, and the printable ASCII beside them."""
    lines = []
    for i in range(0, len(data), 16):
        chunk = data[i : i + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{i:08x}  {hexes:<47}  |{text}|")
    return "\n".join(lines)


def _is_text(s: str) -> bool:
    return not any((c < " " and c not in _ALLOWED_CONTROL) or c == "\x7f" for c in s)


def show_bytes(data: bytes | None, limit: int = DEFAULT_LIMIT) -> Shown:
    if data is None:
        return Shown("null", "null", 0)
    size = len(data)
    head = data[:limit]
    truncated = size > limit
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        # A cut in the middle of a multi-byte character is still text.
        if truncated and e.start >= len(head) - 3 and e.reason == "unexpected end of data":
            text = head[: e.start].decode("utf-8", errors="strict")
        else:
            return Shown("hex", hexdump(head), size, truncated)
    if not truncated and text.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(text)
        except ValueError:
            pass
        else:
            return Shown("json", json.dumps(parsed, indent=2, ensure_ascii=False), size)
    if not _is_text(text):
        return Shown("hex", hexdump(head), size, truncated)
    return Shown("text", text, size, truncated)


def human_size(n: int) -> str:
    """``1536`` → ``1.5 KiB``: binary units, three significant digits (bytes exact)."""
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            break
    return f"{size:.3g} {unit}" if size < 1000 else f"{size:.0f} {unit}"


_DURATION_UNITS = (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1000))


def human_duration(ms: int) -> str:
    """``172800000`` → ``2 days``, ``5_430_250`` → ``1 hour 30 minutes 30 seconds 250 ms``.

    Exact (no rounding), so a bucket size or a setting reads as what it is.
    """
    if ms < 0:
        raise ValueError(f"a duration is >= 0, got {ms}")
    parts: list[str] = []
    rest = int(ms)
    for name, size in _DURATION_UNITS:
        n, rest = divmod(rest, size)
        if n:
            parts.append(f"{n} {name}{'' if n == 1 else 's'}")
    if rest or not parts:
        parts.append(f"{rest} ms")
    return " ".join(parts)

