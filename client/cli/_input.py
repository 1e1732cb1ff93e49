"""How ``chronolog produce`` turns input lines into key, value and timestamp columns.

Three input formats share one interface (``parse_block`` over a block of whole
lines, ``finish`` at the end of the input), so the produce loop and its error
handling are the same for all:

- ``lines`` (:class:`LineParser`): the whole line is the value, or tab-separated
  columns picked by number (``--key-column``, ``--timestamp-column``);
- ``jsonl`` (:class:`JsonLinesParser`): one JSON object per line, fields by name;
- ``csv`` (:class:`CsvParser`): a header row, then records by Python's csv rules
  (quoted fields may hold the delimiter, quotes and line breaks).

Invariants: without ``--value-field`` the value is the record's input bytes
untouched (the line without its ending; a CSV record spanning lines keeps its
inner line breaks); a malformed line raises or reports a ``ValueError`` whose
message starts with ``line N:``, N counted from 1 over the whole input; with
``skip`` a block's bad lines are reported and the rest kept, otherwise the block
ends at the first bad line; blank lines of jsonl and csv input are not records.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import Any

import msgspec

from client.aio import ProducerRecord
from client.timeparse import (
    TimeParseError,
    parse_epoch,
    parse_iso,
    parse_strftime,
    parse_time,
    seconds_for_ms_warning,
)

TIMESTAMP_FORMATS = ("auto", "iso", "epoch-ms", "epoch-s")


@dataclass
class Parsed:
    """Columns of the records of one block, in input order (keys/stamps None when the
    input has no such column); ``errors`` are the lines left out."""

    keys: list[bytes | None] | None
    values: list[bytes | None]
    stamps: list[int | None] | None
    errors: list[ValueError] = field(default_factory=list)


class TimestampReader:
    """A timestamp column or field (text, or a JSON number) as epoch ms.

    ``fmt``: ``auto`` (what ``--time`` takes: ISO-8601 with a zone, epoch ms,
    ``-15m``; a JSON number is epoch ms), ``iso``, ``epoch-ms``, ``epoch-s`` or a
    ``strptime`` pattern (any text with a ``%``). ``zone`` is where a time without
    a zone is read (``iso``, a pattern without ``%z``, and ``auto`` when given);
    None keeps ``auto`` refusing such times. A ten-digit epoch read as milliseconds
    is warned about once on stderr (``warn``) and counted in ``suspects``.
    """

    def __init__(self, fmt: str = "auto", zone: tzinfo | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        if fmt not in TIMESTAMP_FORMATS and "%" not in fmt:
            raise ValueError(f"--timestamp-format must be one of {', '.join(TIMESTAMP_FORMATS)} "
                             f"or a strftime pattern such as '%d/%m/%Y %H:%M:%S', got {fmt!r}")
        self.fmt = fmt
        self.zone = zone
        self.suspects = 0
        self._warn = warn or (lambda text: print(f"warning: {text}", file=sys.stderr))

    def read(self, raw: Any, lineno: int) -> int:
        if isinstance(raw, bool) or raw is None or isinstance(raw, dict | list):
            raise TimeParseError(f"expected a time, got {json.dumps(raw)}")
        fmt = self.fmt
        if fmt == "epoch-s":
            return parse_epoch(raw, 1000)
        if fmt == "epoch-ms" or (fmt == "auto" and not isinstance(raw, str)):
            ms = parse_epoch(raw, 1)
        elif isinstance(raw, str):
            if fmt == "auto":
                ms = parse_time(raw, zone=self.zone)
                if not raw.strip().isdigit():
                    return ms
            elif fmt == "iso":
                return parse_iso(raw, self.zone or UTC)
            else:
                return parse_strftime(raw, fmt, self.zone or UTC)
        else:
            raise TimeParseError(f"expected a time as text for --timestamp-format {fmt}, "
                                 f"got the number {raw}")
        warning = seconds_for_ms_warning(ms, str(raw))
        if warning is not None:
            self.suspects += 1
            if self.suspects == 1:
                self._warn(f"line {lineno}: {warning} (--timestamp-format epoch-s reads seconds)")
        return ms


class LineParser:
    """Turns one input line into a ProducerRecord according to the column options."""

    def __init__(
        self,
        separator: bytes,
        key_column: int | None,
        timestamp_column: int | None,
        value_column: int | None,
        headers: list[tuple[str, bytes]],
        timestamps: TimestampReader | None = None,
    ) -> None:
        for name, col in (("key", key_column), ("timestamp", timestamp_column),
                          ("value", value_column)):
            if col is not None and col < 1:
                raise ValueError(f"--{name}-column counts from 1, got {col}")
        if not separator:
            raise ValueError("--separator must not be empty")
        self.sep = separator
        self.key_col = key_column
        self.ts_col = timestamp_column
        self.value_col = value_column
        self.headers = headers
        self.timestamps = timestamps or TimestampReader()
        self.split = any(c is not None for c in (key_column, timestamp_column, value_column))
        used = [c for c in (key_column, timestamp_column, value_column) if c is not None]
        if len(set(used)) != len(used):
            raise ValueError("key, timestamp and value columns must differ")
        self.need = max(used, default=0)

    def parse(self, line: bytes, lineno: int) -> ProducerRecord:
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if not self.split:
            return ProducerRecord(value=line, headers=self.headers)
        cols = line.split(self.sep)
        if len(cols) < self.need:
            raise ValueError(
                f"line {lineno}: has {len(cols)} column(s), column {self.need} is needed"
            )
        key = cols[self.key_col - 1] if self.key_col else None
        ts: int | None = None
        if self.ts_col:
            raw = cols[self.ts_col - 1]
            try:
                ts = self.timestamps.read(raw.decode("ascii", "replace"), lineno)
            except TimeParseError as e:
                raise ValueError(f"line {lineno}: bad timestamp: {e}") from None
        if self.value_col:
            value = cols[self.value_col - 1]
        else:
            skip = {c - 1 for c in (self.key_col, self.ts_col) if c}
            value = self.sep.join(c for i, c in enumerate(cols) if i not in skip)
        return ProducerRecord(key=key, value=value, headers=self.headers, timestamp=ts)

    def parse_block(
        self, lines: list[bytes], first_lineno: int, has_cr: bool = True, skip: bool = False
    ) -> Parsed:
        """Columns of whole lines without their ``\\n`` (see the module docstring for
        ``skip``). ``has_cr=False`` says no line holds a ``\\r`` (no CRLF to strip)."""
        if not self.split:
            values: list[bytes | None] = lines  # type: ignore[assignment]
            if has_cr and any(line.endswith(b"\r") for line in lines):
                values = [line[:-1] if line.endswith(b"\r") else line for line in lines]
            return Parsed(None, values, None)
        out = Parsed([], [], [])
        assert out.keys is not None and out.stamps is not None
        for i, line in enumerate(lines):
            try:
                r = self.parse(line, first_lineno + i)
            except ValueError as e:
                out.errors.append(e)
                if skip:
                    continue
                break
            out.keys.append(r.key)  # type: ignore[arg-type]  # parse keeps bytes
            out.values.append(r.value)  # type: ignore[arg-type]
            out.stamps.append(r.timestamp)
        if not self.key_col:
            out.keys = None
        if not self.ts_col:
            out.stamps = None
        return out

    def finish(self, skip: bool = False) -> Parsed:
        return Parsed(None, [], None)


def _field_bytes(value: Any) -> bytes | None:
    """A JSON or CSV field as record bytes: text as UTF-8, null as null, anything else
    as its compact JSON text."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class _FieldParser:
    """What the jsonl and csv parsers share: the named fields and the timestamp rule."""

    def __init__(self, key_field: str | None, timestamp_field: str | None,
                 value_field: str | None, headers: list[tuple[str, bytes]],
                 timestamps: TimestampReader | None = None) -> None:
        named = [f for f in (key_field, timestamp_field, value_field) if f is not None]
        if len(set(named)) != len(named):
            raise ValueError("key, timestamp and value fields must differ")
        self.key_field = key_field
        self.ts_field = timestamp_field
        self.value_field = value_field
        self.headers = headers
        self.timestamps = timestamps or TimestampReader()

    def _stamp(self, raw: Any, lineno: int) -> int:
        try:
            return self.timestamps.read(raw, lineno)
        except TimeParseError as e:
            raise ValueError(f"line {lineno}: bad timestamp in field {self.ts_field!r}: {e}") \
                from None

    def _columns(self) -> Parsed:
        return Parsed([] if self.key_field else None, [], [] if self.ts_field else None)


_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "true or false", type(None): "null"}


class JsonLinesParser(_FieldParser):
    """One JSON object per line (JSON Lines); fields are taken by name."""

    def parse_block(
        self, lines: list[bytes], first_lineno: int, has_cr: bool = True, skip: bool = False
    ) -> Parsed:
        out = self._columns()
        decode = msgspec.json.decode
        for i, line in enumerate(lines):
            lineno = first_lineno + i
            if has_cr and line.endswith(b"\r"):
                line = line[:-1]
            if not line.strip():
                continue
            try:
                try:
                    obj = decode(line)
                except msgspec.DecodeError as e:
                    raise ValueError(f"line {lineno}: not valid JSON: {e}") from None
                if not isinstance(obj, dict):
                    raise ValueError(f"line {lineno}: expected a JSON object, "
                                     f"got {_JSON_TYPES.get(type(obj), 'a value')}")
                key = self._get(obj, self.key_field, lineno) if self.key_field else None
                ts = (self._stamp(self._get(obj, self.ts_field, lineno), lineno)
                      if self.ts_field else None)
                value = (self._get(obj, self.value_field, lineno) if self.value_field
                         else line)
            except ValueError as e:
                out.errors.append(e)
                if skip:
                    continue
                break
            if out.keys is not None:
                out.keys.append(_field_bytes(key))
            if out.stamps is not None:
                out.stamps.append(ts)
            out.values.append(value if isinstance(value, bytes) else _field_bytes(value))
        return out

    @staticmethod
    def _get(obj: dict[str, Any], name: str | None, lineno: int) -> Any:
        try:
            return obj[name]  # type: ignore[index]
        except KeyError:
            raise ValueError(f"line {lineno}: no field {name!r}") from None

    def finish(self, skip: bool = False) -> Parsed:
        return self._columns()


class _NeedMore(Exception):
    """The block ended inside a CSV record: its lines wait for the next block."""


class _Feed:
    """The lines csv.reader reads, with their numbers; at the block's end it raises
    :class:`_NeedMore` (more input may follow) or, at the input's end, stops."""

    def __init__(self, lines: list[tuple[bytes, int]], at_end: bool) -> None:
        self.lines = lines
        self.i = 0
        self.at_end = at_end
        self.ran_out = False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self.i >= len(self.lines):
            if self.at_end:
                self.ran_out = True
                raise StopIteration
            raise _NeedMore
        line = self.lines[self.i][0]
        self.i += 1
        # The line break goes back in, so a quoted field spanning lines keeps it;
        # surrogateescape lets bytes that are not UTF-8 through unchanged.
        return line.decode("utf-8", "surrogateescape") + "\n"


class CsvParser(_FieldParser):
    """A header row naming the fields, then one record per row (Python's csv rules)."""

    def __init__(self, key_field: str | None, timestamp_field: str | None,
                 value_field: str | None, headers: list[tuple[str, bytes]],
                 timestamps: TimestampReader | None = None, delimiter: str = ",") -> None:
        super().__init__(key_field, timestamp_field, value_field, headers, timestamps)
        if len(delimiter) != 1:
            raise ValueError(f"a CSV --separator is one character, got {delimiter!r}")
        self.delimiter = delimiter
        # csv refuses fields over 128 KiB by default; a record value may be larger.
        csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
        self.header: list[str] | None = None
        self._index: dict[str, int] = {}
        self._carry: list[tuple[bytes, int]] = []

    def parse_block(
        self, lines: list[bytes], first_lineno: int, has_cr: bool = True, skip: bool = False
    ) -> Parsed:
        if first_lineno == 1 and lines and lines[0].startswith(b"\xef\xbb\xbf"):
            lines = [lines[0][3:], *lines[1:]]  # a UTF-8 byte order mark (Excel writes one)
        pending = self._carry + [(line, first_lineno + i) for i, line in enumerate(lines)]
        return self._parse(pending, at_end=False, skip=skip)

    def finish(self, skip: bool = False) -> Parsed:
        return self._parse(self._carry, at_end=True, skip=skip)

    def _parse(self, pending: list[tuple[bytes, int]], at_end: bool, skip: bool) -> Parsed:
        out = self._columns()
        feed = _Feed(pending, at_end)
        reader = csv.reader(feed, delimiter=self.delimiter)
        self._carry = []
        while True:
            start = feed.i
            try:
                row = next(reader)
            except _NeedMore:
                self._carry = pending[start:]
                break
            except StopIteration:
                break
            except csv.Error as e:
                err = ValueError(f"line {pending[start][1]}: {e}")
            else:
                try:
                    if feed.ran_out:
                        raise ValueError(f"line {pending[start][1]}: a quoted field is not "
                                         "closed before the end of the input")
                    if not row:
                        continue
                    if self.header is None:
                        self._set_header(row, pending[start][1])
                        continue
                    self._add(out, row, pending[start:feed.i])
                    continue
                except _BadHeader:
                    raise
                except ValueError as e:
                    err = e
            out.errors.append(err)
            if not skip:
                self._carry = []
                break
        return out

    def _set_header(self, row: list[str], lineno: int) -> None:
        self.header = row
        self._index = {name: i for i, name in reversed(list(enumerate(row)))}
        for opt, name in (("--key-field", self.key_field), ("--timestamp-field", self.ts_field),
                          ("--value-field", self.value_field)):
            if name is not None and name not in self._index:
                raise _BadHeader(f"{opt} {name!r} is not a column of the CSV header "
                                 f"(line {lineno}: {', '.join(map(repr, row))})")

    def _add(self, out: Parsed, row: list[str], lines: list[tuple[bytes, int]]) -> None:
        lineno = lines[0][1]
        assert self.header is not None
        if len(row) != len(self.header):
            raise ValueError(f"line {lineno}: has {len(row)} field(s), "
                             f"the header has {len(self.header)}")
        ts = self._stamp(row[self._index[self.ts_field]], lineno) if self.ts_field else None
        if self.value_field:
            value = row[self._index[self.value_field]].encode("utf-8", "surrogateescape")
        else:
            value = b"\n".join(line for line, _ in lines)
            if value.endswith(b"\r"):
                value = value[:-1]
        if out.keys is not None:
            out.keys.append(row[self._index[self.key_field]]  # type: ignore[index]
                            .encode("utf-8", "surrogateescape"))
        if out.stamps is not None:
            out.stamps.append(ts)
        out.values.append(value)


class _BadHeader(ValueError):
    """The header lacks a field an option names: the whole input is unusable, never skipped."""


InputParser = LineParser | JsonLinesParser | CsvParser
__all__ = ["CsvParser", "InputParser", "JsonLinesParser", "LineParser", "Parsed",
           "TimestampReader", "TIMESTAMP_FORMATS"]
