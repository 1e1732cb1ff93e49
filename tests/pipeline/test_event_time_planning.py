"""The eventTime option and how a broker's plan becomes Spark tasks (pure planning logic)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.offsets import OffsetRange, event_time_tasks
from pipeline.options import NO_END, OptionError, parse_read_options

BASE = {"bootstrap.servers": "127.0.0.1:1", "subscribe": "a"}


def test_event_time_takes_the_time_bounds_as_the_window() -> None:
    o = parse_read_options({**BASE, "eventTime": "true", "startingTimestamp": "1000",
                            "endingTimestamp": "1970-01-01T00:00:02Z"}, streaming=False)
    assert o.event_time and not o.positional_window
    assert o.event_window() == (1000, 2000)


def test_an_absent_bound_leaves_that_side_of_the_window_open() -> None:
    o = parse_read_options({**BASE, "eventtime": "true", "startingtimestamp": "5"},
                           streaming=False)
    assert o.event_window() == (5, NO_END)
    o = parse_read_options({**BASE, "eventtime": "true", "endingtimestamp": "9"},
                           streaming=False)
    assert o.event_window() == (0, 9)


def test_without_event_time_time_bounds_stay_positional() -> None:
    o = parse_read_options({**BASE, "startingtimestamp": "5"}, streaming=False)
    assert not o.event_time and o.positional_window
    o = parse_read_options({**BASE, "eventtime": "false", "endingoffsetsbytimestamp":
                            '{"a": {"0": 7}}'}, streaming=False)
    assert o.positional_window
    assert not parse_read_options(BASE, streaming=False).positional_window


def test_event_time_on_a_stream_is_an_error_naming_the_positional_meaning() -> None:
    with pytest.raises(OptionError, match="batch reads .* only.*positional"):
        parse_read_options({**BASE, "eventTime": "true", "startingTimestamp": "5"},
                           streaming=True)
    # "false" is what a stream does anyway.
    parse_read_options({**BASE, "eventTime": "false", "startingTimestamp": "5"}, streaming=True)


@pytest.mark.parametrize("extra", [
    {"startingOffsets": '{"a": {"0": 3}}', "endingTimestamp": "9"},
    {"startingTimestamp": "1", "endingOffsets": '{"a": {"0": 3}}'},
    {"startingOffsetsByTimestamp": '{"a": {"0": 3}}'},
])
def test_event_time_refuses_offsets_and_per_partition_times(extra: dict[str, str]) -> None:
    with pytest.raises(OptionError, match="eventTime"):
        parse_read_options({**BASE, "eventTime": "true", **extra}, streaming=False)


def test_event_time_needs_a_time_bound() -> None:
    with pytest.raises(OptionError, match="needs startingTimestamp and/or endingTimestamp"):
        parse_read_options({**BASE, "eventTime": "true"}, streaming=False)
    with pytest.raises(OptionError, match="must be true or false"):
        parse_read_options({**BASE, "eventTime": "maybe", "startingTimestamp": "1"},
                           streaming=False)


def _plans(draw: st.DrawFn) -> list[OffsetRange]:
    out = []
    for t in ("a", "b"):
        for p in range(draw(st.integers(0, 3))):
            at = draw(st.integers(0, 50))
            for _ in range(draw(st.integers(0, 5))):
                at += draw(st.integers(0, 30))
                n = draw(st.integers(1, 40))
                out.append(OffsetRange(t, p, at, at + n, draw(st.integers(n * 60, n * 200))))
                at += n
    return out


plans = st.composite(_plans)()


@given(plan=plans, min_parts=st.one_of(st.none(), st.integers(1, 12)),
       per_task=st.one_of(st.none(), st.integers(1, 60)))
def test_tasks_cover_every_planned_offset_once_and_nothing_else(
    plan: list[OffsetRange], min_parts: int | None, per_task: int | None
) -> None:
    tasks = event_time_tasks(plan, min_parts, per_task)
    planned = sorted((r.topic, r.partition, o) for r in plan for o in range(r.start, r.end))
    read = sorted((r.topic, r.partition, o) for t in tasks for r in t for o in range(r.start, r.end))
    assert read == planned
    for t in tasks:
        assert t and len({(r.topic, r.partition) for r in t}) == 1
        assert list(t) == sorted(t) and all(r.size > 0 for r in t)
        if per_task:
            assert sum(r.size for r in t) <= per_task
    # Uncut ranges keep the broker's bytes; cut ones share them, never more than the whole.
    for r in plan:
        pieces = [q for t in tasks for q in t if (q.topic, q.partition) == (r.topic, r.partition)
                  and r.start <= q.start < r.end]
        if len(pieces) == 1:
            assert pieces[0] == r
        assert sum(q.bytes for q in pieces) == r.bytes
    if not min_parts and not per_task:  # by default one task per partition with a plan
        assert len(tasks) == len({(r.topic, r.partition) for r in plan})
