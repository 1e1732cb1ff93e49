"""ListOffsets v0-10 over raw sockets against a brute-force oracle.

Batches are built byte for byte (``storage.records.build_batch``) so timestamps
can be anything a producer may send: out of order inside a batch, equal,
spread over days. Every version is asked every kind of question — a
timestamp, LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED — and
each answer is compared with what Kafka's rules say for that version.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import api
from storage.records import Record, build_batch
from tests.helpers.kafka_socket import KafkaSocket, create_topic
from tests.helpers.list_offsets_oracle import expected

NOW = int(time.time() * 1000)
_names = itertools.count()


@pytest.fixture
def broker(shared_broker):  # type: ignore[no-untyped-def]
    """One broker for the module: each test uses its own topic names; the
    restart test restarts it in place."""
    return shared_broker


def produce(raw: KafkaSocket, topic: str, timestamps: list[int]) -> int:
    batch = build_batch([Record(0, ts, None, b"v%d" % i, []) for i, ts in enumerate(timestamps)])
    resp = raw.request(0, 9, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return int(part.base_offset)


def list_offsets(raw: KafkaSocket, version: int, parts: list[tuple[str, int, int]],
                 isolation: int = 0, leader_epoch: int = -1) -> list[Any]:
    topics: dict[str, list[dict[str, int]]] = {}
    for name, index, ts in parts:
        topics.setdefault(name, []).append({
            "partition_index": index, "current_leader_epoch": leader_epoch, "timestamp": ts,
            "max_num_offsets": 1})
    resp = raw.request(2, version, {
        "replica_id": -1, "isolation_level": isolation, "timeout_ms": 1000,
        "topics": [{"name": n, "partitions": p} for n, p in topics.items()]})
    return [p for t in resp.topics for p in t.partitions]




def check(raw: KafkaSocket, topic: str, timestamps: list[int], targets: list[int]) -> None:
    for version in range(1, 11):
        isolation = version % 2 if version >= 2 else 0  # both isolation levels agree
        for target in targets:
            (got,) = list_offsets(raw, version, [(topic, 0, target)], isolation)
            err, ts, off, epoch = expected(version, timestamps, target)
            answer = (got.error_code, got.timestamp, got.offset)
            if err:
                assert got.error_code == err, (version, target, got)
                continue
            assert answer == (0, ts, off), (version, target, answer, (err, ts, off))
            if version >= 4:
                assert got.leader_epoch == epoch, (version, target, got)


timestamp = st.one_of(st.integers(NOW - 30 * 86_400_000, NOW + 1_800_000),
                      st.sampled_from([NOW - 1, NOW - 1, NOW]))
batches_strategy = st.lists(st.lists(timestamp, min_size=1, max_size=40), min_size=1, max_size=6)


def test_every_version_answers_every_question_as_kafka_does(broker: Any) -> None:
    raw = KafkaSocket(broker.port)

    @settings(max_examples=25)
    @given(batches_strategy, st.lists(st.integers(NOW - 31 * 86_400_000, NOW + 1_900_000),
                                       max_size=10))
    def run(batches: list[list[int]], probes: list[int]) -> None:
        topic = f"lo-{next(_names)}"
        create_topic(raw, topic, configs={"segment.bytes": "1024", "index.interval.bytes": "64"})
        timestamps: list[int] = []
        for b in batches:
            assert produce(raw, topic, b) == len(timestamps)
            timestamps += b
        near = sorted({t + d for t in timestamps for d in (-1, 0, 1)})
        check(raw, topic, timestamps, [-1, -2, -3, -4, -5, 0, *probes, *near[::3], *near[-3:]])

    run()


def test_empty_partition_answers(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topic(raw, "empty")
    check(raw, "empty", [], [-1, -2, -3, -4, -5, 0, NOW])


def test_answers_are_the_same_after_a_restart(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topic(raw, "again", configs={"segment.bytes": "1024", "index.interval.bytes": "64"})
    timestamps = [NOW - (i * 7919) % 500_000 for i in range(120)]
    for i in range(0, 120, 20):
        produce(raw, "again", timestamps[i:i + 20])
    targets = [-1, -2, -3, *sorted(set(timestamps))[::5], NOW + 1]
    check(raw, "again", timestamps, targets)
    raw.close()
    broker.restart()
    check(KafkaSocket(broker.port), "again", timestamps, targets)


def test_version_zero_answers_old_style_offsets(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topic(raw, "old")
    produce(raw, "old", [NOW - 5, NOW - 4, NOW - 3])
    resp = raw.request(2, 0, {"replica_id": -1, "topics": [{"name": "old", "partitions": [
        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1},
        {"partition_index": 0, "timestamp": -2, "max_num_offsets": 5},
        {"partition_index": 0, "timestamp": -3, "max_num_offsets": 1},
        {"partition_index": 0, "timestamp": NOW + 10_000_000, "max_num_offsets": 10},
        {"partition_index": 0, "timestamp": 0, "max_num_offsets": 10},
    ]}]})
    parts = resp.topics[0].partitions
    assert [list(p.old_style_offsets) for p in parts[:2]] == [[3], [0]]
    assert parts[2].error_code == 35  # MAX_TIMESTAMP needs v7
    # "Offsets before T" by segment file time: the log end, then segment bases, newest first.
    assert list(parts[3].old_style_offsets) == [3, 0]
    assert list(parts[4].old_style_offsets) == []


def test_duplicate_partitions_unknown_partitions_and_leader_epochs(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topic(raw, "dup", partitions=2)
    produce(raw, "dup", [NOW])
    got = list_offsets(raw, 7, [("dup", 0, -1), ("dup", 0, -2), ("dup", 1, -1), ("nope", 0, -1),
                                ("dup", 9, -1)])
    assert [p.error_code for p in got] == [42, 42, 0, 3, 3]
    assert got[2].offset == 0
    assert list_offsets(raw, 4, [("dup", 0, -1)], leader_epoch=0)[0].offset == 1
    assert list_offsets(raw, 4, [("dup", 0, -1)], leader_epoch=3)[0].error_code == 75
    assert list_offsets(raw, 9, [("dup", 0, -1)], leader_epoch=-7)[0].error_code == 74
    assert list_offsets(raw, 10, [("dup", 0, -9)])[0].error_code == 42
    assert list_offsets(raw, 10, [("dup", 0, -6)])[0].error_code == 35  # needs v11


def test_every_version_is_encoded_as_its_schema_says(broker: Any) -> None:
    """Answers decode with the requested version's schema (fields present only where they exist)."""
    raw = KafkaSocket(broker.port)
    create_topic(raw, "shape")
    produce(raw, "shape", [NOW - 100, NOW - 50])
    for version in range(0, 11):
        cid, frame = raw.frame(2, version, {
            "replica_id": -1, "isolation_level": 0, "timeout_ms": 0, "topics": [
                {"name": "shape", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                  "timestamp": NOW - 60, "max_num_offsets": 1}]}]})
        raw.send(frame)
        got_cid, body = raw.read()
        assert got_cid == cid
        part = body.topics[0].partitions[0]
        if version == 0:
            assert part.error_code == 0
        else:
            assert (part.error_code, part.timestamp, part.offset) == (0, NOW - 50, 1)
        assert api.decode_response(2, version, api.encode_response(2, version, cid, body)[4:])[1] == body
