"""CreatePartitions from real admin clients: topics grow (never shrink) while the broker runs.

The expected partition lists are the counts the test asked for; a producer then writes
to a new partition and a consumer reads it back, so the new logs are real. Restart
persistence of a grown topic is in test_admin_configs.py (with a crash).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import NewPartitions as KpNewPartitions

from tests.broker.admin_common import Shared, admin_broker
from tests.helpers.kafka_socket import KafkaSocket

TIMEOUT = 15.0


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    with admin_broker(tmp_path_factory, "create-partitions") as brokers:
        yield brokers


def partitions_of(ck: AdminClient, topic: str) -> list[int]:
    return sorted(ck.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions)


def ck_grow(ck: AdminClient, topic: str, count: int, validate_only: bool = False) -> None:
    ck.create_partitions([NewPartitions(topic, count)], validate_only=validate_only)[topic].result(TIMEOUT)


def test_confluent_grows_a_topic_and_the_new_partition_takes_records(
        shared: Shared) -> None:
    b, ck, _ = shared
    ck.create_topics([NewTopic("grow", 1, 1)])["grow"].result(TIMEOUT)
    ck_grow(ck, "grow", 4, validate_only=True)
    assert partitions_of(ck, "grow") == [0]
    ck_grow(ck, "grow", 4)
    assert partitions_of(ck, "grow") == [0, 1, 2, 3]
    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce("grow", b"in-the-new-partition", partition=3)
    assert p.flush(TIMEOUT) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "grow", "enable.auto.commit": False})
    c.assign([CkTP("grow", 3, 0)])
    deadline = time.monotonic() + TIMEOUT
    msg = None
    while msg is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        msg = m if m is not None and m.error() is None else None
    c.close()
    assert msg is not None and (msg.partition(), msg.offset(), msg.value()) == (3, 0, b"in-the-new-partition")


def test_shrinking_or_keeping_the_count_is_invalid_partitions(
        shared: Shared) -> None:
    _, ck, kp = shared
    ck.create_topics([NewTopic("fixed", 3, 1)])["fixed"].result(TIMEOUT)
    for count in (2, 3):
        with pytest.raises(KafkaException) as exc:
            ck_grow(ck, "fixed", count)
        assert exc.value.args[0].code() == 37, count
    resp = kp.create_partitions({"fixed": KpNewPartitions(1)}, raise_errors=False)
    assert [(r.name, r.error_code) for r in resp.results] == [("fixed", 37)]
    assert partitions_of(ck, "fixed") == [0, 1, 2]


def test_kafka_python_grows_with_assignments_checked_as_kafka_does(
        shared: Shared) -> None:
    _, ck, kp = shared
    ck.create_topics([NewTopic("assigned", 1, 1)])["assigned"].result(TIMEOUT)
    cases: list[tuple[Any, int]] = [
        (KpNewPartitions(3, [[1], [1]]), 39),     # a broker that does not exist
        (KpNewPartitions(3, [[0]]), 39),          # one assignment for two new partitions
        (KpNewPartitions(3, [[0], [0]]), 0),
    ]
    for new, code in cases:
        resp = kp.create_partitions({"assigned": new}, raise_errors=False)
        assert [r.error_code for r in resp.results] == [code], new
    assert partitions_of(ck, "assigned") == [0, 1, 2]
    resp = kp.create_partitions({"nowhere": KpNewPartitions(2)}, raise_errors=False)
    assert [r.error_code for r in resp.results] == [3]


def test_a_topic_named_twice_is_invalid_request_for_each(
        shared: Shared) -> None:
    b, ck, _ = shared
    ck.create_topics([NewTopic("twice", 1, 1)])["twice"].result(TIMEOUT)
    raw = KafkaSocket(b.port)
    try:
        resp = raw.request(37, 3, {"topics": [{"name": "twice", "count": 2, "assignments": None}] * 2,
                                "timeout_ms": 1000, "validate_only": False})
    finally:
        raw.close()
    assert [(r.name, r.error_code) for r in resp.results] == [("twice", 42), ("twice", 42)]
    assert partitions_of(ck, "twice") == [0]


def test_absurd_counts_and_partitions_get_kafkas_errors_and_the_broker_serves_on(shared: Shared) -> None:
    b, ck, _ = shared
    ck.create_topics([NewTopic("absurd", 1, 1)])["absurd"].result(TIMEOUT)
    raw = KafkaSocket(b.port)
    try:
        for count in (-5, 0, 2**31 - 1):
            resp = raw.request(37, 0, {"topics": [{"name": "absurd", "count": count, "assignments": None}],
                                    "timeout_ms": 1000, "validate_only": False})
            assert [r.error_code for r in resp.results] == [37], count
        resp = raw.request(21, 0, {"topics": [{"name": "absurd", "partitions": [
            {"partition_index": -1, "offset": 0}, {"partition_index": 2**31 - 1, "offset": -1}]}],
            "timeout_ms": 1000})
        assert [p.error_code for p in resp.topics[0].partitions] == [3, 3]
        resp = raw.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": "absurd", "configs": [
            {"name": "x" * 5000, "config_operation": 9, "value": None}]}], "validate_only": False})
        assert [r.error_code for r in resp.responses] == [42]
    finally:
        raw.close()
    assert partitions_of(ck, "absurd") == [0]
