"""Log end offsets read over the raw wire, and topics made the same way.
"""

from __future__ import annotations

import time

from tests.helpers.kafka_socket import KafkaSocket, create_topic


def settled_offsets(port: int, topic: str, partitions: int, want: list[int]) -> list[int]:
    """The log end offsets once they reach ``want`` or stop moving for a second."""
    deadline = time.monotonic() + WAIT_S
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = latest_offsets(port, topic, partitions)
        if now == want:
            return now
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > 1.0:
            return now
        time.sleep(0.05)
    return latest_offsets(port, topic, partitions)


def new_topic(port: int, topic: str, partitions: int = 1) -> None:
    raw = KafkaSocket(port)
    create_topic(raw, topic, partitions=partitions)
    raw.close()


WAIT_S = 20.0


def latest_offsets(port: int, topic: str, partitions: int) -> list[int]:
    raw = KafkaSocket(port)
    try:
        resp = raw.request(2, 7, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 0,
                               "topics": [{"name": topic, "partitions": [
                                   {"partition_index": p, "current_leader_epoch": -1,
                                    "timestamp": -1} for p in range(partitions)]}]})
    finally:
        raw.close()
    got = {p.partition_index: p.offset for p in resp.topics[0].partitions}
    return [got[p] for p in range(partitions)]
