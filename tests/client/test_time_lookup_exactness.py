"""Produce → offsets_for_times / read_time_range / consume, checked against a brute-force scan.

Hypothesis generates records with out-of-order and equal CreateTime timestamps
spread over partitions and over several produce calls (so over several
batches); every lookup the client makes against the real broker must equal the
scan of what was produced.
"""

from __future__ import annotations

import time

import pytest
from client_oracle import (
    Produced,
    by_partition,
    end_offset,
    first_at_or_after,
    query_times,
    time_range,
    unique_topic,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import ProducerRecord, SyncClient, TopicPartition

# Two days ago: in the past (the broker refuses > 1 h ahead) and well inside the
# default 7-day retention, so no retention check can delete what a test wrote.
BASE = (time.time_ns() // 1_000_000 - 2 * 86_400_000) // 1000 * 1000

fixture_ok = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    max_examples=20,
)

record_st = st.tuples(
    st.integers(min_value=0, max_value=2),           # partition
    st.integers(min_value=0, max_value=5_000),       # timestamp offset from BASE
    st.one_of(st.none(), st.binary(max_size=8)),     # key
    st.one_of(st.none(), st.binary(max_size=32)),    # value
)
# Several produce calls, each becoming one batch per partition.
calls_st = st.lists(st.lists(record_st, min_size=1, max_size=25), min_size=1, max_size=4)


def produce_calls(c: SyncClient, topic: str, calls: list[list[tuple]]) -> list[Produced]:  # type: ignore[type-arg]
    log: list[Produced] = []
    next_off = {0: 0, 1: 0, 2: 0}
    for call in calls:
        for p in range(3):
            recs = [
                ProducerRecord(key=k, value=v, timestamp=BASE + dt, headers=[("h", k)])
                for part, dt, k, v in call
                if part == p
            ]
            if not recs:
                continue
            offsets = c.produce(topic, recs, partition=p)
            assert offsets == list(range(next_off[p], next_off[p] + len(recs)))
            for off, r in zip(offsets, recs, strict=True):
                log.append(
                    Produced(p, off, r.timestamp, r.key, r.value, (("h", r.key),))  # type: ignore[arg-type]
                )
            next_off[p] += len(recs)
    return log


# Tiny segments and a tiny index interval make lookups cross segments and use the
# offset/time indexes instead of one linear scan.
SMALL_SEGMENTS = {"segment.bytes": "2048", "index.interval.bytes": "100"}


@pytest.mark.parametrize("configs", [None, SMALL_SEGMENTS], ids=["default", "small-segments"])
@fixture_ok
@given(calls=calls_st)
def test_offsets_for_times_equals_scan(
    sync_client: SyncClient,
    configs: dict[str, str] | None,
    calls: list[list[tuple]],  # type: ignore[type-arg]
) -> None:
    topic = unique_topic("oft")
    sync_client.create_topic(topic, partitions=3, configs=configs)
    log = produce_calls(sync_client, topic, calls)
    parts = by_partition(log)
    for t in query_times([r.timestamp for r in log]):
        got = sync_client.offsets_for_times(topic, t)
        want = {p: first_at_or_after(parts.get(p, []), t) for p in range(3)}
        assert got == want, t
    # One ListOffsets round for all partitions at once gives the raw (offset, ts) pairs.
    t = query_times([r.timestamp for r in log])[len(log) // 2]
    got_many = sync_client.list_offsets({TopicPartition(topic, p): t for p in range(3)})
    for p in range(3):
        hit = first_at_or_after(parts.get(p, []), t)
        assert got_many[TopicPartition(topic, p)] == (hit if hit else (-1, -1))
    assert sync_client.latest(topic) == {p: end_offset(parts.get(p, [])) for p in range(3)}
    assert sync_client.earliest(topic) == {0: 0, 1: 0, 2: 0}
    max_ts = sync_client.max_timestamp(topic)
    for p in range(3):
        recs = parts.get(p, [])
        if not recs:
            assert max_ts[p] is None
        else:
            m = max(r.timestamp for r in recs)
            assert max_ts[p] == (min(r.offset for r in recs if r.timestamp == m), m)
    sync_client.delete_topic(topic)


@fixture_ok
@given(
    calls=calls_st,
    bounds=st.tuples(st.integers(-10, 5_010), st.integers(-10, 5_010)),
    subset=st.one_of(st.none(), st.sets(st.integers(0, 2), min_size=1)),
)
def test_read_time_range_equals_scan(
    sync_client: SyncClient,
    calls: list[list[tuple]],  # type: ignore[type-arg]
    bounds: tuple[int, int],
    subset: set[int] | None,
) -> None:
    topic = unique_topic("range")
    sync_client.create_topic(topic, partitions=3)
    log = produce_calls(sync_client, topic, calls)
    parts = by_partition(log)
    start, end = BASE + bounds[0], BASE + bounds[1]
    got = [
        (r.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
        for r in sync_client.read_time_range(
            topic, start, end, None if subset is None else sorted(subset)
        )
    ]
    wanted_parts = sorted(parts) if subset is None else sorted(subset & set(parts))
    want = [
        (r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
        for p in wanted_parts
        for r in time_range(parts[p], start, end)
    ]
    assert got == want
    ranges = sync_client.time_range_offsets(topic, start, end)
    for p in range(3):
        sel = time_range(parts.get(p, []), start, end)
        if sel:
            assert ranges[p] == (sel[0].offset, sel[-1].offset + 1)
        else:
            assert ranges[p][0] == ranges[p][1]
    sync_client.delete_topic(topic)


@fixture_ok
@given(
    calls=calls_st,
    window=st.tuples(st.integers(0, 80), st.integers(0, 80)),
)
def test_consume_yields_exactly_the_offset_range(
    sync_client: SyncClient, calls: list[list[tuple]], window: tuple[int, int]  # type: ignore[type-arg]
) -> None:
    topic = unique_topic("consume")
    sync_client.create_topic(topic, partitions=3)
    log = produce_calls(sync_client, topic, calls)
    parts = by_partition(log)
    lo, hi = min(window), max(window)
    for p in range(3):
        recs = parts.get(p, [])
        hw = end_offset(recs)
        s = min(lo, hw)
        got = [(r.offset, r.timestamp, r.key, r.value) for r in sync_client.consume(topic, p, s, hi)]
        want = [(r.offset, r.timestamp, r.key, r.value) for r in recs if s <= r.offset < hi]
        assert got == want
        # fetch() at an offset inside a batch drops the batch's earlier records.
        if recs and s < hw:
            fetched, high = sync_client.fetch(topic, p, s)
            assert high == hw
            assert [r.offset for r in fetched] == list(range(s, s + len(fetched)))
            assert fetched
    sync_client.delete_topic(topic)
