"""An acks=0 producer on a SASL_SSL listener that closes right after flush() loses
nothing: TLS (close_notify, then EOF) and SASL put no request the broker has already
read out of reach of the pump (see tests/broker/test_peer_close.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from tests.helpers.offsets import new_topic, settled_offsets
from tests.security.secure_broker import BOB, SecureBroker, start_secure_broker


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    b = start_secure_broker(tmp_path_factory.mktemp("peer-close-secure"))
    yield b
    b.proc.stop()


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_acks_zero_producer_over_sasl_closing_after_flush_loses_nothing(
        sb: SecureBroker, listener: str) -> None:
    topic = f"acks0-{listener.lower()}"
    new_topic(sb.ports["PLAINTEXT"], topic, partitions=3)
    conf = {"bootstrap.servers": sb.bootstrap(listener), "security.protocol": listener,
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": BOB[0],
            "sasl.password": BOB[1], "acks": 0, "linger.ms": 0, "batch.num.messages": 25}
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = sb.pki.ca
    producer = Producer(conf)
    for i in range(3000):
        producer.produce(topic, value=b"r%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    del producer
    assert settled_offsets(sb.ports["PLAINTEXT"], topic, 3, [1000] * 3) == [1000] * 3
