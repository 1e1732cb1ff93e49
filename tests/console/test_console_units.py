"""The console's pure parts: bucket sizing, value rendering, cursors, client settings."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console import browse, timeline
from console.render import PREVIEW_CHARS, human_duration, human_size, preview, show_bytes
from console.settings import SettingsError, client_settings, parse_properties


@given(start=st.integers(0, 2**41), span=st.integers(1, 2 * 365 * 86_400_000))
def test_nice_buckets_cover_the_range_with_at_most_300_bars(start: int, span: int) -> None:
    b = timeline.boundaries(start, start + span)
    step = b[1] - b[0]
    assert b[0] <= start and b[-1] >= start + span
    assert all(y - x == step for x, y in zip(b, b[1:], strict=False))
    assert b[0] % step == 0
    assert len(b) - 1 <= timeline.MAX_BARS + 1
    if span >= 1000:  # above the 1 ms floor, never too few bars to read
        assert len(b) - 1 >= timeline.MAX_BARS // 3


@given(start=st.integers(0, 2**41), span=st.integers(1, 10**10), n=st.integers(1, 2000))
def test_an_explicit_bucket_count_is_kept(start: int, span: int, n: int) -> None:
    b = timeline.boundaries(start, start + span, n)
    assert len(b) == n + 1 and b[0] == start and b[-1] >= start + span


def test_a_reversed_or_empty_range_is_refused() -> None:
    with pytest.raises(ValueError):
        timeline.boundaries(10, 10)
    with pytest.raises(ValueError):
        timeline.boundaries(10, 20, 0)


@given(st.dictionaries(st.integers(0, 1000), st.integers(0, 2**62), min_size=1))
def test_cursor_text_round_trips(cursor: dict[int, int]) -> None:
    assert browse.parse_cursor(browse.format_cursor(cursor)) == cursor


@pytest.mark.parametrize("bad", ["", "x", "1", "1:-2", "a:b"])
def test_bad_cursors_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        browse.parse_cursor(bad)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids), max_leaves=10))
def test_json_objects_and_arrays_are_pretty_printed(doc: object) -> None:
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    shown = show_bytes(raw, limit=len(raw) + 1)
    if isinstance(doc, dict | list):
        assert shown.kind == "json"
        assert json.loads(shown.text) == doc
        assert shown.text == json.dumps(doc, indent=2, ensure_ascii=False)


@given(st.binary(max_size=200))
def test_binary_is_shown_as_a_hex_dump_of_every_byte(data: bytes) -> None:
    shown = show_bytes(data)
    if shown.kind == "hex":
        hexes = "".join(line[10:57].replace(" ", "") for line in shown.text.splitlines())
        assert bytes.fromhex(hexes) == data
    else:
        assert shown.kind in ("text", "json")
        assert json.loads(shown.text) == json.loads(data) if shown.kind == "json" else shown.text == data.decode()


def test_null_text_and_truncation() -> None:
    assert show_bytes(None).kind == "null"
    assert show_bytes(b"hello\tworld").kind == "text"
    assert show_bytes(b"\x00\x01").kind == "hex"
    big = show_bytes(b"a" * 100, limit=10)
    assert big.truncated and big.text == "a" * 10 and big.size == 100


def test_client_properties_use_kafka_names() -> None:
    props = parse_properties(
        "# comment\n! also\nbootstrap.servers = h1:9092,h2:9092\nclient.id: ops\n"
        "request.timeout.ms=5000\ngroup.id=x\nlong=a\\\n  b\n"
    )
    assert props["long"] == "ab"
    s = client_settings(props)
    assert (s.bootstrap_servers, s.client_id, s.request_timeout_ms) == ("h1:9092,h2:9092", "ops", 5000)
    assert s.unused == ("group.id", "long")


@pytest.mark.parametrize("text", [
    "security.protocol=SASL_SSL", "ssl.truststore.location=/x", "sasl.mechanism=PLAIN",
    "request.timeout.ms=soon", "request.timeout.ms=0",
])
def test_settings_the_client_cannot_honour_are_errors(text: str) -> None:
    with pytest.raises(SettingsError):
        client_settings(parse_properties(text))


def test_the_command_refuses_a_client_config_it_cannot_honour(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from client.cli import main

    props = tmp_path / "client.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\nsecurity.protocol=SASL_SSL\n")
    assert main(["console", "--client-config", str(props)]) == 2
    assert "security.protocol=SASL_SSL needs sasl.username" in capsys.readouterr().err
    assert main(["console", "--client-config", str(tmp_path / "missing")]) == 2
    assert "cannot read client config" in capsys.readouterr().err


@given(partitions=st.integers(1, 5000), span=st.integers(1000, 10**11))
def test_a_chart_asks_the_broker_a_bounded_number_of_lookups(partitions: int, span: int) -> None:
    b = timeline.boundaries(0, span, max_bars=timeline.max_bars_for(partitions))
    bars = len(b) - 1
    assert bars * partitions <= max(timeline.MAX_LOOKUPS, 11 * partitions) + partitions
    assert timeline.max_bars_for(12) == timeline.MAX_BARS


UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


@given(st.integers(0, 1024**5))
def test_sizes_are_shown_in_the_largest_fitting_binary_unit_to_three_digits(n: int) -> None:
    number, unit = human_size(n).split(" ")
    scale = UNITS[unit]
    assert n >= scale or n == 0
    assert unit == "TiB" or n < scale * 1024
    if unit == "B":
        assert int(number) == n
    else:
        assert abs(float(number) * scale - n) <= max(0.005 * n, scale * 0.5)


_UNIT_MS = {"day": 86_400_000, "days": 86_400_000, "hour": 3_600_000, "hours": 3_600_000,
            "minute": 60_000, "minutes": 60_000, "second": 1000, "seconds": 1000, "ms": 1}


@pytest.mark.parametrize(("ms", "text"), [
    (172_800_000, "2 days"), (3_600_000, "1 hour"), (900_000, "15 minutes"), (1000, "1 second"),
    (500, "500 ms"), (0, "0 ms"), (604_800_000, "7 days"), (5_430_250, "1 hour 30 minutes 30 seconds 250 ms"),
])
def test_durations_read_in_words(ms: int, text: str) -> None:
    assert human_duration(ms) == text


@given(st.integers(0, 10**13))
def test_a_duration_in_words_adds_up_to_the_exact_milliseconds(ms: int) -> None:
    words = human_duration(ms).split(" ")
    pairs = list(zip(words[::2], words[1::2], strict=True))
    assert sum(int(n) * _UNIT_MS[u] for n, u in pairs) == ms
    assert all(int(n) > 0 for n, _ in pairs) or ms == 0
    assert [_UNIT_MS[u] for _, u in pairs] == sorted({_UNIT_MS[u] for _, u in pairs}, reverse=True)


def test_every_nice_bucket_size_is_one_unit_in_words() -> None:
    """The timeline's round bucket sizes read as "2 days", "15 minutes", never "172800000 ms"."""
    for step in timeline.NICE_STEPS_MS:
        n, unit = human_duration(step).split(" ")
        assert int(n) * _UNIT_MS[unit] == step


@given(st.binary(max_size=2000) | st.text(max_size=2000).map(str.encode))
def test_a_preview_is_one_line_of_bounded_length_and_a_prefix_of_the_value(data: bytes) -> None:
    kind = show_bytes(data).kind
    p = preview(data, kind)
    assert "\n" not in p and "\r" not in p and len(p) <= PREVIEW_CHARS
    if kind == "hex":
        assert bytes.fromhex(p.removesuffix(" …")) == data[: len(p.removesuffix(" …").split())]
    else:
        folded = " ".join(data.decode("utf-8", errors="replace").split())
        assert folded.startswith(p.removesuffix("…").rstrip())


@given(st.text(min_size=0, max_size=3000), st.text(st.characters(min_codepoint=97, max_codepoint=122),
                                                  min_size=1, max_size=20))
def test_a_preview_shows_the_filters_match_when_the_value_has_it(text: str, needle: str) -> None:
    data = text.encode()
    p = preview(data, "text", around=needle)
    assert "\n" not in p and len(p) <= PREVIEW_CHARS
    if needle in " ".join(text.split()).lower():
        assert needle in p.lower()
