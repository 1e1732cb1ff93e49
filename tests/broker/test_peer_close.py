"""A client that sends requests and goes away loses none of them.

Kafka's contract: an acks=0 Produce gets no answer, and a connection its peer closes
is closed gracefully, every request already received being served. The broker's pump
(broker/pump.py) serves Produce and Fetch later than it reads them, and back-pressure
holds whole frames unparsed; both must still be served when the peer closes (fully or
half) right after its last write. Checked over raw sockets and with a real acks=0
librdkafka producer that closes right after flush().
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.helpers.kafka_socket import KafkaSocket, produce_frame
from tests.helpers.offsets import WAIT_S, latest_offsets, new_topic, settled_offsets


@pytest.fixture
def broker(shared_broker):  # type: ignore[no-untyped-def]
    """One broker for the module: every test here writes to its own topics."""
    return shared_broker


def _acks0_frames(raw: KafkaSocket, topic: str, requests: int, per_request: int) -> list[bytes]:
    return [produce_frame(raw, topic, [b"v%d-%d" % (r, i) for i in range(per_request)],
                          acks=0)[1] for r in range(requests)]


@pytest.mark.parametrize("how", ["close", "half-close"])
def test_acks_zero_requests_written_then_closed_are_all_appended(broker: Any, how: str) -> None:
    topic = f"peer-close-{how}"
    new_topic(broker.port, topic)
    raw = KafkaSocket(broker.port)
    frames = _acks0_frames(raw, topic, requests=60, per_request=25)
    raw.send(*frames)
    if how == "half-close":
        raw.sock.shutdown(socket.SHUT_WR)
        assert raw.closed_by_peer(), "the broker must close a half-closed connection"
    raw.close()
    assert settled_offsets(broker.port, topic, 1, [60 * 25]) == [60 * 25]


def test_frames_held_by_back_pressure_are_served_after_the_peer_closes(
        broker_factory: Any) -> None:
    # One request may be queued at a time: the rest of one write waits unparsed.
    b = broker_factory(overrides={"queued.max.requests": "1"})
    new_topic(b.port, "held")
    raw = KafkaSocket(b.port)
    frames = _acks0_frames(raw, "held", requests=40, per_request=50)
    raw.send(*frames)
    raw.close()
    assert settled_offsets(b.port, "held", 1, [40 * 50]) == [40 * 50]


def test_an_offset_commit_behind_acks_zero_produces_is_kept_after_the_close(broker: Any) -> None:
    new_topic(broker.port, "commit-behind")
    raw = KafkaSocket(broker.port)
    frames = _acks0_frames(raw, "commit-behind", requests=20, per_request=10)
    _, commit = raw.frame(8, 8, {
        "group_id": "g-close", "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "commit-behind", "partitions": [
            {"partition_index": 0, "committed_offset": 200, "committed_leader_epoch": -1,
             "committed_metadata": "last"}]}]})
    raw.send(*frames, commit)
    raw.close()
    assert settled_offsets(broker.port, "commit-behind", 1, [200]) == [200]
    check = KafkaSocket(broker.port)
    deadline = time.monotonic() + WAIT_S
    while True:
        resp = check.request(9, 8, {"groups": [{"group_id": "g-close", "topics": [
            {"name": "commit-behind", "partition_indexes": [0]}]}], "require_stable": False})
        part = resp.groups[0].topics[0].partitions[0] if resp.groups[0].topics else None
        if part is not None and part.committed_offset == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    check.close()
    assert part is not None and (part.committed_offset, part.metadata) == (200, "last")


def test_a_bad_frame_still_stops_what_follows_it(broker: Any) -> None:
    """Serving what a leaving peer sent must not serve past a request the broker refused."""
    new_topic(broker.port, "bad-behind")
    raw = KafkaSocket(broker.port)
    before = _acks0_frames(raw, "bad-behind", requests=5, per_request=10)
    after = _acks0_frames(raw, "bad-behind", requests=5, per_request=10)
    unknown = b"\x7f\x00" + b"\x00" * 10  # API key 32512: not served, closes the connection
    raw.send(*before, len(unknown).to_bytes(4, "big") + unknown, *after)
    raw.close()
    assert settled_offsets(broker.port, "bad-behind", 1, [50]) == [50]
    time.sleep(0.5)
    assert latest_offsets(broker.port, "bad-behind", 1) == [50]


@pytest.mark.parametrize("attempt", range(3))
def test_librdkafka_acks_zero_producer_closing_after_flush_loses_nothing(
        broker: Any, attempt: int) -> None:
    topic = f"acks0-rdkafka-{attempt}"
    new_topic(broker.port, topic, partitions=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 0,
                         "linger.ms": 0, "batch.num.messages": 25})
    for i in range(3000):
        producer.produce(topic, value=b"r%d" % i, partition=i % 3)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    del producer  # closes its sockets now, as a short-lived process does at exit
    assert settled_offsets(broker.port, topic, 3, [1000] * 3) == [1000] * 3
