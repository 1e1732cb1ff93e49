"""Which version of each admin API the real clients send, recorded by a relay.

Every client runs its admin calls through a recording TCP relay (the broker advertises
the relay); the versions seen must be the ones docs/compatibility.md's admin table
lists, and each call must succeed, so the table says what a user of that client gets.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource as AioResource
from aiokafka.admin.config_resource import ConfigResourceType as AioType
from aiokafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
from aiokafka.structs import TopicPartition as AioTP
from confluent_kafka import Consumer, ElectionType
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from confluent_kafka.admin import NewPartitions as CkNewPartitions
from kafka import TopicPartition as KpTP
from kafka.admin import ConfigResource as KpResource
from kafka.admin import ConfigResourceType as KpType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest

from client import admin
from client.aio import Client, ProducerRecord
from protocol.api import API_VERSIONS, ApiKey
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.relay import Relay

TIMEOUT = 15.0
DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "chronolog")


def documented() -> dict[str, dict[str, set[int]]]:
    """API name -> client -> versions, from the admin table of docs/compatibility.md."""
    section = DOC.read_text().split("## Admin API versions each client sends", 1)[1]
    out: dict[str, dict[str, set[int]]] = {}
    for line in section.splitlines():
        m = re.match(r"^\| (\w+) \((\d+)\) \|(.*)\|\s*$", line)
        if not m:
            continue
        cells = [c.strip() for c in m.group(3).split("|")][:len(CLIENTS)]
        out[m.group(1)] = {c: ({int(v) for v in cell.split(",")} if cell not in ("–", "") else set())
                           for c, cell in zip(CLIENTS, cells, strict=True)}
    return out


@pytest.fixture(scope="module")
def relayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Relay, str]]:
    relay_port = free_port_number()
    data = tmp_path_factory.mktemp("admin-versions") / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number(),
                      {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{relay_port}"}).start()
    relay = Relay(relay_port, b.port)
    try:
        yield b, relay, f"127.0.0.1:{relay_port}"
    finally:
        relay.close()
        b.stop()


def _confluent(bootstrap: str) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap, "client.id": "confluent-kafka"})
    a.create_topics([NewTopic("v-ck", 1, 1)])["v-ck"].result(TIMEOUT)
    res = ConfigResource(ResourceType.TOPIC, "v-ck", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(TIMEOUT)
    res = ConfigResource(ResourceType.TOPIC, "v-ck", set_config={"retention.ms": "7200000"})
    a.alter_configs([res])[res].result(TIMEOUT)
    a.create_partitions([CkNewPartitions("v-ck", 2)])["v-ck"].result(TIMEOUT)
    asyncio.run(_produce(bootstrap, "v-ck"))
    tp = CkTP("v-ck", 0, 2)
    assert a.delete_records([tp])[tp].result(TIMEOUT).low_watermark == 2
    assert a.elect_leaders(ElectionType.PREFERRED, [CkTP("v-ck", 0)]).result(TIMEOUT)[CkTP("v-ck", 0)].code() == 84
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": "confluent-kafka", "group.id": "v",
                  "enable.auto.commit": False})
    c.assign([CkTP("v-ck", 0, 2)])
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            break
    c.seek(CkTP("v-ck", 0, 3, leader_epoch=0))  # validated with OffsetForLeaderEpoch
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None and m.offset() == 3:
            break
    c.close()


async def _produce(bootstrap: str, topic: str) -> None:
    async with await Client.connect(bootstrap, client_id="producer") as c:
        await c.produce(topic, [ProducerRecord(value=b"v") for _ in range(5)], partition=0)


def _kafka_python(bootstrap: str) -> None:
    a = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kafka-python")
    try:
        from kafka.admin import NewTopic as KpNewTopic
        a.create_topics([KpNewTopic("v-kp", 1, 1)])
        assert a.alter_configs([KpResource(KpType.TOPIC, "v-kp", configs={"retention.ms": "3600000"})],
                               incremental=True) == {"topic": {"v-kp": "OK"}}
        assert a.alter_configs([KpResource(KpType.TOPIC, "v-kp", configs={"retention.ms": "60000"})],
                               incremental=False) == {"topic": {"v-kp": "OK"}}
        a.create_partitions({"v-kp": KpNewPartitions(2)})
        asyncio.run(_produce(bootstrap, "v-kp"))
        assert a.delete_records({KpTP("v-kp", 0): 1})[KpTP("v-kp", 0)]["low_watermark"] == 1
        a.describe_cluster()
        a.describe_log_dirs()
        a.describe_topic_partitions(["v-kp"])
        a.describe_producers([KpTP("v-kp", 0)])
        a.elect_leaders(0, {"v-kp": [0]}, raise_errors=False)
        a.alter_partition_reassignments({KpTP("v-kp", 0): [0]})
        a.list_partition_reassignments()
        Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[Topic(topic="v-kp", partitions=[
            Topic.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0)])])
        assert a._manager.run(a._manager.send, req, 0).topics[0].partitions[0].end_offset == 5
    finally:
        a.close()


async def _aiokafka(bootstrap: str) -> None:
    a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="aiokafka")
    await a.start()
    try:
        from aiokafka.admin import NewTopic as AioNewTopic
        await a.create_topics([AioNewTopic("v-aio", 1, 1)])
        await a.alter_configs([AioResource(AioType.TOPIC, "v-aio", {"retention.ms": "3600000"})])
        await a.create_partitions({"v-aio": NewPartitions(2)})
        await _produce(bootstrap, "v-aio")
        got = await a.delete_records({AioTP("v-aio", 0): RecordsToDelete(before_offset=4)})
        assert got == {AioTP("v-aio", 0): 4}
        resp = await a._send_request_to_node(0, AlterPartitionReassignmentsRequest(
            timeout_ms=5000, topics=[("v-aio", [(0, [0], {})], {})], tags={}))
        assert resp.error_code == 0
        resp = await a._send_request_to_node(0, ListPartitionReassignmentsRequest(
            timeout_ms=5000, topics=None, tags={}))
        assert resp.topics == []
    finally:
        await a.close()


async def _bundled(bootstrap: str) -> None:
    async with await Client.connect(bootstrap, client_id="chronolog") as c:
        await c.create_topic("v-cl", 1)
        await admin.alter_topic_configs(c, "v-cl", {"retention.ms": "3600000"})
        await admin.replace_topic_configs(c, "v-cl", {"retention.ms": "60000"})
        await admin.create_partitions(c, "v-cl", 2)
        await c.produce("v-cl", [ProducerRecord(value=b"v") for _ in range(5)], partition=0)
        assert (await admin.delete_records(c, "v-cl", {0: 2}))[0].low_watermark == 2
        await admin.describe_cluster(c)
        await admin.describe_log_dirs(c, "v-cl")


def test_each_client_sends_the_documented_versions_and_its_calls_succeed(
        relayed: tuple[BrokerProcess, Relay, str]) -> None:
    _, relay, bootstrap = relayed
    _confluent(bootstrap)
    _kafka_python(bootstrap)
    asyncio.run(_aiokafka(bootstrap))
    asyncio.run(_bundled(bootstrap))
    doc = documented()
    admin_keys = [k for k in API_VERSIONS if API_VERSIONS[k].name in doc]
    assert len(admin_keys) == 12
    seen = {API_VERSIONS[k].name: {c: relay.versions(int(k), c) for c in CLIENTS} for k in admin_keys}
    assert seen == doc
    for k in admin_keys:  # every version a client sent is one the broker serves
        rng = API_VERSIONS[ApiKey(k)]
        for versions in seen[rng.name].values():
            assert all(rng.min_version <= v <= rng.max_version for v in versions)
