"""The reference Apache Kafka node starts here and answers as Kafka: the peer the other tests lean on.

Chronolog's own client, pointed at the real Kafka, produces out-of-order timestamps
and asks the time lookups; the answers must equal a scan of what was produced.
That proves the peer works and that the client used as an oracle elsewhere reads
Kafka's answers right.
"""

from __future__ import annotations

import time

from client.aio import ProducerRecord
from client.sync import SyncClient
from tests.ecosystem.kafka_peer import TOPICS, KafkaNode, kafka_version, tool


def test_kafka_node_serves_and_reports_its_version(kafka_node: KafkaNode) -> None:
    out = tool(TOPICS, "--bootstrap-server", kafka_node.bootstrap, "--version").stdout
    assert kafka_version() in out
    assert (kafka_node.data_dir / "meta.properties").exists()


def test_chronolog_client_reads_kafkas_time_lookups_as_a_scan_predicts(kafka_node: KafkaNode) -> None:
    topic = f"peer-{time.time_ns()}"
    base = int(time.time() * 1000) - 3_600_000
    stamps = [base + d for d in (500, 100, 900, 100, 300, 700, 200)]
    with SyncClient.connect(kafka_node.bootstrap) as c:
        c.create_topic(topic, 1)
        offsets = c.produce(topic, [ProducerRecord(value=f"v{i}".encode(), timestamp=t)
                                    for i, t in enumerate(stamps)], partition=0)
        assert offsets == list(range(len(stamps)))
        for probe in sorted({*stamps, base, base + 150, base + 901}):
            want = next(((o, t) for o, t in enumerate(stamps) if t >= probe), None)
            assert c.offsets_for_times(topic, probe, [0]) == {0: want}
        assert c.latest(topic, [0]) == {0: len(stamps)}
        assert c.earliest(topic, [0]) == {0: 0}
        top = max(stamps)
        assert c.max_timestamp(topic, [0]) == {0: (stamps.index(top), top)}
