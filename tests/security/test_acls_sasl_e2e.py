"""ACLs end to end with named SASL principals: users alice, bob and admin log in with
PLAIN and SCRAM over SASL_PLAINTEXT (and SASL_SSL); ``super.users=User:admin`` creates
every ACL through confluent-kafka's AdminClient; alice and bob use real producers,
consumers and a transactional producer.

Expectations are Kafka's rules (security-admin-facts §5): no ACL means no access
(``allow.everyone.if.no.acl.found`` is false), DENY beats ALLOW, READ/WRITE imply
DESCRIBE and nothing else, PREFIXED patterns cover every name they start, super users
pass, Metadata leaves out what a principal may not describe, group and transactional-id
operations are checked, and ACLs survive a restart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AclBinding, AclOperation, AdminClient, ResourceType

from tests.helpers.acl_admin import (
    ALLOW,
    DENY,
    LITERAL,
    PREFIXED,
    binding,
    create_acls,
    create_topics,
    described,
    on_topic,
)
from tests.security.secure_broker import ALICE, BOB, SecureBroker, start_secure_broker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN = ("admin", "admin-Secret-0")
# PLAIN only. Her idempotence test needs WRITE on no topic until it grants one, so no
# test here grants anything on topics to User:*.
CAROL = ("carol", "carol-Secret-3")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in (ALICE, BOB, ADMIN, CAROL)) + ";")
TIMEOUT = 15.0


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    b = start_secure_broker(
        tmp_path_factory.mktemp("acl-sasl"),
        {"authorizer.class.name": AUTHORIZER, "super.users": "User:admin", "sasl.jaas.config": JAAS},
        scram_users=[(ALICE, "SCRAM-SHA-256"), (BOB, "SCRAM-SHA-256"), (BOB, "SCRAM-SHA-512"),
                     (ADMIN, "SCRAM-SHA-512")])
    # librdkafka looks up the coordinator of an assigned consumer's group.id too: everyone
    # may use the scratch- groups, so that reads without a group test topic READ alone.
    grant(b, acl("*", ResourceType.GROUP, "scratch-", AclOperation.READ, pattern=PREFIXED))
    yield b
    b.proc.stop()


def conf(sb: SecureBroker, user: tuple[str, str], mech: str,
         listener: str = "SASL_PLAINTEXT") -> dict[str, Any]:
    c: dict[str, Any] = {"bootstrap.servers": sb.bootstrap(listener), "security.protocol": listener,
                         "sasl.mechanism": mech, "sasl.username": user[0],
                         "sasl.password": user[1]}
    if listener == "SASL_SSL":
        c["ssl.ca.location"] = sb.pki.ca
    return c


def alice(sb: SecureBroker) -> dict[str, Any]:
    return conf(sb, ALICE, "SCRAM-SHA-256")


def bob(sb: SecureBroker) -> dict[str, Any]:
    return conf(sb, BOB, "PLAIN")


def admin(sb: SecureBroker) -> AdminClient:
    return AdminClient(conf(sb, ADMIN, "SCRAM-SHA-512"))


def acl(user: str, rtype: ResourceType, name: str, op: AclOperation, perm=ALLOW,
        pattern=LITERAL) -> AclBinding:
    return binding(f"User:{user}", rtype, name, op, perm, pattern)


def grant(sb: SecureBroker, *bindings: AclBinding) -> None:
    create_acls(admin(sb), *bindings)


def topics(sb: SecureBroker, *names: str) -> None:
    create_topics(admin(sb), *names)


def uid() -> str:
    return uuid.uuid4().hex[:8]


def produce_code(c: dict[str, Any], topic: str, value: bytes = b"v") -> int | None:
    """The delivery error code of one record (None = delivered)."""
    p = Producer({**c, "message.timeout.ms": 8000, "allow.auto.create.topics": False})
    out: list[KafkaError | None] = []
    p.produce(topic, value, on_delivery=lambda err, msg: out.append(err))
    p.flush(TIMEOUT)
    assert out, "no delivery report"
    return None if out[0] is None else int(out[0].code())


def read_from_start(c: dict[str, Any], topic: str, n: int, **extra: Any) -> list[bytes] | int:
    """Assign partition 0 from offset 0 (no group involved): n values, or the error code."""
    cons = Consumer({**c, "group.id": "scratch-" + uid(), "enable.auto.commit": False, **extra})
    got: list[bytes] = []
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return int(m.error().code())
            got.append(m.value())
        return got
    finally:
        cons.close()


def visible(c: dict[str, Any]) -> set[str]:
    return set(AdminClient(c).list_topics(timeout=TIMEOUT).topics)


def test_operations_and_patterns_decide_with_deny_beating_allow(sb: SecureBroker) -> None:
    u = uid()
    a, b = f"p-{u}-a", f"p-{u}-b"
    topics(sb, a, b)
    grant(sb, acl("alice", ResourceType.TOPIC, f"p-{u}-", AclOperation.WRITE, pattern=PREFIXED),
          acl("alice", ResourceType.TOPIC, b, AclOperation.WRITE, DENY),
          acl("bob", ResourceType.TOPIC, a, AclOperation.READ))
    assert produce_code(alice(sb), a, b"from-alice") is None        # the prefix allows
    assert produce_code(alice(sb), b) == KafkaError.TOPIC_AUTHORIZATION_FAILED  # DENY wins
    assert produce_code(bob(sb), a) == KafkaError.TOPIC_AUTHORIZATION_FAILED    # READ is not WRITE
    assert read_from_start(bob(sb), a, 1) == [b"from-alice"]        # bob may READ a
    assert read_from_start(alice(sb), a, 1) == KafkaError.TOPIC_AUTHORIZATION_FAILED  # WRITE only


def test_super_user_needs_no_acl_where_others_have_none(sb: SecureBroker) -> None:
    t = f"s-{uid()}"
    topics(sb, t)
    assert produce_code(conf(sb, ADMIN, "PLAIN"), t, b"root") is None
    assert produce_code(bob(sb), t) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_code(conf(sb, ALICE, "PLAIN"), t) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_shows_each_user_only_the_topics_they_may_describe(sb: SecureBroker) -> None:
    u = uid()
    mine = [f"alice-{u}-1", f"alice-{u}-2"]
    bobs = f"bob-{u}-1"
    topics(sb, *mine, bobs)
    grant(sb, acl("alice", ResourceType.TOPIC, f"alice-{u}", AclOperation.ALL, pattern=PREFIXED),
          acl("bob", ResourceType.TOPIC, bobs, AclOperation.DESCRIBE))
    seen_by_alice, seen_by_bob = visible(alice(sb)), visible(bob(sb))
    assert set(mine) <= seen_by_alice and bobs not in seen_by_alice
    assert bobs in seen_by_bob and not set(mine) & seen_by_bob
    assert {*mine, bobs} <= visible(conf(sb, ADMIN, "SCRAM-SHA-512"))
    bobs_admin = AdminClient(bob(sb))
    named = bobs_admin.list_topics(mine[0], timeout=TIMEOUT).topics[mine[0]]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_group_read_decides_who_joins_and_commits(sb: SecureBroker) -> None:
    u = uid()
    t, alices_group, bobs_group = f"g-{u}", f"ga-{u}", f"gb-{u}"
    topics(sb, t)
    grant(sb, acl("alice", ResourceType.TOPIC, t, AclOperation.WRITE),
          acl("alice", ResourceType.TOPIC, t, AclOperation.READ),
          acl("bob", ResourceType.TOPIC, t, AclOperation.READ),
          acl("alice", ResourceType.GROUP, alices_group, AclOperation.READ),
          acl("bob", ResourceType.GROUP, bobs_group, AclOperation.DESCRIBE),
          # a topic prefix never authorizes a group of the same name (redpanda#1579)
          acl("bob", ResourceType.TOPIC, "gb-", AclOperation.ALL, pattern=PREFIXED))
    assert produce_code(alice(sb), t, b"x") is None
    c = Consumer({**bob(sb), "group.id": bobs_group, "auto.offset.reset": "earliest"})
    try:  # bob finds the coordinator (DESCRIBE) but JoinGroup needs READ
        c.subscribe([t])
        codes = []
        for _ in range(30):
            m = c.poll(0.5)
            if m is not None and m.error():
                codes.append(m.error().code())
                break
        assert codes == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    finally:
        c.close()
    c = Consumer({**bob(sb), "group.id": bobs_group, "enable.auto.commit": False})
    try:  # a standalone commit (OffsetCommit, generation -1) needs READ on the group too
        with pytest.raises(KafkaException) as exc:
            c.commit(offsets=[TopicPartition(t, 0, 1)], asynchronous=False)
        assert exc.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()
    c = Consumer({**alice(sb), "group.id": alices_group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([t])
        m = None
        deadline = time.monotonic() + TIMEOUT
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.5)
        assert m is not None and not m.error() and m.value() == b"x"
        c.commit(message=m, asynchronous=False)
        [tp] = c.committed([TopicPartition(t, 0)], timeout=TIMEOUT)
        assert tp.offset == 1
    finally:
        c.close()


def test_transactional_id_write_decides_who_may_run_transactions(sb: SecureBroker) -> None:
    """alice (PLAIN over SASL_SSL) owns the ``tx-alice-`` ids and commits, but may not add
    a group's offsets without READ on it; bob, with WRITE on the topic but not on any
    transactional id, is refused with 53, also for hers."""
    u = uid()
    t = f"tx-{u}"
    topics(sb, t)
    grant(sb, acl("alice", ResourceType.TRANSACTIONAL_ID, "tx-alice-", AclOperation.WRITE,
                  pattern=PREFIXED),
          acl("alice", ResourceType.TOPIC, t, AclOperation.WRITE),
          acl("bob", ResourceType.TOPIC, t, AclOperation.WRITE))
    p = Producer({**conf(sb, ALICE, "PLAIN", "SASL_SSL"), "transactional.id": f"tx-alice-{u}"})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for i in range(3):
        p.produce(t, f"t{i}".encode())
    p.commit_transaction(TIMEOUT)
    committed = read_from_start(conf(sb, ADMIN, "SCRAM-SHA-512"), t, 3,
                                **{"isolation.level": "read_committed"})
    assert committed == [b"t0", b"t1", b"t2"]
    # Offsets in a transaction need READ on the group (AddOffsetsToTxn): alice has none.
    group = Consumer({**alice(sb), "group.id": f"ctx-{u}"})
    try:
        p.begin_transaction()
        with pytest.raises(KafkaException) as exc:
            p.send_offsets_to_transaction([TopicPartition(t, 0, 3)],
                                          group.consumer_group_metadata(), TIMEOUT)
        assert exc.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        p.abort_transaction(TIMEOUT)
    finally:
        group.close()
    for txn_id in (f"tx-bob-{u}", f"tx-alice-{u}-b"):
        q = Producer({**conf(sb, BOB, "SCRAM-SHA-512"), "transactional.id": txn_id})
        with pytest.raises(KafkaException) as exc:
            q.init_transactions(TIMEOUT)
        assert exc.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_acls_and_their_effect_survive_a_restart(sb: SecureBroker) -> None:
    u = uid()
    t = f"r-{u}"
    topics(sb, t)
    made = [acl("alice", ResourceType.TOPIC, f"r-{u}", AclOperation.WRITE, pattern=PREFIXED),
            acl("bob", ResourceType.TOPIC, t, AclOperation.WRITE),
            acl("bob", ResourceType.TOPIC, f"r-{u}", AclOperation.WRITE, DENY, PREFIXED)]
    grant(sb, *made)
    mine = on_topic(t)
    before = described(admin(sb), mine)
    assert before == sorted(map(str, made))
    sb.proc.stop()
    sb.proc.start()
    assert described(admin(sb), mine) == before
    assert produce_code(alice(sb), t) is None
    assert produce_code(bob(sb), t) == KafkaError.TOPIC_AUTHORIZATION_FAILED  # DENY beats ALLOW


def test_idempotent_producer_needs_write_on_some_topic(sb: SecureBroker) -> None:
    """InitProducerId without a transactional id (Kafka >= 2.8, KIP-679): IDEMPOTENT_WRITE
    on the cluster or WRITE on any topic. carol may DESCRIBE her topic but write nowhere:
    librdkafka's idempotent producer fails fatally with 31; with WRITE on it, it delivers."""
    t = f"carol-{uid()}"
    topics(sb, t)
    grant(sb, acl("carol", ResourceType.TOPIC, t, AclOperation.DESCRIBE))
    p = Producer({**conf(sb, CAROL, "PLAIN"), "enable.idempotence": True,
                  "message.timeout.ms": 8000})
    p.produce(t, b"refused")
    with pytest.raises(KafkaException) as exc:  # the fatal error surfaces from flush
        p.flush(TIMEOUT)
    assert exc.value.args[0].fatal() and \
        exc.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    grant(sb, acl("carol", ResourceType.TOPIC, t, AclOperation.WRITE))
    assert produce_code({**conf(sb, CAROL, "PLAIN"), "enable.idempotence": True}, t) is None
