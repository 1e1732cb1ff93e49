"""How the console shows a key, value or header: text, pretty JSON, or hex.

Invariants: UTF-8 that parses as a JSON object or array is shown
pretty-printed (2-space indent, keys in their original order); other UTF-8 with
no control characters but tab/newline/CR is text; anything else is a hex dump. At most ``limit`` bytes are shown and the cut is said, so a
10 MB value costs the page no more than ``limit``. A preview is one line of at most
``PREVIEW_CHARS`` characters whatever the value holds. A duration is written in whole
units (``2 days``, ``1 hour 30 minutes``) that add up to it exactly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["Shown", "show_bytes", "hexdump", "human_duration", "human_size", "preview"]

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


PREVIEW_CHARS = 120
_SPACE_RUN = re.compile(r"\s+")


def preview(data: bytes | None, kind: str, chars: int = PREVIEW_CHARS, around: str = "") -> str:
    """One line of at most ``chars`` characters for a table cell (``kind`` from :func:`show_bytes`).

    Text and JSON have their whitespace runs (newlines, indents) folded to one space, as
    written (JSON is not re-encoded, so a preview never parses a large value); a hex
    value shows its first bytes as hex pairs. A cut ends in ``…``. With ``around`` (a
    filter's text) found past what the line would show, the line starts shortly before
    it, after a ``…``, so the match is in view.
    """
    if data is None:
        return "null"
    if kind == "hex":
        n = max(1, (chars - 1) // 3)
        pairs = " ".join(f"{b:02x}" for b in data[:n])
        return pairs + (" …" if len(data) > n else "")
    # A head of 8 bytes a character costs no more than the preview shows (whitespace
    # folding can shrink it; the rest is cut anyway); a match is looked for as far as
    # the full view shows.
    head = data[: DEFAULT_LIMIT if around else 8 * chars]
    text = _SPACE_RUN.sub(" ", head.decode("utf-8", errors="replace")).strip()
    cut = len(head) < len(data)
    if around:
        m = re.search(re.escape(_SPACE_RUN.sub(" ", around).strip()), text, re.IGNORECASE)
        if m and m.end() > chars - 1:
            text = "…" + text[max(0, m.start() - chars // 4):]
    if len(text) > chars or cut:
        return text[: chars - 1].rstrip() + "…"
    return text
