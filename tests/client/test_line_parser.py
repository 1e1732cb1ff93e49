"""chronolog produce's line parsing: columns, separators, timestamps, line endings."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.cli.produce import LineParser


def test_whole_line_is_the_value_without_column_options() -> None:
    p = LineParser(b"\t", None, None, None, [("h", b"1")])
    r = p.parse(b"a\tb\r\n", 1)
    assert (r.key, r.value, r.timestamp, list(r.headers)) == (None, b"a\tb", None, [("h", b"1")])


def test_key_and_timestamp_columns_are_taken_out_and_the_rest_rejoined() -> None:
    p = LineParser(b",", 2, 4, None, [])
    r = p.parse(b"x,key,y,1700000000123,z\n", 1)
    assert (r.key, r.value, r.timestamp) == (b"key", b"x,y,z", 1700000000123)
    r = LineParser(b",", 1, 2, 4, []).parse(b"k,2025-11-21T10:32:00Z,skip,val\n", 1)
    assert (r.key, r.value, r.timestamp) == (b"k", b"val", 1763721120000)


def test_relative_timestamps_in_data_use_the_clock() -> None:
    now = time.time_ns() // 1_000_000
    r = LineParser(b"\t", None, 1, None, []).parse(b"now\tv\n", 1)
    assert r.timestamp is not None and abs(r.timestamp - now) < 60_000
    r = LineParser(b"\t", None, 1, None, []).parse(b"-15m\tv\n", 1)
    assert r.timestamp is not None and abs(r.timestamp - (now - 900_000)) < 60_000


@pytest.mark.parametrize(
    ("line", "message"),
    [(b"only-one-column\n", "line 7: has 1 column"), (b"2025-11-21T10:32:00\tv\n", "no time zone")],
)
def test_bad_lines_name_the_line_and_the_problem(line: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LineParser(b"\t", None, 1, 2, []).parse(line, 7)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="counts from 1"):
        LineParser(b"\t", 0, None, None, [])
    with pytest.raises(ValueError, match="must differ"):
        LineParser(b"\t", 1, 1, None, [])
    with pytest.raises(ValueError, match="empty"):
        LineParser(b"", 1, None, None, [])


# (\r is excluded: a final \r\n is a CRLF line ending, by design.)
@given(st.lists(st.binary(max_size=8).filter(lambda b: not {9, 10, 13} & set(b)),
                min_size=3, max_size=6))
def test_columns_round_trip(cols: list[bytes]) -> None:
    line = b"\t".join(cols) + b"\n"
    r = LineParser(b"\t", 2, None, None, []).parse(line, 1)
    assert r.key == cols[1]
    assert r.value == b"\t".join(cols[:1] + cols[2:])
