"""Option parsing, range splitting and streaming rate limits (pure planning logic)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import TopicPartition
from pipeline.offsets import OffsetRange, split_ranges
from pipeline.options import OptionError, parse_read_options, parse_write_options
from pipeline.source import _rate_limit

BASE = {"bootstrap.servers": "127.0.0.1:1", "subscribe": "a,b"}


def test_timestamp_bounds_accept_epoch_ms_and_iso_8601() -> None:
    o = parse_read_options(
        {**BASE, "startingtimestamp": "1000", "endingtimestamp": "1970-01-01T00:00:02Z"},
        streaming=False,
    )
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 1000)
    assert (o.ending.kind, o.ending.timestamp) == ("timestamp", 2000)


def test_precedence_is_sparks_timestamp_then_by_timestamp_then_offsets() -> None:
    o = parse_read_options(
        {
            **BASE,
            "startingtimestamp": "5",
            "startingoffsetsbytimestamp": '{"a": {"0": 7}}',
            "startingoffsets": "earliest",
        },
        streaming=False,
    )
    assert o.starting.kind == "timestamp"
    o = parse_read_options(
        {**BASE, "startingoffsetsbytimestamp": '{"a": {"0": 7}}', "startingoffsets": "earliest"},
        streaming=False,
    )
    assert o.starting.kind == "timestamps" and o.starting.per_partition == {"a": {0: 7}}


def test_defaults_are_earliest_to_latest_for_batch_and_latest_for_streams() -> None:
    o = parse_read_options(BASE, streaming=False)
    assert (o.starting.kind, o.ending.kind) == ("earliest", "latest")
    assert parse_read_options(BASE, streaming=True).starting.kind == "latest"


def test_isolation_level_defaults_to_sparks_read_uncommitted() -> None:
    assert parse_read_options(BASE, streaming=False).isolation_level == 0
    for value, level in (("read_committed", 1), (" READ_UNCOMMITTED ", 0)):
        o = parse_read_options({**BASE, "kafka.isolation.level": value}, streaming=True)
        assert o.isolation_level == level


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a"}, "bootstrap.servers"),
        ({"bootstrap.servers": "x:1"}, "exactly one of"),
        ({**BASE, "subscribepattern": "a.*"}, "exactly one of"),
        ({**BASE, "startingtimestamp": "yesterday"}, "startingtimestamp"),
        ({**BASE, "startingtimestamp": "2026-01-01T00:00:00"}, "zone"),
        ({**BASE, "startingoffsets": '{"a": {"0": -3}}'}, ">= -2"),
        ({**BASE, "startingoffsets": "{not json"}, "not valid JSON"),
        ({**BASE, "minpartitions": "0"}, "minpartitions"),
        ({**BASE, "maxrecordsperpartition": "lots"}, "integer"),
        ({**BASE, "endingoffsets": "earliest"}, "earliest"),
        ({**BASE, "startingoffsetsbytimestampstrategy": "guess"}, "latest' or 'error"),
        ({**BASE, "kafka.isolation.level": "serializable"}, "kafka.isolation.level"),
    ],
)
def test_bad_options_fail_with_a_message_naming_them(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_read_options(options, streaming=False)


def test_write_options_map_kafka_names() -> None:
    w = parse_write_options({"bootstrap.servers": "h:1", "topic": "t", "acks": "1",
                             "compression.type": "zstd"})
    assert (w.topic, w.acks, w.compression) == ("t", 1, 4)
    with pytest.raises(OptionError, match="acks"):
        parse_write_options({"bootstrap.servers": "h:1", "acks": "2"})


_ranges = st.lists(
    st.builds(
        lambda p, s, n: OffsetRange("t", p, s, s + n),
        st.integers(0, 50),
        st.integers(0, 10**9),
        st.integers(0, 10**5),
    ),
    max_size=6,
    unique_by=lambda r: r.partition,
)


@given(
    ranges=_ranges,
    min_partitions=st.one_of(st.none(), st.integers(1, 40)),
    max_records=st.one_of(st.none(), st.integers(1, 10**5)),
)
def test_split_ranges_cover_each_offset_exactly_once(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None
) -> None:
    pieces = split_ranges(ranges, min_partitions, max_records)
    for r in ranges:
        mine = sorted(p for p in pieces if p.partition == r.partition)
        if r.size == 0:
            assert mine == []
            continue
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:], strict=False))
        assert all(p.size > 0 for p in mine)
        if max_records:
            assert all(p.size <= max_records for p in mine)
    total = sum(r.size for r in ranges)
    if min_partitions and total >= min_partitions and not max_records:
        # Spark's rounding can fall short of minPartitions by a little, never by half.
        assert len(pieces) >= min(min_partitions, total) // 2


@given(
    backlog=st.dictionaries(st.integers(0, 9), st.tuples(st.integers(0, 1000), st.integers(0, 500)),
                            max_size=6),
    limit=st.integers(1, 2000),
)
def test_rate_limit_reads_exactly_min_of_limit_and_backlog(
    backlog: dict[int, tuple[int, int]], limit: int
) -> None:
    begin = {TopicPartition("t", p): s for p, (s, _n) in backlog.items()}
    end = {TopicPartition("t", p): s + n for p, (s, n) in backlog.items()}
    capped = _rate_limit(begin, end, limit)
    total = sum(end[tp] - begin[tp] for tp in end)
    assert sum(capped[tp] - begin[tp] for tp in end) == min(limit, total)
    assert all(begin[tp] <= capped[tp] <= end[tp] for tp in end)


def test_subscriptions_select_topics_by_list_whole_name_pattern_or_assignment() -> None:
    from pipeline.options import Subscription

    available = {"orders": [0, 1], "orders-dlq": [0], "users": [0, 1, 2]}
    assert Subscription(topics=("users",)).select(available) == {"users": [0, 1, 2]}
    assert Subscription(pattern="orders").select(available) == {"orders": [0, 1]}
    assert Subscription(pattern="orders.*").select(available) == {
        "orders": [0, 1], "orders-dlq": [0]}
    assert Subscription(assign={"users": (2, 0)}).select(available) == {"users": [0, 2]}
    with pytest.raises(OptionError, match="'nope'"):
        Subscription(topics=("users", "nope")).select(available)
    with pytest.raises(OptionError, match=r"no partitions \[7\]"):
        Subscription(assign={"users": (7,)}).select(available)


@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60),
    n=st.integers(1, 64),
    as_string=st.booleans(),
    cut=st.integers(0, 5),
)
def test_vectorised_murmur2_places_keys_like_the_clients_partitioner(
    keys: list[bytes | None], n: int, as_string: bool, cut: int
) -> None:
    import pyarrow as pa

    from client.partitioner import partition_for_key
    from pipeline.partitioning import partitions_for_keys

    if as_string:
        texts = [None if k is None else k.decode("latin-1") for k in keys]
        col = pa.array(texts, type=pa.string())
        raw = [None if t is None else t.encode("utf-8") for t in texts]
    else:
        col = pa.array(keys, type=pa.binary())
        raw = keys
    col = col.slice(min(cut, len(keys)))  # a sliced column has a non-zero offset
    raw = raw[min(cut, len(keys)):]
    got = partitions_for_keys(col, n).tolist()
    assert got == [-1 if k is None else partition_for_key(k, n) for k in raw]


@given(data=st.data(), n=st.integers(1, 64), cut=st.integers(0, 5))
def test_vectorised_murmur2_of_keys_all_one_length_matches_the_clients_partitioner(
    data: st.DataObject, n: int, cut: int
) -> None:
    """Keys of one length (numbers as strings, UUIDs) take the no-gather path."""
    import pyarrow as pa

    from client.partitioner import partition_for_key
    from pipeline.partitioning import partitions_for_keys

    length = data.draw(st.integers(0, 13))
    keys = data.draw(st.lists(st.binary(min_size=length, max_size=length), min_size=1, max_size=60))
    col = pa.array(keys, type=pa.binary()).slice(min(cut, len(keys) - 1))
    raw = keys[min(cut, len(keys) - 1):]
    assert partitions_for_keys(col, n).tolist() == [partition_for_key(k, n) for k in raw]
