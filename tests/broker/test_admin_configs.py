"""Configs change online: IncrementalAlterConfigs and AlterConfigs from real admin clients.

Every expectation is derived, not written down: the effective value of a topic config
is ``BrokerConfig.topic_config(overrides)`` over the overrides the test itself applied,
and each change is read back with DescribeConfigs from the same client. The broker is
a real subprocess; restarts check that what was changed is still in force.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpResource
from kafka.admin import ConfigResourceType as KpType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

from broker.config import BrokerConfig
from client import admin
from client.aio import Client, ProducerRecord
from protocol.errors import ErrorCode, KafkaError
from tests.helpers.broker import BrokerProcess

TIMEOUT = 15.0
DEFAULTS = BrokerConfig().topic_config().to_kafka()


def effective(overrides: dict[str, str]) -> dict[str, str]:
    return BrokerConfig().topic_config(overrides).to_kafka()


@pytest.fixture
def broker(broker_factory: Any) -> BrokerProcess:
    return broker_factory()  # type: ignore[no-any-return]


@pytest.fixture
def ck(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kp(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    yield a
    a.close()


def ck_create(a: AdminClient, name: str, partitions: int = 1, **configs: str) -> None:
    a.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(TIMEOUT)


def ck_describe(a: AdminClient, name: str, rtype: ResourceType = ResourceType.TOPIC) -> dict[str, Any]:
    res = ConfigResource(rtype, name)
    return dict(a.describe_configs([res])[res].result(TIMEOUT))


def ck_incremental(a: AdminClient, name: str, *ops: tuple[str, str | None, AlterConfigOpType],
                   rtype: ResourceType = ResourceType.TOPIC, validate_only: bool = False) -> None:
    res = ConfigResource(rtype, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    a.incremental_alter_configs([res], validate_only=validate_only)[res].result(TIMEOUT)


def ck_error_code(exc: pytest.ExceptionInfo[KafkaException]) -> int:
    return int(exc.value.args[0].code())


def kp_describe(a: KafkaAdminClient, name: str) -> dict[str, Any]:
    got = a.describe_configs([KpResource(KpType.TOPIC, name)], config_filter="all")
    return dict(got["topic"][name])


def assert_topic_configs(described: dict[str, str], sources: dict[str, str], overrides: dict[str, str]) -> None:
    """DescribeConfigs' values are the effective ones; exactly the overrides are DYNAMIC."""
    want = effective(overrides)
    assert {k: described[k] for k in want} == want
    for name in want:
        assert (sources[name] == "DYNAMIC_TOPIC_CONFIG") == (name in overrides), name


def test_incremental_set_delete_append_subtract_from_confluent_are_read_back(ck: AdminClient) -> None:
    ck_create(ck, "inc")
    S, D, A, R = (AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND,
                  AlterConfigOpType.SUBTRACT)
    overrides: dict[str, str] = {}
    steps: list[tuple[list[tuple[str, str | None, AlterConfigOpType]], dict[str, str | None]]] = [
        ([("retention.ms", "3600000", S), ("segment.bytes", "65536", S)],
         {"retention.ms": "3600000", "segment.bytes": "65536"}),
        ([("cleanup.policy", "compact", A)], {"cleanup.policy": "delete,compact"}),
        ([("cleanup.policy", "compact", A)], {"cleanup.policy": "delete,compact"}),  # already there
        ([("cleanup.policy", "delete", R)], {"cleanup.policy": "compact"}),
        ([("segment.bytes", None, D), ("max.message.bytes", None, D)], {"segment.bytes": None}),
    ]
    for ops, change in steps:
        ck_incremental(ck, "inc", *ops)
        for k, v in change.items():
            if v is None:
                overrides.pop(k, None)
            else:
                overrides[k] = v
        got = ck_describe(ck, "inc")
        assert_topic_configs({k: e.value for k, e in got.items()},
                             {k: ConfigSource(e.source).name for k, e in got.items()}, overrides)


def test_incremental_errors_are_kafkas(ck: AdminClient) -> None:
    ck_create(ck, "bad", **{"retention.ms": "1000000"})
    S, A = AlterConfigOpType.SET, AlterConfigOpType.APPEND
    cases: list[tuple[str, list[tuple[str, str | None, AlterConfigOpType]], int]] = [
        ("bad", [("retention.ms", "1", A)], 40),           # APPEND only on LIST configs
        ("bad", [("retention.ms", "soon", S)], 40),        # not a number
        ("bad", [("no.such.config", "1", S)], 40),
        ("bad", [("cleanup.policy", "forever", S)], 40),
        ("bad", [("retention.ms", "-2", S)], 40),          # below Kafka's minimum (-1)
        ("missing", [("retention.ms", "1", S)], 3),
    ]
    for topic, ops, code in cases:
        with pytest.raises(KafkaException) as exc:
            ck_incremental(ck, topic, *ops)
        assert ck_error_code(exc) == code, (topic, ops)
    # nothing of the refused changes was applied
    assert ck_describe(ck, "bad")["retention.ms"].value == "1000000"


def test_validate_only_checks_and_changes_nothing(ck: AdminClient, kp: KafkaAdminClient) -> None:
    ck_create(ck, "dry")
    ck_incremental(ck, "dry", ("retention.ms", "5000", AlterConfigOpType.SET), validate_only=True)
    assert ck_describe(ck, "dry")["retention.ms"].value == DEFAULTS["retention.ms"]
    with pytest.raises(KafkaException) as exc:
        ck_incremental(ck, "dry", ("retention.ms", "x", AlterConfigOpType.SET), validate_only=True)
    assert ck_error_code(exc) == 40
    got = kp.alter_configs([KpResource(KpType.TOPIC, "dry", configs={"segment.bytes": "70000"})],
                           validate_only=True)
    assert got == {"topic": {"dry": "OK"}}
    assert kp_describe(kp, "dry")["segment.bytes"]["value"] == DEFAULTS["segment.bytes"]


def test_legacy_alter_configs_replaces_the_whole_set_as_kafka_does(ck: AdminClient) -> None:
    ck_create(ck, "legacy", **{"retention.ms": "7200000", "segment.bytes": "90000"})
    res = ConfigResource(ResourceType.TOPIC, "legacy", set_config={"max.message.bytes": "50000"})
    ck.alter_configs([res])[res].result(TIMEOUT)
    got = ck_describe(ck, "legacy")
    # keys not listed are deleted (grafana/loki#24466 is about exactly this)
    assert_topic_configs({k: e.value for k, e in got.items()},
                         {k: ConfigSource(e.source).name for k, e in got.items()},
                         {"max.message.bytes": "50000"})


def test_kafka_python_incremental_and_legacy_alter_configs_are_read_back(kp: KafkaAdminClient) -> None:
    kp.create_topics([KpNewTopic("kp-cfg", 1, 1)])
    # raise_on_unknown=False: kafka-python checks names against DescribeConfigs first, and
    # an unset cleanup.policy is not listed there yet (see docs/admin.md, "Limits").
    assert kp.alter_configs([KpResource(KpType.TOPIC, "kp-cfg", configs={
        "retention.ms": "86400000", "cleanup.policy": "compact,delete"})], incremental=True,
        raise_on_unknown=False) == {"topic": {"kp-cfg": "OK"}}
    got = kp_describe(kp, "kp-cfg")
    assert_topic_configs({k: v["value"] for k, v in got.items()},
                         {k: v["config_source"] for k, v in got.items()},
                         {"retention.ms": "86400000", "cleanup.policy": "compact,delete"})
    # Legacy AlterConfigs: kafka-python re-sends the other modified keys itself.
    assert kp.alter_configs([KpResource(KpType.TOPIC, "kp-cfg", configs={"segment.ms": "600000"})],
                            incremental=False) == {"topic": {"kp-cfg": "OK"}}
    got = kp_describe(kp, "kp-cfg")
    assert_topic_configs({k: v["value"] for k, v in got.items()},
                         {k: v["config_source"] for k, v in got.items()},
                         {"retention.ms": "86400000", "cleanup.policy": "compact,delete",
                          "segment.ms": "600000"})
    bad = kp.alter_configs([KpResource(KpType.TOPIC, "kp-cfg", configs={"segment.ms": "0"})],
                           incremental=True)
    assert "Error 40" in str(bad["topic"]["kp-cfg"])


def test_dynamic_broker_configs_show_their_sources_and_reach_topics(
        ck: AdminClient, kp: KafkaAdminClient) -> None:
    ck_create(ck, "inherits")
    ck_create(ck, "own", **{"retention.ms": "1234567"})
    S, D = AlterConfigOpType.SET, AlterConfigOpType.DELETE
    # The cluster-wide default level (resource name ""): librdkafka and kafka-python both
    # refuse an empty broker name, so the bundled client (client/admin.py) sets and reads it.

    async def default_level(values: dict[str, str | None]) -> dict[str, str | None]:
        async with await Client.connect(bootstrap) as c:
            await admin.alter_broker_configs(c, values, broker="")
            entries = await c.describe_config_entries("", resource="broker")
            assert {e.source for e in entries.values()} <= {"DYNAMIC_DEFAULT_BROKER_CONFIG"}
            return {k: e.value for k, e in entries.items()}

    bootstrap = kp.config["bootstrap_servers"]
    assert asyncio.run(default_level({"log.retention.ms": "7777777"})) == {"log.retention.ms": "7777777"}
    broker = ck_describe(ck, "0", ResourceType.BROKER)
    assert broker["log.retention.ms"].value == "7777777"
    assert ConfigSource(broker["log.retention.ms"].source) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert not broker["log.retention.ms"].is_read_only and broker["node.id"].is_read_only
    ck_incremental(ck, "0", ("log.retention.ms", "8888888", S), rtype=ResourceType.BROKER)
    broker = ck_describe(ck, "0", ResourceType.BROKER)
    assert ConfigSource(broker["log.retention.ms"].source) == ConfigSource.DYNAMIC_BROKER_CONFIG
    # a topic without its own value follows the broker's, with the broker level as source
    inherits = ck_describe(ck, "inherits")["retention.ms"]
    assert inherits.value == "8888888"
    assert ConfigSource(inherits.source) == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert ck_describe(ck, "own")["retention.ms"].value == "1234567"
    ck_incremental(ck, "0", ("log.retention.ms", None, D), rtype=ResourceType.BROKER)
    assert ck_describe(ck, "inherits")["retention.ms"].value == "7777777"
    for name, value in [("num.partitions", "3"), ("listeners", "PLAINTEXT://:1"),
                        ("log.segment.bytes", "1"), ("no.such.setting", "1")]:
        with pytest.raises(KafkaException) as exc:
            ck_incremental(ck, "0", (name, value, S), rtype=ResourceType.BROKER)
        assert ck_error_code(exc) == 42, name  # INVALID_REQUEST for brokers (KAFKA-13609)

    async def other_broker() -> None:  # librdkafka would wait for a broker 7 to appear
        async with await Client.connect(bootstrap) as c:
            await admin.alter_broker_configs(c, {"log.retention.ms": "1"}, broker="7")

    with pytest.raises(KafkaError) as err:
        asyncio.run(other_broker())
    assert err.value.code == ErrorCode.INVALID_REQUEST


def test_configs_partitions_and_broker_levels_survive_a_restart(broker: BrokerProcess) -> None:
    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    ck_create(ck, "keep", 2, **{"retention.ms": "3600000"})
    ck_incremental(ck, "keep", ("segment.bytes", "100000", AlterConfigOpType.SET),
                   ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    ck_incremental(ck, "0", ("log.roll.ms", "600000", AlterConfigOpType.SET), rtype=ResourceType.BROKER)
    ck.create_partitions([NewPartitions("keep", 5)])["keep"].result(TIMEOUT)
    before = {k: (e.value, e.source) for k, e in ck_describe(ck, "keep").items()}
    for stop in (broker.stop, broker.kill):  # a clean stop, then a crash
        stop()
        broker.start()
        ck = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert {k: (e.value, e.source) for k, e in ck_describe(ck, "keep").items()} == before
        assert before["segment.ms"][0] == "600000"  # from the dynamic broker level
        md = ck.list_topics("keep", timeout=TIMEOUT)
        assert sorted(md.topics["keep"].partitions) == list(range(5))


def _segment_files(data: Path, topic: str) -> int:
    return len(list((data / f"{topic}-0").glob("*.log")))


def test_retention_ms_and_segment_bytes_changed_online_take_effect(broker_factory: Any) -> None:
    b = broker_factory({"log.retention.check.interval.ms": "200"})
    ck = AdminClient({"bootstrap.servers": b.bootstrap})
    ck_create(ck, "ret", **{"retention.ms": "-1", "message.timestamp.after.max.ms": "86400000"})
    now = int(time.time() * 1000)
    old = [ProducerRecord(value=b"o" * 200, timestamp=now - 3 * 3_600_000 + i) for i in range(60)]
    new = [ProducerRecord(value=b"n" * 200, timestamp=now + i) for i in range(60)]

    async def produce(records: list[ProducerRecord]) -> list[int]:
        async with await Client.connect(b.bootstrap) as c:
            offsets = []
            for r in records:  # one batch per record, so segments can roll between them
                offsets.append((await c.produce("ret", [r], partition=0))[0])
            return offsets

    asyncio.run(produce(old))
    assert _segment_files(b.data_dir, "ret") == 1
    # segment.bytes online: the next appends roll at the new size
    ck_incremental(ck, "ret", ("segment.bytes", "4096", AlterConfigOpType.SET))
    new_offsets = asyncio.run(produce(new))
    assert _segment_files(b.data_dir, "ret") > 2
    # retention.ms online: the next retention check deletes what is older than 1 h
    ck_incremental(ck, "ret", ("retention.ms", "3600000", AlterConfigOpType.SET))

    async def earliest() -> int:
        async with await Client.connect(b.bootstrap) as c:
            return (await c.earliest("ret", [0]))[0]

    deadline = time.monotonic() + 10
    start = 0
    while time.monotonic() < deadline and start == 0:
        time.sleep(0.2)
        start = asyncio.run(earliest())
    # The old records filled the first segment alone (the first new record rolled,
    # being over the new segment.bytes): exactly that segment is past retention.
    assert start == new_offsets[0] == len(old)
    assert _segment_files(b.data_dir, "ret") >= 2
