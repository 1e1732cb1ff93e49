"""ACLs end to end: a real broker subprocess, confluent-kafka's admin API, producers and
consumers, all as User:ANONYMOUS (the principal of every PLAINTEXT connection).

Expectations come from Kafka's rules (security-admin-facts §5): DENY beats ALLOW,
super users pass, ``allow.everyone.if.no.acl.found`` decides for resources with no
ACL, Metadata drops topics the principal may not describe, and ACLs survive a restart.
"""

from __future__ import annotations

import signal
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.helpers.acl_admin import binding, create_acls, create_topics

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ME = "User:ANONYMOUS"
TIMEOUT = 15.0
ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)


def acl(rtype, name, op, perm=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL,
        principal=ME):
    return binding(principal, rtype, name, op, perm, pattern)


def produce_error(bootstrap: str, topic: str) -> KafkaError | None:
    """The delivery error of one record (None = delivered)."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000,
                  "allow.auto.create.topics": False})
    out: list[KafkaError | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: out.append(err))
    p.flush(TIMEOUT)
    assert out, "no delivery report"
    return out[0]


def first_error(c: Consumer) -> int | None:
    """The code of the first error the consumer reports within 15 s."""
    for _ in range(30):
        msg = c.poll(0.5)
        if msg is not None and msg.error():
            return int(msg.error().code())
    return None


def listed_topics(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=TIMEOUT).topics)


@pytest.fixture
def open_broker(broker_factory):
    """Authorizer on, allow.everyone.if.no.acl.found: only resources with ACLs are guarded."""
    return broker_factory({"authorizer.class.name": AUTHORIZER,
                           "allow.everyone.if.no.acl.found": "true"})


def test_acls_created_described_deleted_and_kept_across_restart_and_crash(broker_factory):
    b = broker_factory({"authorizer.class.name": AUTHORIZER, "super.users": ME})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    made = [acl(ResourceType.TOPIC, "orders", AclOperation.READ),
            acl(ResourceType.TOPIC, "pay.", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
            acl(ResourceType.GROUP, "*", AclOperation.ALL, AclPermissionType.DENY, principal="User:*")]
    create_acls(admin, *made)
    create_acls(admin, made[0])  # a duplicate succeeds and stays one ACL
    assert sorted(map(str, admin.describe_acls(ANY_FILTER).result())) == sorted(map(str, made))
    match = AclBindingFilter(ResourceType.TOPIC, "pay.eu", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert [str(x) for x in admin.describe_acls(match).result()] == [str(made[1])]
    b.stop(signal.SIGKILL)  # a crash right after the acknowledgement loses nothing
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert sorted(map(str, admin.describe_acls(ANY_FILTER).result())) == sorted(map(str, made))
    gone = admin.delete_acls([match])[match].result()
    assert [str(x) for x in gone] == [str(made[1])]
    b.stop()
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert sorted(map(str, admin.describe_acls(ANY_FILTER).result())) == sorted(
        [str(made[0]), str(made[2])])


def test_invalid_creation_is_refused_alone(open_broker):
    admin = AdminClient({"bootstrap.servers": open_broker.bootstrap})
    good = acl(ResourceType.TOPIC, "t", AclOperation.READ)
    bad = acl(ResourceType.BROKER, "not-kafka-cluster", AclOperation.ALTER)
    res = admin.create_acls([good, bad], request_timeout=TIMEOUT)
    res[good].result()
    with pytest.raises(KafkaException) as exc:
        res[bad].result()
    assert exc.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_without_authorizer_acl_apis_answer_security_disabled(broker_factory):
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    with pytest.raises(KafkaException) as exc:
        create_acls(admin, acl(ResourceType.TOPIC, "t", AclOperation.READ))
    assert exc.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_deny_beats_allow_for_produce_and_metadata(open_broker):
    bs = open_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    create_topics(admin, "free", "guarded", "hidden")
    assert produce_error(bs, "free") is None  # no ACL on it: allow.everyone decides
    create_acls(admin, acl(ResourceType.TOPIC, "guarded", AclOperation.ALL),
           acl(ResourceType.TOPIC, "guar", AclOperation.WRITE, AclPermissionType.DENY,
               pattern=ResourcePatternType.PREFIXED))
    err = produce_error(bs, "guarded")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # hidden: an ACL for someone else exists, so ANONYMOUS has no DESCRIBE: left out.
    create_acls(admin, acl(ResourceType.TOPIC, "hidden", AclOperation.READ, principal="User:bob"))
    assert listed_topics(admin) == {"free", "guarded"}  # READ on "guarded" implies DESCRIBE


def test_super_user_passes_where_everyone_else_is_denied(broker_factory):
    topic = "t-" + uuid.uuid4().hex[:6]
    for supers, expect in ((ME, None), ("User:root", KafkaError.TOPIC_AUTHORIZATION_FAILED)):
        b = broker_factory({"authorizer.class.name": AUTHORIZER, "super.users": supers,
                            "allow.everyone.if.no.acl.found": "true"})
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1)])[topic].result()
        create_acls(admin, acl(ResourceType.TOPIC, "*", AclOperation.WRITE, AclPermissionType.DENY,
                          principal="User:*"))
        err = produce_error(b.bootstrap, topic)
        assert (err.code() if err else None) == expect


def test_group_read_denied_fails_the_consumer_with_group_authorization(open_broker):
    bs = open_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("events", 1)])["events"].result()
    assert produce_error(bs, "events") is None
    create_acls(admin, acl(ResourceType.GROUP, "blocked", AclOperation.READ, AclPermissionType.DENY))
    c = Consumer({"bootstrap.servers": bs, "group.id": "blocked", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["events"])
        assert first_error(c) == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()
    # Another group is unaffected and reads the record.
    c = Consumer({"bootstrap.servers": bs, "group.id": "fine", "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition("events", 0, 0)])
        msg = c.poll(TIMEOUT)
        assert msg is not None and not msg.error() and msg.value() == b"v"
    finally:
        c.close()


def test_kip848_subscription_with_an_undescribable_topic_fails_the_heartbeat(open_broker):
    """librdkafka 0109 under the consumer protocol: a subscription naming a topic the
    principal may not DESCRIBE fails the whole ConsumerGroupHeartbeat with
    TOPIC_AUTHORIZATION_FAILED, as Kafka's KafkaApis checks; without that topic the same
    consumer group gets its assignment."""
    bs = open_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    for t in ("open848", "hidden848"):
        admin.create_topics([NewTopic(t, 1)])[t].result()
    assert produce_error(bs, "open848") is None
    create_acls(admin, acl(ResourceType.TOPIC, "hidden848", AclOperation.ALL, AclPermissionType.DENY))
    conf = {"bootstrap.servers": bs, "group.protocol": "consumer", "auto.offset.reset": "earliest"}
    c = Consumer({**conf, "group.id": "g848-denied"})
    try:
        c.subscribe(["open848", "hidden848"])
        assert first_error(c) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        c.close()
    c = Consumer({**conf, "group.id": "g848-fine"})
    try:
        c.subscribe(["open848"])
        msg = None
        for _ in range(30):
            msg = c.poll(0.5)
            if msg is not None:
                break
        assert msg is not None and not msg.error() and msg.value() == b"v"
    finally:
        c.close()


def test_fetch_needs_read_on_the_topic(open_broker):
    bs = open_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("secret", 1)])["secret"].result()
    assert produce_error(bs, "secret") is None
    create_acls(admin, acl(ResourceType.TOPIC, "secret", AclOperation.DESCRIBE),
           acl(ResourceType.TOPIC, "secret", AclOperation.READ, AclPermissionType.DENY))
    c = Consumer({"bootstrap.servers": bs, "group.id": "g", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("secret", 0, 0)])
        assert first_error(c) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        c.close()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_acl_api_version_clients_send_round_trips(open_broker, version):
    """librdkafka 2.0.2 and kafkajs send v0-1, librdkafka 2.15 up to v2; v0 means LITERAL."""
    import asyncio

    from client.acls import Acl, AclFilter, create_acls, delete_acls, describe_acls
    from client.aio import Client

    async def go() -> tuple[list, list, list]:
        c = await Client.connect(open_broker.bootstrap)
        try:
            for key in (29, 30, 31):
                c._versions[key] = version
            pattern = "LITERAL" if version == 0 else "PREFIXED"
            made = Acl("TOPIC", f"v{version}", pattern, ME, "*", "READ", "DENY")
            await create_acls(c, [made])
            listed = await describe_acls(c, AclFilter(resource_name=f"v{version}",
                                                      pattern_type="LITERAL" if version == 0
                                                      else "ANY"))
            removed = await delete_acls(c, [AclFilter(resource_name=f"v{version}",
                                                      pattern_type=pattern)])
            return [made], listed, removed
        finally:
            await c.close()

    made, listed, removed = asyncio.run(go())
    assert listed == made and removed == made


def test_admin_apis_check_create_delete_and_config_operations(open_broker):
    from confluent_kafka.admin import ConfigResource
    from confluent_kafka.admin import ResourceType as ConfigType

    admin = AdminClient({"bootstrap.servers": open_broker.bootstrap})
    admin.create_topics([NewTopic("kept", 1)])["kept"].result()
    # The cluster gets an ACL (so CREATE on it is no longer everyone's): topic creation
    # then falls back to CREATE on the topic, Kafka's second chance.
    create_acls(admin,
           acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER),
           acl(ResourceType.TOPIC, "no-", AclOperation.CREATE, AclPermissionType.DENY,
               pattern=ResourcePatternType.PREFIXED),
           acl(ResourceType.TOPIC, "kept", AclOperation.DELETE, AclPermissionType.DENY),
           acl(ResourceType.TOPIC, "kept", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY),
           acl(ResourceType.TOPIC, "kept", AclOperation.DESCRIBE))

    def code_of(future) -> int:
        with pytest.raises(KafkaException) as exc:
            future.result()
        return int(exc.value.args[0].code())

    assert code_of(admin.create_topics([NewTopic("no-way", 1)])["no-way"]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED)
    admin.create_topics([NewTopic("yes-way", 1)])["yes-way"].result()  # no ACL: allowed
    assert code_of(admin.delete_topics(["kept"])["kept"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    res = ConfigResource(ConfigType.TOPIC, "kept")
    assert code_of(admin.describe_configs([res])[res]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "kept" in listed_topics(admin)  # DESCRIBE is still allowed


def test_auto_creation_needs_create(open_broker):
    bs = open_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    create_acls(admin, acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER),
           acl(ResourceType.TOPIC, "auto-no", AclOperation.CREATE, AclPermissionType.DENY,
               pattern=ResourcePatternType.PREFIXED))
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 5000})
    out: dict[str, KafkaError | None] = {}
    for topic in ("auto-yes", "auto-no"):
        p.produce(topic, b"v", on_delivery=lambda err, msg, t=topic: out.__setitem__(t, err))
    p.flush(TIMEOUT)
    assert out["auto-yes"] is None
    assert out["auto-no"] is not None
    assert out["auto-no"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "auto-no" not in listed_topics(admin) and "auto-yes" in listed_topics(admin)
