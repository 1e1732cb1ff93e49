"""Structured logging for the broker: human text or one JSON object per line.

Invariants:
- ``setup_logging`` owns the root logger's handlers: calling it again replaces
  them, so a broker restarted in-process never logs each line twice.
- JSON lines always carry ``ts`` (UTC, ISO 8601 with milliseconds), ``level``,
  ``logger`` and ``msg``; anything passed through ``extra={...}`` is added under
  its own key, and ``exc`` holds a formatted traceback when there is one.
  A value JSON cannot encode is written as its ``repr`` rather than dropping
  the line: a log line is never lost to a formatting error.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """Format a record as one compact JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=repr, separators=(",", ":"), ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``ts level logger: msg key=value ...`` — extras stay visible in text mode too."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [
            f"{k}={v!r}" if isinstance(v, str) and (" " in v or not v) else f"{k}={v}"
            for k, v in record.__dict__.items()
            if k not in _STANDARD_ATTRS and not k.startswith("_")
        ]
        if extras:
            head, sep, tail = line.partition("\n")
            line = head + " " + " ".join(extras) + sep + tail
        return line


def setup_logging(
    fmt: Literal["text", "json"] | str = "text",
    level: str | int = "INFO",
    stream: TextIO | None = None,
) -> logging.Handler:
    """Install one handler on the root logger; returns it (tests attach to its stream)."""
    if fmt not in ("text", "json"):
        raise ValueError(f"log format must be 'text' or 'json', not {fmt!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    return handler
