"""The scenarios every Python client suite (tests/broker/test_clients_*.py) runs, written once.

Each suite wraps its client (confluent-kafka, kafka-python, aiokafka) in a small adapter
with the ``Client`` methods below; the adapter turns the client's messages and lookup
answers into ``Got`` / ``Found`` so that one oracle check serves all three. What a client
does differently (its configuration names, its codecs, its no-match answer) stays in its
suite's adapter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    Rec,
    assert_appended_after,
    assert_stored_with,
    first_at_or_after,
    fixed_records,
    for_kafka_python,
    index_valued,
    probe_times,
    records,
    timestamp_lists,
    topic_name,
)


@dataclass(frozen=True)
class Got:
    """A consumed record as any client reports it; ``timestamp_type`` is "create",
    "log_append" or what the client said when it was neither."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_type: object
    timestamp: int


@dataclass(frozen=True)
class Found:
    """A time lookup's answer: the offset, and its timestamp where the client reports one."""

    offset: int
    timestamp: int | None


class Client:
    """What a suite's adapter provides; each subclass wraps one client library."""

    #: whether ``offsets_for_times`` reports the found record's timestamp
    lookup_timestamps = True
    #: ``fixed_records`` as this client can send them
    records: Callable[[int, str, int], list[Rec]]

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> None:
        raise NotImplementedError

    def produce(self, topic: str, recs: list[Rec], partition: int = 0,
                compression: str | None = None, **conf: Any) -> list[int]:
        """Send recs in order; the offsets they got (-1 where acks=0 tells none)."""
        raise NotImplementedError

    def consume(self, topic: str, start: int, n: int, partition: int = 0) -> list[Got]:
        """n records from offset ``start`` on, with no group membership."""
        raise NotImplementedError

    def offsets_for_times(self, topic: str, times: list[int],
                          partition: int = 0) -> dict[int, Found | None]:
        """The client's time lookup for each of ``times`` (None: no record at or after it)."""
        raise NotImplementedError


def filled_topic(client: Client, prefix: str, n: int, partitions: int = 1,
                 partition: int = 0) -> str:
    """A new topic holding n of the client's fixed records (tagged ``prefix``) in ``partition``."""
    topic = topic_name(prefix)
    client.create_topic(topic, partitions)
    client.produce(topic, client.records(n, prefix, 0), partition)
    return topic


def kafka_python_records(n: int, tag: str, seed: int = 0, null_headers: bool = False) -> list[Rec]:
    """``fixed_records`` as kafka-python and aiokafka can send them."""
    return for_kafka_python(fixed_records(n, tag, seed), null_headers)


#: kafka-python's (and its fork aiokafka's) timestamp_type values
KAFKA_PYTHON_TIMESTAMP_TYPES = {0: "create", 1: "log_append"}


def from_kafka_python(m: Any) -> Got:
    """A kafka-python or aiokafka ConsumerRecord as a Got."""
    return Got(m.offset, m.key, m.value, tuple(m.headers),
               KAFKA_PYTHON_TIMESTAMP_TYPES.get(m.timestamp_type, m.timestamp_type), m.timestamp)


def collect(n: int, poll: Callable[[int], Sequence[Any]], timeout: float) -> list[Any]:
    """Poll (asking for the number still missing) until n messages came or time is up."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += poll(n - len(got))
    assert len(got) == n, (n, got)
    return got


def assert_same(msgs: list[Got], recs: list[Rec], first_offset: int, log_append: bool = False) -> None:
    for i, (m, r) in enumerate(zip(msgs, recs, strict=True)):
        assert m.offset == first_offset + i
        assert (m.key, m.value) == (r.key, r.value)
        assert m.headers == r.headers
        if log_append:
            assert m.timestamp_type == "log_append"
        else:
            assert (m.timestamp_type, m.timestamp) == ("create", r.timestamp)


def check_lookups(client: Client, topic: str, stamped: list[tuple[int, int]],
                  partition: int = 0) -> None:
    times = probe_times([ts for _, ts in stamped])
    got = client.offsets_for_times(topic, times, partition)
    for t in times:
        expect = first_at_or_after(stamped, t)
        if expect is None:
            assert got[t] is None, (t, got[t])
            continue
        found = got[t]
        assert found is not None and found.offset == expect, (t, found, stamped)
        if client.lookup_timestamps:
            assert found.timestamp == min(ts for o, ts in stamped if o == expect)


def every_acks_setting_round_trips(client: Client, compression: str | None,
                                   confs: list[dict[str, Any]], n: int) -> None:
    """n records per producer configuration, each send following on from the last;
    everything reads back byte-exact and is stored with the requested codec."""
    topic = topic_name(f"rt-{compression}")
    client.create_topic(topic)
    sent: list[Rec] = []
    for seed, conf in enumerate(confs):
        recs = client.records(n, str(compression), seed * n)
        offsets = client.produce(topic, recs, compression=compression, **conf)
        assert_appended_after(sent, recs, offsets, conf)
        sent += recs
    assert_same(client.consume(topic, 0, len(sent)), sent, 0)
    assert_stored_with(client.broker, topic, compression)


def lookups_match_the_oracle(client: Client, timestamps: list[int]) -> None:
    topic = topic_name("oft")
    client.create_topic(topic)
    offsets = client.produce(topic, index_valued(timestamps))
    check_lookups(client, topic, list(zip(offsets, timestamps, strict=True)))


def records_read_back_exactly(client: Client, recs: list[Rec], compression: str | None = None,
                              lookups: bool = True) -> None:
    topic = topic_name("arb")
    client.create_topic(topic)
    offsets = client.produce(topic, recs, compression=compression)
    assert_same(client.consume(topic, 0, len(recs)), recs, 0)
    if lookups:
        check_lookups(client, topic, [(o, r.timestamp) for o, r in zip(offsets, recs, strict=True)])


def log_append_time_stamps_and_lookups(client: Client, n: int, split: int,
                                       restart: bool) -> None:
    """A LogAppendTime topic written in two sends: broker stamps, non-decreasing and
    within the test's clock, answer the lookups (after a restart too, from disk)."""
    topic = topic_name("lat")
    client.create_topic(topic, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    recs = client.records(n, "lat", 0)
    client.produce(topic, recs[:split])
    client.produce(topic, recs[split:])
    after = int(time.time() * 1000)
    msgs = client.consume(topic, 0, len(recs))
    assert_same(msgs, recs, 0, log_append=True)
    stamped = [(m.offset, m.timestamp) for m in msgs]
    stamps = [ts for _, ts in stamped]
    assert stamps == sorted(stamps)
    assert before - 1000 <= stamps[0] and stamps[-1] <= after + 1000
    check_lookups(client, topic, stamped)
    if restart:
        client.broker.restart()
        check_lookups(client, topic, stamped)
        assert_same(client.consume(topic, 0, len(recs)), recs, 0, log_append=True)


def lookup_and_record_tests(examples: tuple[int, int], prepared: Callable[[list[Rec]], list[Rec]] = list,
                            compression: str | None = None, lookups: bool = True) -> type:
    """The hypothesis tests every client suite runs, as a test class for its module (which
    provides the ``client`` fixture): time lookups against the oracle, and arbitrary records
    (fitted by ``prepared`` to what the client can send, sent with ``compression``) read
    back exactly, and with ``lookups`` their time lookups against the oracle too (each
    Python client consumer costs time; one client checking this is enough for ``make
    test``); ``examples`` is how many hypothesis draws for each. A fresh class a call:
    hypothesis wants each test run by one executor."""

    class TestLookupsAndRecords:
        @settings(max_examples=examples[0])
        @given(timestamps=timestamp_lists)
        def test_offsets_for_times_matches_the_oracle_with_unordered_and_equal_create_times(
            self, client: Client, timestamps: list[int]
        ) -> None:
            lookups_match_the_oracle(client, timestamps)

        @settings(max_examples=examples[1])
        @given(drawn=st.lists(records, min_size=1, max_size=30))
        def test_arbitrary_records_read_back_exactly(
            self, client: Client, drawn: list[Rec]
        ) -> None:
            records_read_back_exactly(client, prepared(drawn), compression, lookups)

    return TestLookupsAndRecords
