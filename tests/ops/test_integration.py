"""The integration suite the docker-compose test runner executes against the `broker` service.

It targets the broker named by ``CHRONOLOG_BOOTSTRAP`` (with ``CHRONOLOG_UDP_ADDRESS``
and ``CHRONOLOG_METRICS_URL``, as docker/docker-compose.yml sets them); without
them it starts a local broker subprocess configured the same way as the compose
service, so the same tests run in ``make test``. Topic names are unique per run
because an external broker is shared and keeps its data.
"""

from __future__ import annotations

import os
import random
import socket
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from opshelp import free_port_number, free_udp_port, udp_overrides, wait_until_serving

from client import SyncClient


@dataclass
class Target:
    bootstrap: str
    udp: tuple[str, int]
    metrics_url: str


@pytest.fixture
def target(broker_factory: Callable[..., Any]) -> Iterator[Target]:
    bootstrap = os.environ.get("CHRONOLOG_BOOTSTRAP")
    if bootstrap:
        host, _, port = os.environ.get("CHRONOLOG_UDP_ADDRESS", "broker:9093").rpartition(":")
        yield Target(bootstrap, (socket.gethostbyname(host), int(port)),
                     os.environ.get("CHRONOLOG_METRICS_URL", "http://broker:9404/metrics"))
        return
    udp_port, mport = free_udp_port(), free_port_number()
    b = broker_factory(overrides=udp_overrides(udp_port, mport, udp_format="tsv"))
    wait_until_serving(mport)
    yield Target(b.bootstrap, ("127.0.0.1", udp_port), f"http://127.0.0.1:{mport}/metrics")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_librdkafka_produces_and_offsets_for_times_is_exact(target: Target) -> None:
    topic = unique("it-times")
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    rnd = random.Random(11)
    base = int(time.time() * 1000) - 600_000
    stamps = [base + rnd.randint(0, 300_000) for _ in range(300)]  # out of order
    producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 5})
    for i, ts in enumerate(stamps):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                         timestamp=ts)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": unique("it-g"),
                         "enable.auto.commit": False})
    try:
        for t in sorted(rnd.sample(stamps, 25)) + [base - 1, max(stamps), max(stamps) + 1]:
            got = consumer.offsets_for_times([TopicPartition(topic, 0, t)], timeout=30)[0]
            oracle = next((i for i, ts in enumerate(stamps) if ts >= t), None)
            assert got.error is None
            assert got.offset == (oracle if oracle is not None else -1), t
    finally:
        consumer.close()


def test_udp_datagrams_become_records_with_keys_and_timestamps(target: Target) -> None:
    tag = unique("it-udp")
    now = int(time.time() * 1000)
    sent = [(f"{tag}-{i}", now - i) for i in range(50)]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for key, ts in sent:
            s.sendto(f"{key}\t{ts}\tpayload {key}".encode(), target.udp)
    found: dict[bytes, int] = {}
    deadline = time.monotonic() + 20
    with SyncClient(target.bootstrap) as c:
        while len(found) < len(sent) and time.monotonic() < deadline:
            for p in c.partitions_for("udp"):
                end = c.latest("udp", [p])[p]
                start = max(0, end - 5000)
                for r in c.consume("udp", p, start, end):
                    if r.key and r.key.startswith(tag.encode()):
                        found[r.key] = r.timestamp
                        assert r.value == b"payload " + r.key
            time.sleep(0.1)
    assert found == {k.encode(): ts for k, ts in sent}


def test_metrics_endpoint_serves_prometheus_text(target: Target) -> None:
    with SyncClient(target.bootstrap) as c:
        c.list_topics()
        body = urllib.request.urlopen(target.metrics_url, timeout=10).read().decode()
    assert "# TYPE chronolog_requests_total counter" in body
    assert 'chronolog_requests_total{api="Metadata"}' in body
