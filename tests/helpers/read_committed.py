"""Read one partition from offset 0 to its end as a read_committed confluent-kafka consumer.

librdkafka reports the end with a _PARTITION_EOF event (``enable.partition.eof``); any
other error fails the read, and so does no end within the timeout.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

PARTITION_EOF = -191


def read_committed_to_end(bootstrap: str, topic: str, group: str = "rc", partition: int = 0,
                          timeout: float = 20.0) -> list[tuple[bytes, int]]:
    """(value, offset) of every record a read_committed consumer sees, in order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    seen = []
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == PARTITION_EOF, msg.error()
                return seen
            seen.append((msg.value(), msg.offset()))
    finally:
        c.close()
    raise AssertionError(f"no end of partition within {timeout} s; read {seen}")
