"""chronolog produce's jsonl and csv parsers and timestamp formats, without a broker.

Round trips use the standard library as the oracle: csv.writer / json.dumps write
random records, the parsers must give back exactly the fields (and, without
--value-field, exactly the input bytes of each record); timestamps are checked
against datetime arithmetic.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.cli._input import CsvParser, JsonLinesParser, LineParser, Parsed, TimestampReader
from client.timeparse import TimeParseError, format_time, seconds_for_ms_warning

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
stamps = st.integers(min_value=0, max_value=253402300799999)
records = st.lists(st.tuples(text, stamps, text), max_size=20)


def QUIET(_: str) -> None:
    """Ten-digit stamps are drawn too; their warning is tested on its own."""


def feed(parser: CsvParser | JsonLinesParser | LineParser, data: bytes, block_lines: int,
         skip: bool = False) -> Parsed:
    """Parse ``data`` split into blocks of ``block_lines`` lines, as read_blocks hands them
    on (the last line without its newline if the input lacks one)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = Parsed([], [], [])
    for i in range(0, len(lines), block_lines):
        _merge(out, parser.parse_block(lines[i:i + block_lines], i + 1, True, skip))
    _merge(out, parser.finish(skip))
    return out


def _merge(out: Parsed, p: Parsed) -> None:
    assert out.keys is not None and out.stamps is not None
    out.keys += p.keys if p.keys is not None else [None] * len(p.values)
    out.stamps += p.stamps if p.stamps is not None else [None] * len(p.values)
    out.values += p.values
    out.errors += p.errors


@given(records, st.integers(min_value=1, max_value=5), st.booleans())
def test_csv_written_by_csv_writer_reads_back_exactly(
    rows: list[tuple[str, int, str]], block: int, crlf: bool
) -> None:
    if not crlf:  # csv.writer quotes a field with \r only when \r ends its lines
        rows = [(k.replace("\r", ""), ts, v.replace("\r", "")) for k, ts, v in rows]
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator="\r\n" if crlf else "\n")
    w.writerow(["key", "ts", "value"])
    for k, ts, v in rows:
        w.writerow([k, ts, v])
    data = buf.getvalue().encode()
    got = feed(CsvParser("key", "ts", "value", [], TimestampReader(warn=QUIET)), data, block)
    assert got.errors == []
    assert list(zip(got.keys or [], got.stamps or [], got.values, strict=True)) == [
        (k.encode(), ts, v.encode()) for k, ts, v in rows
    ]
    # Without --value-field the value is each record's own input bytes.
    whole = feed(CsvParser("key", None, None, []), data, block)
    one_by_one = []
    for k, ts, v in rows:
        b = io.StringIO(newline="")
        csv.writer(b, lineterminator="\r\n" if crlf else "\n").writerow([k, ts, v])
        one_by_one.append(b.getvalue().encode().removesuffix(b"\n").removesuffix(b"\r"))
    assert whole.values == one_by_one


@given(records, st.integers(min_value=1, max_value=5))
def test_json_lines_written_by_json_dumps_read_back_exactly(
    rows: list[tuple[str, int, str]], block: int
) -> None:
    lines = [json.dumps({"k": k, "t": ts, "v": v}, ensure_ascii=bool(ts % 2)) for k, ts, v in rows]
    data = "".join(line + "\n" for line in lines).encode()
    got = feed(JsonLinesParser("k", "t", "v", [], TimestampReader(warn=QUIET)), data, block)
    assert got.errors == []
    assert list(zip(got.keys or [], got.stamps or [], got.values, strict=True)) == [
        (k.encode(), ts, v.encode()) for k, ts, v in rows
    ]
    whole = feed(JsonLinesParser(None, None, None, []), data, block)
    assert whole.values == [line.encode() for line in lines]


def _oracle(dt: datetime) -> int:
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


instants = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 12, 31))
zones = st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata",
                         "Australia/Lord_Howe"])


@given(instants, zones)
def test_zoneless_times_are_read_in_the_given_zone(naive: datetime, zone: str) -> None:
    tz = ZoneInfo(zone)
    want = _oracle(naive.replace(tzinfo=tz))
    iso = naive.isoformat(sep=" ")
    assert TimestampReader("iso", tz).read(iso, 1) == want
    assert TimestampReader("auto", tz).read(iso, 1) == want
    pattern = "%d/%m/%Y %H:%M:%S.%f"
    assert TimestampReader(pattern, tz).read(naive.strftime(pattern), 1) == want


@given(stamps)
def test_epoch_formats_are_exact(ms: int) -> None:
    quiet = TimestampReader("epoch-ms", warn=QUIET)
    assert quiet.read(str(ms), 1) == ms
    assert quiet.read(ms, 1) == ms
    assert TimestampReader("epoch-s").read(f"{ms // 1000}.{ms % 1000:03d}", 1) == ms
    assert TimestampReader("epoch-s").read(f"{ms // 1000}.{ms % 1000:03d}999", 1) == ms
    assert TimestampReader("iso").read(format_time(ms), 1) == ms


def test_zoneless_auto_times_in_tab_separated_input_are_still_refused() -> None:
    with pytest.raises(TimeParseError, match="no time zone"):
        TimestampReader("auto").read("2025-11-21T10:32:00", 1)
    with pytest.raises(TimeParseError, match="as text"):
        TimestampReader("iso").read(1763721120000, 1)


def test_ten_digit_epoch_ms_warns_once_naming_both_readings() -> None:
    said: list[str] = []
    r = TimestampReader("epoch-ms", warn=said.append)
    assert r.read("1700000000", 4) == 1_700_000_000
    assert r.read(1700000001, 5) == 1_700_000_001
    assert r.read("1700000000000", 6) == 1_700_000_000_000
    assert r.suspects == 2
    assert said == [
        "line 4: 1700000000 read as milliseconds = 1970-01-20T16:13:20Z; as seconds it would "
        "be 2023-11-14T22:13:20Z — pass 1700000000000 or an ISO time (--timestamp-format "
        "epoch-s reads seconds)"
    ]
    assert seconds_for_ms_warning(999_999_999) is None
    assert seconds_for_ms_warning(10_000_000_000) is None


@pytest.mark.parametrize(("data", "message"), [
    (b'{"k": "a", "t": 1}\n{"k": "b", "t": 2\n', "line 2: not valid JSON"),
    (b'{"k": "a", "t": 1}\n[1, 2]\n', "line 2: expected a JSON object, got an array"),
    (b'{"k": "a", "t": 1}\n\n{"t": 3}\n', "line 3: no field 'k'"),
    (b'{"k": "a", "t": "yesterday"}\n', "line 1: bad timestamp in field 't'"),
    (b'{"k": "a", "t": true}\n', "line 1: bad timestamp in field 't'"),
])
def test_bad_json_lines_name_the_line_and_why(data: bytes, message: str) -> None:
    got = feed(JsonLinesParser("k", "t", None, []), data, 2)
    assert len(got.errors) == 1 and str(got.errors[0]).startswith(message)


def test_skip_keeps_the_good_lines_and_reports_every_bad_one() -> None:
    data = b'{"k":"a","t":1}\nnope\n{"k":"b","t":2}\n{"t":3}\n{"k":"c","t":4}\n'
    got = feed(JsonLinesParser("k", "t", None, []), data, 2, skip=True)
    assert got.keys == [b"a", b"b", b"c"] and got.stamps == [1, 2, 4]
    assert [str(e).split(":")[0] for e in got.errors] == ["line 2", "line 4"]
    stop = feed(JsonLinesParser("k", "t", None, []), data, 5)
    assert stop.keys == [b"a"] and [str(e).split(":")[0] for e in stop.errors] == ["line 2"]


def test_csv_errors_name_the_line() -> None:
    data = b'k,t\na,1\nb\nc,"2\nd,3\n'
    got = feed(CsvParser("k", "t", None, []), data, 2, skip=True)
    assert got.keys == [b"a"]
    assert [str(e) for e in got.errors] == [
        "line 3: has 1 field(s), the header has 2",
        "line 4: a quoted field is not closed before the end of the input",
    ]
    with pytest.raises(ValueError, match="--key-field 'id' is not a column of the CSV header"):
        feed(CsvParser("id", None, None, []), data, 2, skip=True)


def test_json_field_values_become_bytes_as_documented() -> None:
    data = b'{"k": 42, "v": {"a": [1, true]}}\n{"k": null, "v": null}\n'
    got = feed(JsonLinesParser("k", None, "v", []), data, 1)
    assert got.keys == [b"42", None] and got.values == [b'{"a":[1,true]}', None]


def test_csv_byte_order_mark_and_non_utf8_bytes() -> None:
    data = b'\xef\xbb\xbfk,v\n\xff\xfe,x\n'
    got = feed(CsvParser("k", None, "v", []), data, 1)
    assert got.keys == [b"\xff\xfe"] and got.values == [b"x"]


def test_dst_gap_and_fold_follow_zoneinfo() -> None:
    paris = ZoneInfo("Europe/Paris")
    # 02:30 on the spring-forward day does not exist; zoneinfo reads it with the
    # offset before the change (fold=0), as datetime does.
    naive = datetime(2025, 3, 30, 2, 30)
    assert TimestampReader("iso", paris).read("2025-03-30 02:30:00", 1) == _oracle(
        naive.replace(tzinfo=paris))
    assert _oracle(naive.replace(tzinfo=paris)) == _oracle(
        datetime(2025, 3, 30, 1, 30, tzinfo=UTC) + timedelta(0))
