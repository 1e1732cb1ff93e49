"""The three differences from Kafka that librdkafka's 0081_admin found, checked side by side.

(a) AlterConfigs / IncrementalAlterConfigs of the broker setting
    ``sasl.kerberos.min.time.before.relogin``: Kafka accepts it (a dynamic listener
    setting) and DescribeConfigs reports the new value.
(b) A group's authorized operations include DESCRIBE_CONFIGS and ALTER_CONFIGS
    (Kafka 4.0's supported GROUP operations).
(c) Metadata honours IncludeClusterAuthorizedOperations and
    IncludeTopicAuthorizedOperations (librdkafka's describe_cluster / describe_topics
    read them from Metadata), and so does DescribeTopicPartitions (the Java admin's path).

Without an authorizer the answer is every supported operation; with Kafka's
StandardAuthorizer it is what the ACLs allow. Librdkafka (Metadata, DescribeGroups)
and Kafka's Java admin (DescribeCluster, DescribeTopicPartitions, ConsumerGroupDescribe
or DescribeGroups) ask; under ``make test-ecosystem`` the real Kafka answers too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.conftest import BrokerProcess, free_port_number
from tests.ecosystem.kafka_peer import KafkaNode, java_program

# Kafka's AclEntry.supportedOperations (4.0+).
SUPPORTED = {
    "cluster": {"ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE",
                "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"},
    "topic": {"ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS",
              "READ", "WRITE"},
    "group": {"ALTER_CONFIGS", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"},
}
RELOGIN = "sasl.kerberos.min.time.before.relogin"


@dataclass
class Target:
    name: str
    bootstrap: str
    node_id: str
    admin: AdminClient


@pytest.fixture(scope="module", params=[
    "chronolog", pytest.param("kafka", marks=pytest.mark.ecosystem_full)])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "chronolog":
        bootstrap = request.getfixturevalue("chronolog").bootstrap
    else:
        node: KafkaNode = request.getfixturevalue("kafka_node")
        bootstrap = node.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    node_id = str(admin.describe_cluster().result(15).nodes[0].id)
    return Target(request.param, bootstrap, node_id, admin)


def _topic(t: Target, prefix: str) -> str:
    name = f"{prefix}-{time.time_ns() % 10**9}"
    for f in t.admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(15)
    return name


def _group_with_offsets(t: Target, topic: str) -> str:
    group = f"g-{topic}"
    c = Consumer({"bootstrap.servers": t.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()
    return group


def _broker_relogin(t: Target, want: str) -> str:
    """The described value once it is ``want`` (Kafka applies a change when its metadata
    log reaches the broker, a moment after the answer), else the last one seen."""
    res = ConfigResource(ResourceType.BROKER, t.node_id)
    deadline = time.monotonic() + 10
    while True:
        got = t.admin.describe_configs([res])[res].result(15)[RELOGIN].value
        if got == want or time.monotonic() > deadline:
            return str(got)
        time.sleep(0.1)


def test_a_broker_kerberos_relogin_setting_is_dynamic(target: Target) -> None:
    res = ConfigResource(ResourceType.BROKER, target.node_id, set_config={RELOGIN: "58000"})
    target.admin.alter_configs([res])[res].result(15)
    assert _broker_relogin(target, "58000") == "58000"
    res = ConfigResource(ResourceType.BROKER, target.node_id, incremental_configs=[
        ConfigEntry(RELOGIN, "59000", incremental_operation=AlterConfigOpType.SET)])
    target.admin.incremental_alter_configs([res])[res].result(15)
    assert _broker_relogin(target, "59000") == "59000"
    res = ConfigResource(ResourceType.BROKER, target.node_id, incremental_configs=[
        ConfigEntry(RELOGIN, None, incremental_operation=AlterConfigOpType.DELETE)])
    target.admin.incremental_alter_configs([res])[res].result(15)
    assert _broker_relogin(target, "60000") == "60000"  # Kafka's default again


def _names(ops: list[AclOperation] | None) -> set[str] | None:
    return None if ops is None else {o.name for o in ops}


def test_b_c_librdkafka_sees_every_supported_operation_without_an_authorizer(target: Target) -> None:
    topic = _topic(target, "ops")
    group = _group_with_offsets(target, topic)
    a = target.admin
    cluster = a.describe_cluster(include_authorized_operations=True).result(15)
    assert _names(cluster.authorized_operations) == SUPPORTED["cluster"]
    described = a.describe_topics(TopicCollection([topic]),
                                  include_authorized_operations=True)[topic].result(15)
    assert _names(described.authorized_operations) == SUPPORTED["topic"]
    g = a.describe_consumer_groups([group], include_authorized_operations=True)[group].result(15)
    assert _names(g.authorized_operations) == SUPPORTED["group"]
    # Not asked for: not answered.
    assert not a.describe_cluster().result(15).authorized_operations
    assert not a.describe_topics(TopicCollection([topic]))[topic].result(15).authorized_operations


def test_b_c_java_admin_sees_every_supported_operation_without_an_authorizer(
        target: Target, kafka_classpath: str) -> None:
    topic = _topic(target, "jops")
    got = {line["resource"]: set(line["operations"])
           for line in java_program("AuthorizedOps", target.bootstrap, topic, f"jg-{topic}")}
    assert got == SUPPORTED


@pytest.fixture(scope="module")
def acl_broker(module_tmp: Path) -> Iterator[BrokerProcess]:
    data = module_tmp / "acl"
    data.mkdir()
    b = BrokerProcess(data, free_port_number(), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"}).start()
    yield b
    assert b.stop() == 0, b.log()


def test_c_authorized_operations_follow_the_acls(acl_broker: BrokerProcess) -> None:
    """With ACLs on a topic, only what they allow (and what that implies) is reported."""
    a = AdminClient({"bootstrap.servers": acl_broker.bootstrap})
    topic = f"acl-{time.time_ns() % 10**9}"
    for f in a.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(15)
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                         "User:ANONYMOUS", "*", AclOperation.READ, AclPermissionType.ALLOW)
    for f in a.create_acls([binding]).values():
        f.result(15)
    described = a.describe_topics(TopicCollection([topic]),
                                  include_authorized_operations=True)[topic].result(15)
    assert _names(described.authorized_operations) == {"READ", "DESCRIBE"}  # READ implies DESCRIBE
    cluster = a.describe_cluster(include_authorized_operations=True).result(15)
    assert _names(cluster.authorized_operations) == SUPPORTED["cluster"]  # no cluster ACLs


# Kafka 4.1's group configs and their defaults under default broker settings, as the
# real Kafka describes a group nobody configured (checked against it in make test-ecosystem).
GROUP_DEFAULTS = {
    "consumer.heartbeat.interval.ms": "5000", "consumer.session.timeout.ms": "45000",
    "share.auto.offset.reset": "latest", "share.heartbeat.interval.ms": "5000",
    "share.isolation.level": "read_uncommitted", "share.record.lock.duration.ms": "30000",
    "share.session.timeout.ms": "45000", "streams.heartbeat.interval.ms": "5000",
    "streams.num.standby.replicas": "0", "streams.session.timeout.ms": "45000",
}
DEFAULT_CONFIG, DYNAMIC_GROUP_CONFIG = 5, 8


def _group_configs(t: Target, group: str, want: dict[str, str]) -> dict[str, tuple[str, int]]:
    """(value, source) per group config, once they equal ``want`` (Kafka applies a change
    when its metadata log reaches the broker) or after a deadline."""
    res = ConfigResource(ResourceType.GROUP, group)
    deadline = time.monotonic() + 10
    while True:
        got = {k: (v.value, v.source) for k, v in
               t.admin.describe_configs([res])[res].result(15).items()}
        if {k: v for k, (v, _) in got.items()} == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _incremental(t: Target, group: str, name: str, value: str | None,
                 op: AlterConfigOpType = AlterConfigOpType.SET) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op)])
    t.admin.incremental_alter_configs([res])[res].result(15)


def test_b_group_config_resources_are_served_as_kafka_serves_them(target: Target) -> None:
    group = f"cfg-{time.time_ns() % 10**9}"  # configs need no existing group
    got = _group_configs(target, group, GROUP_DEFAULTS)
    assert got == {k: (v, DEFAULT_CONFIG) for k, v in GROUP_DEFAULTS.items()}

    _incremental(target, group, "consumer.session.timeout.ms", "50000")
    want = {**GROUP_DEFAULTS, "consumer.session.timeout.ms": "50000"}
    got = _group_configs(target, group, want)
    assert got["consumer.session.timeout.ms"] == ("50000", DYNAMIC_GROUP_CONFIG)
    assert {k: v for k, (v, _) in got.items()} == want

    refusals = {
        ("consumer.session.timeout.ms", "5000"): "consumer.session.timeout.ms must be greater "
        "than or equal to group.consumer.min.session.timeout.ms",
        ("consumer.heartbeat.interval.ms", "50000"): "consumer.heartbeat.interval.ms must be "
        "less than or equal to group.consumer.max.heartbeat.interval.ms",
        ("unknown.config", "1"): "Unknown group config name: unknown.config",
        ("consumer.session.timeout.ms", "abc"): "Invalid value abc for configuration "
        "consumer.session.timeout.ms: Not a number of type INT",
    }
    for (name, value), message in refusals.items():
        with pytest.raises(KafkaException) as refused:
            _incremental(target, group, name, value)
        err = refused.value.args[0]
        assert (err.code(), err.str()) == (KafkaError.INVALID_CONFIG, message)

    # Legacy AlterConfigs replaces the whole set.
    res = ConfigResource(ResourceType.GROUP, group,
                         set_config={"consumer.heartbeat.interval.ms": "6000"})
    target.admin.alter_configs([res])[res].result(15)
    want = {**GROUP_DEFAULTS, "consumer.heartbeat.interval.ms": "6000"}
    got = _group_configs(target, group, want)
    assert {k: v for k, (v, _) in got.items()} == want
    assert got["consumer.heartbeat.interval.ms"][1] == DYNAMIC_GROUP_CONFIG

    _incremental(target, group, "consumer.heartbeat.interval.ms", None, AlterConfigOpType.DELETE)
    assert _group_configs(target, group, GROUP_DEFAULTS) == {
        k: (v, DEFAULT_CONFIG) for k, v in GROUP_DEFAULTS.items()}


def test_b_a_consumer_group_obeys_its_heartbeat_interval_config(chronolog: BrokerProcess) -> None:
    """Chronolog's own check (Kafka's answer is the same by its GroupConfig docs): the
    interval a KIP-848 member is told follows the group's config, also once it changes."""
    from tests.broker.test_core_server import Raw
    from tests.broker.test_kip848_wire import heartbeat

    t = Target("chronolog", chronolog.bootstrap, "", AdminClient(
        {"bootstrap.servers": chronolog.bootstrap}))
    topic = _topic(t, "hb")
    group = f"hb-{topic}"
    _incremental(t, group, "consumer.heartbeat.interval.ms", "7000")
    raw = Raw(chronolog.port)
    first = heartbeat(raw, group, "member-1", 0, topics=[topic])
    assert (first.error_code, first.heartbeat_interval_ms) == (0, 7000)
    _incremental(t, group, "consumer.heartbeat.interval.ms", "8000")
    again = heartbeat(raw, group, "member-1", first.member_epoch)
    assert (again.error_code, again.heartbeat_interval_ms) == (0, 8000)
    raw.close()
    chronolog.restart()  # the configs are durable
    want = {**GROUP_DEFAULTS, "consumer.heartbeat.interval.ms": "8000"}
    assert {k: v for k, (v, _) in _group_configs(t, group, want).items()} == want


def test_kafka_acls_tool_adds_lists_and_removes_what_chronolog_stores(
        acl_broker: BrokerProcess, kafka_classpath: str) -> None:
    """kafka-acls against Chronolog's StandardAuthorizer; Chronolog's own client is the oracle."""
    import asyncio

    from client.acls import AclFilter, describe_acls
    from client.aio import Client
    from tests.ecosystem.kafka_peer import tool

    topic = f"acl-tool-{time.time_ns() % 10**9}"
    group = f"g-{topic}"
    bs = ("--bootstrap-server", acl_broker.bootstrap)
    acls = "org.apache.kafka.tools.AclCommand"
    tool(acls, *bs, "--add", "--allow-principal", "User:alice", "--operation", "Read",
         "--operation", "Describe", "--topic", topic, "--group", group)
    tool(acls, *bs, "--add", "--deny-principal", "User:mallory", "--operation", "All",
         "--topic", topic, "--resource-pattern-type", "prefixed")

    async def stored_acls() -> list[tuple[str, ...]]:
        client = await Client.connect(acl_broker.bootstrap)
        try:
            return sorted(a for a in await describe_acls(client, AclFilter())
                          if a.resource_name in (topic, group))
        finally:
            await client.close()

    stored = asyncio.run(stored_acls())
    assert stored == sorted([
        ("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("GROUP", group, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("GROUP", group, "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("TOPIC", topic, "PREFIXED", "User:mallory", "*", "ALL", "DENY"),
    ])
    listed = tool(acls, *bs, "--list", "--topic", topic).stdout
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    tool(acls, *bs, "--remove", "--force", "--allow-principal", "User:alice", "--operation",
         "Describe", "--topic", topic)
    listed = tool(acls, *bs, "--list", "--topic", topic).stdout
    assert "operation=DESCRIBE" not in listed and "operation=READ" in listed
