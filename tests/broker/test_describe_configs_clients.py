"""DescribeConfigs through the three real admin clients, against the real broker.

The broker is started with non-default ``log.*`` settings; the expected value of every
topic config is derived from those settings (``BrokerConfig.topic_config``) and from
what the test set on the topic, never written down as literals. All traffic goes
through a recording relay on 127.0.0.1 (the broker advertises the relay), so the
test also records the DescribeConfigs version each client sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource as AioResource
from aiokafka.admin.config_resource import ConfigResourceType as AioType
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka.admin import ConfigResource as KpResource
from kafka.admin import ConfigResourceType as KpType
from kafka.admin import KafkaAdminClient

from broker.config import BrokerConfig
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.relay import Relay

TIMEOUT = 15.0
BROKER_PROPS = {"log.retention.hours": "36", "log.segment.bytes": "8000000",
                "message.max.bytes": "3000000", "log.roll.ms": "7200000"}
TOPIC_CONFIGS = {"retention.ms": "600000", "max.message.bytes": "500000",
                 "message.timestamp.type": "LogAppendTime"}
SET_IN_BROKER = {"retention.ms", "segment.bytes", "max.message.bytes", "segment.ms"}


def expected(overrides: dict[str, str]) -> dict[str, str]:
    return BrokerConfig.from_properties(BROKER_PROPS).topic_config(overrides).to_kafka()


def expected_source(name: str, overrides: dict[str, str]) -> int:
    """1 set on the topic, 4 from a log.* setting this test started the broker with, else 5."""
    if name in overrides:
        return 1
    return 4 if name in SET_IN_BROKER else 5




@pytest.fixture(scope="module")
def relayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Relay]]:
    relay_port = free_port_number()
    data = tmp_path_factory.mktemp("describe-configs-clients") / "data"
    data.mkdir()
    props = {**BROKER_PROPS, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{relay_port}"}
    b = BrokerProcess(data, free_port_number(), props).start()
    relay = Relay(relay_port, b.port)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{relay_port}"})
    futures = admin.create_topics([NewTopic("configured", 2, 1, config=TOPIC_CONFIGS),
                                   NewTopic("plain", 1, 1)], operation_timeout=10)
    for f in futures.values():
        f.result(TIMEOUT)
    yield b, relay
    relay.close()
    b.stop()


def _bootstrap(relayed: tuple[BrokerProcess, Relay]) -> str:
    return f"127.0.0.1:{relayed[1]._sock.getsockname()[1]}"


def test_confluent_describe_configs_matches_what_was_set_and_the_broker_settings(relayed: Any) -> None:
    admin = AdminClient({"bootstrap.servers": _bootstrap(relayed), "client.id": "dc-confluent"})
    for topic, overrides in (("configured", TOPIC_CONFIGS), ("plain", {})):
        got = admin.describe_configs([ConfigResource("topic", topic)])
        (future,) = got.values()
        entries = future.result(TIMEOUT)
        want = expected(overrides)
        assert {n: e.value for n, e in entries.items()} == want
        for name, e in entries.items():
            assert e.source == expected_source(name, overrides), name
            assert (e.is_read_only, e.is_sensitive) == (False, False)
            assert e.is_default == (expected_source(name, overrides) == ConfigSource.DEFAULT_CONFIG.value)
            syn = list(e.synonyms.values())
            if name in overrides:  # librdkafka always asks for synonyms; keyed by name
                assert (syn[0].name, syn[0].value, syn[0].source) == (name, overrides[name], 1)
    # the broker resource: every setting, the ones it was started with as STATIC_BROKER_CONFIG
    (future,) = admin.describe_configs([ConfigResource("broker", "0")]).values()
    broker = future.result(TIMEOUT)
    for name, value in BROKER_PROPS.items():
        assert (broker[name].value, broker[name].source) == (value, 4)
    assert broker["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert relayed[1].versions(32, "dc-confluent") == {1}


def test_confluent_unknown_topic_fails_with_unknown_topic_or_partition(relayed: Any) -> None:
    admin = AdminClient({"bootstrap.servers": _bootstrap(relayed)})
    (future,) = admin.describe_configs([ConfigResource("topic", "no-such-topic")]).values()
    with pytest.raises(KafkaException) as exc:
        future.result(TIMEOUT)
    assert exc.value.args[0].code() == 3


def test_kafka_python_describe_configs_all_and_filtered(relayed: Any) -> None:
    admin = KafkaAdminClient(bootstrap_servers=_bootstrap(relayed), client_id="dc-kafka-python")
    try:
        got = admin.describe_configs([KpResource(KpType.TOPIC, "configured")],
                                     include_synonyms=True, config_filter="all")
        entries = got["topic"]["configured"]
        assert {n: e["value"] for n, e in entries.items()} == expected(TOPIC_CONFIGS)
        names = {1: "DYNAMIC_TOPIC_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}
        for name, e in entries.items():
            assert e["config_source"] == names[expected_source(name, TOPIC_CONFIGS)], name
        assert entries["retention.ms"]["config_type"] == "LONG"
        # configuration_keys: only the names asked for
        got = admin.describe_configs([KpResource(KpType.TOPIC, "configured",
                                                 configs={"retention.ms": None, "segment.ms": None})],
                                     config_filter="all")
        assert {n: e["value"] for n, e in got["topic"]["configured"].items()} == {
            k: expected(TOPIC_CONFIGS)[k] for k in ("retention.ms", "segment.ms")}
        # its default filter, "modified", keeps what is set on the topic (source 1) only
        got = admin.describe_configs([KpResource(KpType.TOPIC, "configured")])
        assert set(got["topic"]["configured"]) == set(TOPIC_CONFIGS)
        # kafka-python ignores per-resource error codes: an unknown topic is an empty dict
        assert admin.describe_configs([KpResource(KpType.TOPIC, "no-such-topic")]) == {
            "topic": {"no-such-topic": {}}}
    finally:
        admin.close()
    assert relayed[1].versions(32, "dc-kafka-python") == {4}


async def test_aiokafka_describe_configs_and_unknown_topic(relayed: Any) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=_bootstrap(relayed), client_id="dc-aiokafka")
    await admin.start()
    try:
        (resp,) = await admin.describe_configs(
            [AioResource(AioType.TOPIC, "configured"), AioResource(AioType.TOPIC, "no-such-topic")],
            include_synonyms=True)
        configured, missing = resp.resources
        assert configured[0] == 0 and missing[0] == 3
        entries = {e[0]: e for e in configured[4]}
        assert {n: e[1] for n, e in entries.items()} == expected(TOPIC_CONFIGS)
        for name, e in entries.items():
            assert e[3] == expected_source(name, TOPIC_CONFIGS), name
        (resp,) = await admin.describe_configs(
            [AioResource(AioType.TOPIC, "plain", {"segment.bytes": None})])
        assert [(e[0], e[1]) for e in resp.resources[0][4]] == [
            ("segment.bytes", BROKER_PROPS["log.segment.bytes"])]
    finally:
        await admin.close()
    await asyncio.sleep(0)
    assert relayed[1].versions(32, "dc-aiokafka") == {2}
