"""kafkajs 2.2.4 (Node) against the real broker: producer, admin and consumer.

kafkajs shares no code with the Python clients or librdkafka. It sends CreateTopics v3
with -1 partitions and replication factor unless told otherwise, ListOffsets v3, and
it ignores the broker's minimum versions. Each test runs ``tests/js/driver.js`` in its
own Node process: a JSON job in, one JSON result per step out, bytes as base64.
``make test`` installs kafkajs into tests/js/node_modules (``make check-clients``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    BASE_TS,
    Rec,
    assert_stored_with,
    fetch_all,
    fixed_records,
    index_valued,
    probe_times,
    running_broker,
    timestamp_lists,
    topic_name,
)
from tests.helpers.kafka_socket import KafkaSocket, metadata
from tests.helpers.kafkajs import (
    JS_DIR,
    NODE,
    as_messages,
    create,
    expected_by_time,
    kafkajs,
    unb64,
)

DEFAULT_PARTITIONS = 2


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    assert NODE and (JS_DIR / "node_modules" / "kafkajs").is_dir(), \
        "kafkajs is not installed: `make check-clients` installs it"
    with running_broker(tmp_path_factory, "kafkajs",
                        {"num.partitions": str(DEFAULT_PARTITIONS)}) as b:
        yield b












def for_kafkajs(recs: Sequence[Rec]) -> list[Rec]:
    """Headers with unique names and non-null values: what kafkajs can send."""
    out = []
    for r in recs:
        headers = dict((k, v if v is not None else b"") for k, v in r.headers)
        out.append(Rec(r.key, r.value, tuple(headers.items()), r.timestamp))
    return out




def test_admin_creates_topics_with_broker_defaults_and_lists_them(kb: BrokerProcess) -> None:
    """kafkajs sends CreateTopics v3 with -1/-1; Apache Kafka (and Chronolog) take the defaults."""
    names = [topic_name("js-admin"), topic_name("js-admin")]
    created, listed = kafkajs(kb, [{"op": "createTopics", "topics": names}, {"op": "listTopics"}])
    assert created is True
    assert set(names) <= set(listed)
    md = metadata(KafkaSocket(kb.port), 12, names, auto=False)
    assert {t.name: (t.error_code, len(t.partitions)) for t in md.topics} == \
        {n: (0, DEFAULT_PARTITIONS) for n in names}
    # Creating again: kafkajs reports TOPIC_ALREADY_EXISTS as "nothing created" (false).
    assert kafkajs(kb, [{"op": "createTopics", "topics": names[:1]}]) == [False]


def test_producer_records_read_back_exactly(kb: BrokerProcess) -> None:
    topic = topic_name("js-exact")
    create(kb, topic, partitions=1)
    recs = for_kafkajs(fixed_records(40, "js"))
    [offsets] = kafkajs(kb, [{"op": "produce", "topic": topic, "messages": as_messages(recs)}])
    assert [(o["partition"], o["offset"], o["error"]) for o in offsets] == [(0, i, 0) for i in range(40)]
    with KafkaSocket(kb.port) as conn:
        stored = fetch_all(conn, topic)
    assert [Rec(r.key, r.value, tuple(r.headers), r.timestamp) for r in stored] == recs


def test_gzip_batches_read_back_exactly(kb: BrokerProcess) -> None:
    """GZIP is kafkajs's one built-in codec (the others need plugins)."""
    topic = topic_name("js-gzip")
    create(kb, topic, partitions=1)
    recs = for_kafkajs(fixed_records(30, "gz", seed=3))
    kafkajs(kb, [{"op": "produce", "topic": topic, "messages": as_messages(recs), "gzip": True}])
    with KafkaSocket(kb.port) as conn:
        stored = fetch_all(conn, topic)
    assert [Rec(r.key, r.value, tuple(r.headers), r.timestamp) for r in stored] == recs
    assert_stored_with(kb, topic, "gzip")




@settings(max_examples=4)
@given(first=timestamp_lists, second=timestamp_lists, acks=st.sampled_from([-1, 1]))
def test_offsets_by_timestamp_match_the_oracle(kb: BrokerProcess, first: list[int], second: list[int],
                                               acks: int) -> None:
    """Out-of-order and equal CreateTimes in two partitions, probed at every stamp, its
    neighbours and after the last record, all in one Node process."""
    topic = topic_name("js-time")
    create(kb, topic, partitions=2)
    per_partition = {0: first, 1: second}
    messages = as_messages(index_valued(first), 0) + as_messages(index_valued(second), 1)
    probes = probe_times(first + second)
    produced, answers = kafkajs(kb, [
        {"op": "produce", "topic": topic, "messages": messages, "acks": acks},
        {"op": "offsetsByTime", "topic": topic, "timestamps": probes},
    ])
    assert [o["error"] for o in produced] == [0] * len(messages)
    for t, answer in zip(probes, answers, strict=True):
        got = {a["partition"]: a["offset"] for a in answer}
        assert got == {p: expected_by_time(list(enumerate(ts)), t) for p, ts in per_partition.items()}, t


def test_fetch_topic_offsets_reports_low_and_high(kb: BrokerProcess) -> None:
    topic = topic_name("js-wm")
    create(kb, topic, partitions=2)
    recs = index_valued([BASE_TS + i for i in range(5)])
    _, offsets = kafkajs(kb, [
        {"op": "produce", "topic": topic, "messages": as_messages(recs, 1)},
        {"op": "fetchTopicOffsets", "topic": topic},
    ])
    assert sorted((o["partition"], o["low"], o["high"]) for o in offsets) == [(0, "0", "0"), (1, "0", "5")]


def test_two_consumers_split_the_partitions_read_every_record_once_and_commit(kb: BrokerProcess) -> None:
    """kafkajs's consumer always joins a group (JoinGroup v5 with its own RoundRobinAssigner,
    SyncGroup v3, OffsetCommit v5). Two members started together share one generation:
    disjoint partition sets covering the topic, every record read once, and their commits
    are the group's committed offsets afterwards."""
    topic = topic_name("js-group")
    create(kb, topic, partitions=4)
    per_partition = {p: index_valued([BASE_TS + 7 * i + p for i in range(3 + p)]) for p in range(4)}
    messages = [m for p, recs in per_partition.items() for m in as_messages(recs, p)]
    group = topic_name("js-g")
    _, got, listed, described, fetched = kafkajs(kb, [
        {"op": "produce", "topic": topic, "messages": messages},
        {"op": "consume", "topic": topic, "groupId": group, "count": len(messages), "commit": True,
         "members": 2},
        {"op": "listGroups"},
        {"op": "describeGroups", "groups": [group]},
        {"op": "fetchOffsets", "groupId": group, "topic": topic},
    ])
    # Both members left on disconnect (LeaveGroup v3, the batch form): the group is Empty.
    assert described == [{"groupId": group, "state": "Empty", "protocolType": "consumer", "members": []}]
    assert sorted((m["partition"], m["offset"]) for m in got) == \
        sorted((p, i) for p, recs in per_partition.items() for i in range(len(recs)))
    owned = [{m["partition"] for m in got if m["member"] == i} for i in (0, 1)]
    assert owned[0] and owned[1] and not owned[0] & owned[1], owned
    for m in got:
        assert unb64(m["value"]) == per_partition[m["partition"]][m["offset"]].value
        assert m["timestamp"] == per_partition[m["partition"]][m["offset"]].timestamp
    assert {"groupId": group, "protocolType": "consumer"} in listed
    [offsets] = fetched
    assert sorted((p["partition"], int(p["offset"])) for p in offsets["partitions"]) == \
        [(p, len(recs)) for p, recs in per_partition.items()]


def test_consumer_restarts_where_a_reset_by_time_put_the_group(kb: BrokerProcess) -> None:
    """``chronolog groups reset-offsets --to-time`` moves a kafkajs group: its next consumer
    starts at the oracle's offset in every partition (out-of-order CreateTimes; a time
    after a partition's last record starts at its end, where only new records arrive)."""
    topic = topic_name("js-reset")
    create(kb, topic, partitions=3)
    times = {0: [BASE_TS + d for d in (30, 10, 50, 20)], 1: [BASE_TS + d for d in (5, 6)],
             2: [BASE_TS + d for d in (40, 40, 25)]}
    messages = [m for p, ts in times.items() for m in as_messages(index_valued(ts), p)]
    group = topic_name("js-rg")
    total = len(messages)
    kafkajs(kb, [{"op": "produce", "topic": topic, "messages": messages},
                 {"op": "consume", "topic": topic, "groupId": group, "count": total, "commit": True}])
    t = BASE_TS + 22
    chronolog = str(Path(sys.executable).parent / "chronolog")
    done = subprocess.run([chronolog, "groups", "reset-offsets", "--group", group, "--topic", topic,
                           "--to-time", str(t), "--bootstrap-server", kb.bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    want = {p: expected_by_time(list(enumerate(ts)), t) for p, ts in times.items()}
    sentinels = [m for p in times for m in as_messages(index_valued([BASE_TS + 9_000]), p)]
    expect = sum(len(ts) - want[p] + 1 for p, ts in times.items())
    _, got = kafkajs(kb, [{"op": "produce", "topic": topic, "messages": sentinels},
                          {"op": "consume", "topic": topic, "groupId": group, "count": expect}])
    firsts: dict[int, int] = {}
    for m in got:
        firsts.setdefault(m["partition"], m["offset"])
    assert firsts == want
