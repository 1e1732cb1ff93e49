"""WriteTxnMarkers (27) against a real broker: a raw request's per-partition answers are
Kafka's (ProducerAppendInfo.appendEndTxnMarker and KafkaApis.handleWriteTxnMarkersRequest),
and what a marker that is let through does is seen by a real read_committed client.

The happy path through Kafka's own tool (``kafka-transactions abort``) is
tests/ecosystem/test_kafka_cli_tools.py; this file covers the refusals.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTP

from broker.acl import authorizer as A
from protocol.errors import ErrorCode
from tests.helpers.acls import STANDARD_AUTHORIZER
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.kafka_socket import KafkaSocket

TIMEOUT = 15.0
ME = "User:ANONYMOUS"


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number(), dict(STANDARD_AUTHORIZER)).start()
    try:
        yield b
    finally:
        b.stop()


def _markers(raw: KafkaSocket, pid: int, epoch: int, coordinator_epoch: int,
             parts: dict[str, list[int]], commit: bool = False) -> dict[tuple[str, int], int]:
    """One marker's per-partition error codes."""
    got = raw.request(27, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in parts.items()]}]})
    [marker] = got.markers
    assert marker.producer_id == pid
    return {(t.name, p.partition_index): p.error_code for t in marker.topics
            for p in t.partitions}


def _read_committed(bootstrap: str, topic: str) -> list[tuple[bytes, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc",
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    seen = []
    try:
        c.assign([CkTP(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == -191, msg.error()  # _PARTITION_EOF
                return seen
            seen.append((msg.value(), msg.offset()))
    finally:
        c.close()
    raise AssertionError(f"no end of partition within 20 s; read {seen}")


def _ends(raw: KafkaSocket, topic: str) -> tuple[int, int]:
    """(high watermark, last stable offset) of partition 0, by ListOffsets."""
    out = []
    for isolation in (0, 1):
        got = raw.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        out.append(got.topics[0].partitions[0].offset)
    return out[0], out[1]


def test_markers_are_refused_per_partition_as_kafka_refuses_them(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held until answered
    admin.create_topics([NewTopic("wm", 2, 1)])["wm"].result(TIMEOUT)
    sent: dict[bytes, int] = {}
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-wm",
                  "transaction.timeout.ms": 300_000})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for v in (b"a0", b"a1", b"a2"):
        p.produce("wm", v, partition=0, on_delivery=lambda e, m: sent.__setitem__(m.value(),
                                                                                   m.offset()))
    assert p.flush(TIMEOUT) == 0
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        [state] = kp.describe_producers([KpTP("wm", 0)])[KpTP("wm", 0)].active_producers
    finally:
        kp.close()
    pid, epoch = state.producer_id, state.producer_epoch
    assert state.current_transaction_start_offset == sent[b"a0"]
    raw = KafkaSocket(broker.port)
    try:
        assert _ends(raw, "wm") == (sent[b"a2"] + 1, sent[b"a0"])
        # Unknown topic and partition refused; the real partition gets its marker.
        assert _markers(raw, pid, epoch, 5, {"wm": [0, 7], "nope": [0]}) == {
            ("wm", 0): 0, ("wm", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        marker = sent[b"a2"] + 1
        assert _ends(raw, "wm") == (marker + 1, marker + 1)  # the LSO reached the HW
        assert _read_committed(broker.bootstrap, "wm") == []  # a0..a2 read as aborted
        # A coordinator epoch below the last marker's: fenced, nothing appended.
        assert _markers(raw, pid, epoch, 4, {"wm": [0]}) == {
            ("wm", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        # A newer producer epoch is let through (the partition's epoch moves up to it) ...
        assert _markers(raw, pid, epoch + 1, 5, {"wm": [0]}) == {("wm", 0): 0}
        # ... after which the old epoch is stale.
        assert _markers(raw, pid, epoch, 5, {"wm": [0]}) == {
            ("wm", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        assert _ends(raw, "wm") == (marker + 2, marker + 2)  # only the let-through marker
        # Without CLUSTER_ACTION on the cluster every partition is refused, nothing appended.
        for b in ((A.CLUSTER, A.ALTER, A.ALLOW), (A.CLUSTER, A.CLUSTER_ACTION, A.DENY)):
            got = raw.request(30, 2, {"creations": [{
                "resource_type": b[0], "resource_name": A.CLUSTER_NAME,
                "resource_pattern_type": A.LITERAL, "principal": ME, "host": "*",
                "operation": b[1], "permission_type": b[2]}]})
            assert [r.error_code for r in got.results] == [0]
        deadline = time.monotonic() + TIMEOUT
        while (codes := _markers(raw, pid, epoch + 1, 6, {"wm": [0, 1]})) != {
                ("wm", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                ("wm", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}:
            assert time.monotonic() < deadline, codes
            time.sleep(0.1)
        assert _ends(raw, "wm") == (marker + 2, marker + 2)
    finally:
        raw.close()
    del p
