"""One real broker with a confluent-kafka and a kafka-python admin client, for the admin
API test modules that share a broker between their tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from tests.helpers.broker import BrokerProcess, free_port_number

TIMEOUT = 15.0

Shared = tuple[BrokerProcess, AdminClient, KafkaAdminClient]


@contextmanager
def admin_broker(factory: pytest.TempPathFactory, name: str,
                 overrides: dict[str, str] | None = None) -> Iterator[Shared]:
    data = factory.mktemp(name) / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number(), dict(overrides or {})).start()
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        yield b, AdminClient({"bootstrap.servers": b.bootstrap}), kp
    finally:
        kp.close()
        b.stop()
