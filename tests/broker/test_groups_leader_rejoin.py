"""A kafka-python group leader rejoins whenever the metadata its assignment was computed
from changes (a topic appearing after the first join, partitions added). As the only
member it must get its next generation at once, as from Kafka, not after the rebalance
timeout (kafka-python's is max.poll.interval.ms, 5 minutes) with the consumer stalled.
Under CI load the first join often beats the topic's metadata, so subscribe() first
assigned nothing and then stalled on the rejoin."""

from __future__ import annotations

import time
import uuid
from typing import Any


def test_a_sole_kafka_python_leader_picks_up_added_partitions_promptly(broker: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic

    topic = f"rejoin-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic}",
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      metadata_max_age_ms=200)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while c.assignment() != {TopicPartition(topic, 0)}:
            assert time.monotonic() < deadline, c.assignment()
            c.poll(timeout_ms=1000)
        admin.create_partitions({topic: NewPartitions(2)})
        p.send(topic, b"on the new partition", partition=1).get(30)
        # The leader sees 2 partitions in its metadata, rejoins alone, and reads partition 1
        # well inside the 5-minute rebalance timeout a stalled join would take.
        # (Polls of 1 s: kafka-python 3.0 returned from 0.1 s polls mid-rejoin and then
        # left the SyncGroup answer unapplied until close.)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while not got:
            assert time.monotonic() < deadline, c.assignment()
            for tp, records in c.poll(timeout_ms=1000).items():
                got += [(tp.partition, r.value) for r in records]
        assert got == [(1, b"on the new partition")]
        assert c.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    finally:
        p.close()
        c.close()
        admin.close()
