"""Kafka's Java client (kafka-clients 4.x) over Chronolog's SASL_SSL listener, and its AdminClient.

One Chronolog broker with a PLAINTEXT and a SASL_SSL listener (tests/security's PKI and
users: SCRAM-SHA-512 user bob) and Kafka's StandardAuthorizer
(``allow.everyone.if.no.acl.found=true``, so ACLs can be created and listed):

- tools/kafka-ref/java/ClientCheck.java (producer, consumer, groups of both protocols,
  transactions, AdminClient offsets; checked as in test_java_client.py) runs over SASL_SSL
  with SCRAM: the TLS handshake, the SASL exchange and every API after them;
- tools/kafka-ref/java/AdminCheck.java runs the AdminClient through topics and
  ``createPartitions``, incremental configs (SET, APPEND/SUBTRACT, DELETE, a bad value)
  and the broker's, groups (a simple and a classic group: list, describe live and empty,
  list/alter/delete offsets, delete), ACLs (create, describe with a MATCH filter,
  delete), SCRAM users (``alterUserScramCredentials``/``describeUserScramCredentials``; the
  new user logs in over SASL_SSL), ``describeLogDirs`` and ``deleteTopics``, over both
  listeners.

Every AdminCheck line is checked against what the program itself did (its oracle);
under ``make test-ecosystem`` the same program also runs against the real Kafka (PLAINTEXT,
StandardAuthorizer) and the two outputs must be the same lines.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ecosystem.kafka_peer import KafkaNode, java_program
from tests.ecosystem.test_java_client import BASE, check_against_oracle
from tests.security.secure_broker import BOB, SecureBroker, start_secure_broker

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}

Lines = list[dict[str, Any]]


@pytest.fixture(scope="module")
def secure(module_tmp: Path, kafka_classpath: str) -> Iterator[SecureBroker]:
    sb = start_secure_broker(module_tmp / "secure", AUTHORIZER)
    yield sb
    assert sb.proc.stop() == 0, sb.proc.log()


def _sasl_ssl_props(sb: SecureBroker, path: Path, with_user: bool = True) -> Path:
    """The Java client settings for the SASL_SSL listener (SCRAM-SHA-512, PEM trust store)."""
    lines = ["security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
             "ssl.truststore.type=PEM", f"ssl.truststore.location={sb.pki.ca}"]
    if with_user:
        lines.append("sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                     f'required username="{BOB[0]}" password="{BOB[1]}";')
    path.write_text("\n".join(lines) + "\n")
    return path


def _prefix(name: str) -> str:
    return f"{name}{time.time_ns() % 10**9}"


def admin_check(bootstrap: str, prefix: str, *extra: str) -> Lines:
    lines = java_program("AdminCheck", bootstrap, prefix, *extra)
    assert lines and lines[-1] == {"event": "done"}, lines[-3:]
    return lines


def expected_admin_lines(p: str, scram_login: str | None) -> Lines:
    """What AdminCheck must print, from what it does (see its source, step by step)."""
    t, u = f"{p}-t", f"{p}-u"
    dyn, default = "DYNAMIC_TOPIC_CONFIG", "DEFAULT_CONFIG"
    acl = f"{p}-acl"
    read = f"TOPIC:LITERAL:{acl} User:dora@* READ ALLOW"
    write = f"TOPIC:PREFIXED:{acl}- User:dora@* WRITE ALLOW"
    deny = f"GROUP:LITERAL:{acl}-g User:eve@127.0.0.1 READ DENY"
    # Kafka's defaults for a topic and a broker nobody configured.
    lines: Lines = [
        {"event": "createAgain", "outcome": "TopicExistsException"},
        {"event": "shrinkPartitions", "outcome": "InvalidPartitionsException"},
        {"event": "describeTopic", "partitions": [0, 1, 2, 3], "leadersAreTheNode": True,
         "replicas": [1] * 4, "isr": [1] * 4, "internal": False},
        {"event": "configsSet", "configs": {
            "cleanup.policy": f"delete,compact ({dyn})", "max.message.bytes": f"2000000 ({dyn})",
            "retention.ms": f"3600000 ({dyn})", "segment.bytes": f"1073741824 ({default})"}},
        {"event": "configsDeleted", "configs": {
            "cleanup.policy": f"compact ({dyn})", "max.message.bytes": f"1048588 ({default})",
            "retention.ms": f"3600000 ({dyn})", "segment.bytes": f"1073741824 ({default})"}},
        {"event": "invalidConfig", "outcome": "InvalidConfigurationException"},
        {"event": "brokerConfig", "configs": {
            "log.message.timestamp.type": f"CreateTime ({default})",
            "log.retention.hours": f"168 ({default})",
            "log.segment.bytes": f"1073741824 ({default})",
            "message.max.bytes": f"1048588 ({default})"}},
        {"event": "describeLiveGroup", "state": "Stable", "members": 1, "assignor": "range",
         "simple": False, "type": "Classic", "assigned": [0, 1, 2, 3]},
        {"event": "listGroups", "groups": [f"{p}-classic", f"{p}-simple"]},
        {"event": "describeEmptyGroup", "state": "Empty", "members": 0, "type": "Classic"},
        # The simple group committed 1 on partitions 0 and 1 (with metadata "m" on 1); the
        # classic one consumed the one record of partitions 0-2 and committed its positions.
        {"event": "groupOffsets", "group": f"{p}-simple",
         "offsets": {f"{t}-0": "1:", f"{t}-1": "1:m"}},
        {"event": "groupOffsets", "group": f"{p}-classic",
         "offsets": {f"{t}-0": "1:", f"{t}-1": "1:", f"{t}-2": "1:", f"{t}-3": "0:"}},
        {"event": "groupOffsetsAltered", "offsets": {f"{t}-0": "0:", f"{t}-1": "1:m", f"{t}-2": "1:"}},
        {"event": "groupOffsetsDeleted", "offsets": {f"{t}-0": "0:", f"{t}-2": "1:"}},
        {"event": "groupDeleted", "groups": [f"{p}-classic"], "describe": "GroupIdNotFoundException",
         "deleteAgain": "GroupIdNotFoundException"},
        {"event": "acls", "bindings": sorted([read, write, deny])},
        {"event": "aclsMatching", "bindings": [write]},  # MATCH on "<acl>-x": the prefixed one
        {"event": "aclsDeleted", "deleted": [write], "left": sorted([read, deny])},
        {"event": "scramTwiceInOneRequest", "outcome": "DuplicateResourceException"},
        {"event": "scramUsers", "credentials": ["SCRAM_SHA_256/8192", "SCRAM_SHA_512/4096"]},
    ]
    if scram_login is not None:
        lines.append({"event": "scramLogin", "mechanism": scram_login, "seesTopic": True})
    lines += [
        {"event": "scramDeletedOne", "credentials": ["SCRAM_SHA_512/4096"]},
        {"event": "scramDeletedAll", "describe": "ResourceNotFoundException"},
        # One record went to each of partitions 0-2 of t; partition 3 and u are empty.
        {"event": "logDirs", "dirs": 1, "totalsAndNoError": True, "partitions": {
            **{f"{t}-{i}": "data,lag=0,future=false" for i in range(3)},
            f"{t}-3": "empty,lag=0,future=false", f"{u}-0": "empty,lag=0,future=false"}},
        {"event": "topicDeleted", "listed": [t]},
        {"event": "done"},
    ]
    return lines


def test_java_client_over_sasl_ssl_matches_the_oracle(secure: SecureBroker, tmp_path: Path) -> None:
    props = _sasl_ssl_props(secure, tmp_path / "client.properties")
    lines = java_program("ClientCheck", secure.bootstrap("SASL_SSL"), _prefix("jcs"), str(BASE),
                         str(props))
    assert lines and lines[-1] == {"event": "done"}, lines[-3:]
    check_against_oracle(lines, host="localhost")  # the name the broker's certificate holds


def test_java_admin_over_sasl_ssl_matches_the_oracle(secure: SecureBroker, tmp_path: Path) -> None:
    props = _sasl_ssl_props(secure, tmp_path / "client.properties")
    login = _sasl_ssl_props(secure, tmp_path / "login.properties", with_user=False)
    login.write_text(login.read_text().replace("SCRAM-SHA-512", "SCRAM-SHA-256"))
    p = _prefix("jas")
    got = admin_check(secure.bootstrap("SASL_SSL"), p, str(props), str(login))
    assert got == expected_admin_lines(p, scram_login="SCRAM-SHA-256")


@pytest.mark.ecosystem_full
def test_java_admin_over_plaintext_matches_the_oracle(secure: SecureBroker) -> None:
    p = _prefix("jap")
    assert admin_check(secure.bootstrap("PLAINTEXT"), p) == expected_admin_lines(p, None)


@pytest.fixture(scope="module")
def kafka_with_authorizer(kafka_classpath: str,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    node = KafkaNode(tmp_path_factory.mktemp("kafka-acl"), AUTHORIZER).start()
    yield node
    node.stop()


@pytest.mark.ecosystem_full
def test_java_admin_sees_chronolog_exactly_as_it_sees_kafka(
        secure: SecureBroker, kafka_with_authorizer: KafkaNode) -> None:
    kafka = admin_check(kafka_with_authorizer.bootstrap, "same")
    assert kafka == expected_admin_lines("same", None)
    assert admin_check(secure.bootstrap("PLAINTEXT"), "same") == kafka
