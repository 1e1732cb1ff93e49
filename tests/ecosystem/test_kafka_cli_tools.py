"""Kafka's own CLI tools, run as Kafka ships them (``java -cp … <main class>``), against Chronolog.

Each tool's answer is compared with what Chronolog's own client says about the
same topic (the oracle), never with hard-coded numbers. The same tests run
against the real Apache Kafka node too (under ``make test-ecosystem``), which
checks both the tools' parsing here and that the two brokers answer alike.
Tests that start many tool JVMs (about 3 s each on two shared cores) are in the long
set only (``ecosystem_full``).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from client.aio import ProducerRecord
from client.sync import SyncClient
from protocol.errors import ErrorCode, KafkaError
from tests.ecosystem.kafka_peer import (
    CONFIGS,
    CONSOLE_CONSUMER,
    CONSOLE_PRODUCER,
    CONSUMER_GROUPS,
    DELETE_RECORDS,
    GET_OFFSETS,
    TOPICS,
    KafkaNode,
    tool,
)

PARTITIONS = 3
BASE_TS = int(time.time() * 1000) - 3_600_000


@dataclass
class Target:
    name: str
    bootstrap: str
    client: SyncClient


@pytest.fixture(scope="module", params=[
    "chronolog", pytest.param("kafka", marks=pytest.mark.ecosystem_full)])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "chronolog":
        bootstrap = request.getfixturevalue("chronolog").bootstrap
    else:
        node: KafkaNode = request.getfixturevalue("kafka_node")
        bootstrap = node.bootstrap
    with SyncClient.connect(bootstrap) as client:
        yield Target(request.param, bootstrap, client)


_names = iter(range(1_000_000))


def _topic(t: Target, prefix: str, timestamps: list[int] | None = None) -> str:
    """A fresh topic of PARTITIONS partitions; ``timestamps`` are produced round-robin."""
    name = f"{prefix}-{next(_names)}-{time.time_ns() % 10**9}"
    t.client.create_topic(name, PARTITIONS)
    for i, ts in enumerate(timestamps or []):
        record = ProducerRecord(key=f"k{i}", value=f"v{i}", timestamp=ts)
        deadline = time.monotonic() + 15
        while True:
            try:
                t.client.produce(name, [record], partition=i % PARTITIONS)
                break
            except KafkaError as e:
                # Kafka answers NOT_LEADER_OR_FOLLOWER until the new topic's leadership
                # reaches its metadata cache; Chronolog's client does not retry it.
                if e.code != ErrorCode.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    return name


def _stamps(seed: int, n: int = 30) -> list[int]:
    rnd = random.Random(seed)
    return [BASE_TS + rnd.randrange(0, 60_000) for _ in range(n)]  # out of order


def _all_records(t: Target, topic: str) -> list[tuple[int, int, int, str | None, str | None]]:
    """(partition, offset, timestamp, key, value) of every record, by Chronolog's client."""
    out = []
    for p in range(PARTITIONS):
        end = t.client.latest(topic, [p])[p]
        for r in t.client.consume(topic, p, t.client.earliest(topic, [p])[p], end):
            out.append((p, r.offset, r.timestamp,
                        None if r.key is None else r.key.decode(),
                        None if r.value is None else r.value.decode()))
    return sorted(out)


def test_topics_create_list_describe(target: Target) -> None:
    name = f"cli-topics-{time.time_ns() % 10**9}"
    bs = ("--bootstrap-server", target.bootstrap)
    out = tool(TOPICS, *bs, "--create", "--topic", name, "--partitions", str(PARTITIONS),
               "--replication-factor", "1", "--config", "retention.ms=86400000").stdout
    assert f"Created topic {name}." in out
    assert name in tool(TOPICS, *bs, "--list").stdout.split()
    described = tool(TOPICS, *bs, "--describe", "--topic", name).stdout
    head, *rows = [line for line in described.splitlines() if line.strip()]
    assert f"PartitionCount: {PARTITIONS}" in head and "ReplicationFactor: 1" in head
    assert "retention.ms=86400000" in head
    assert target.client.describe_configs(name)["retention.ms"] == "86400000"  # type: ignore[index]
    assert sorted(int(re.search(r"Partition: (\d+)", r).group(1)) for r in rows) == \
        target.client.partitions_for(name)  # type: ignore[union-attr]


def test_console_consumer_prints_the_records_and_timestamps_chronolog_serves(target: Target) -> None:
    topic = _topic(target, "cli-console", _stamps(1))
    lines = "".join(f"pk{i}:pv{i}\n" for i in range(6))
    tool(CONSOLE_PRODUCER, "--bootstrap-server", target.bootstrap, "--topic", topic,
         "--property", "parse.key=true", "--property", "key.separator=:", stdin=lines)
    want = _all_records(target, topic)
    assert [r for r in want if r[3] and r[3].startswith("pk")].__len__() == 6
    out = tool(CONSOLE_CONSUMER, "--bootstrap-server", target.bootstrap, "--topic", topic,
               "--from-beginning", "--max-messages", str(len(want)), "--timeout-ms", "30000",
               "--property", "print.timestamp=true", "--property", "print.key=true",
               "--property", "print.partition=true", "--property", "print.offset=true").stdout
    got = []
    for line in out.splitlines():
        ts, part, off, key, value = line.split("\t")
        assert ts.startswith("CreateTime:")
        got.append((int(part.removeprefix("Partition:")), int(off.removeprefix("Offset:")),
                    int(ts.removeprefix("CreateTime:")), key, value))
    assert sorted(got) == want


def _get_offsets(target: Target, topic: str, time_arg: str) -> dict[int, int]:
    out = tool(GET_OFFSETS, "--bootstrap-server", target.bootstrap, "--topic", topic,
               "--time", time_arg).stdout
    found = {}
    for line in out.splitlines():
        name, p, off = line.rsplit(":", 2)
        assert name == topic
        found[int(p)] = int(off)
    return found


def test_get_offsets_by_time_and_special_values(target: Target) -> None:
    stamps = _stamps(2)
    topic = _topic(target, "cli-offsets", stamps)
    c = target.client
    probes = [min(stamps), sorted(stamps)[len(stamps) // 2], max(stamps), max(stamps) + 1]
    for probe in probes:
        want = {p: hit[0] for p, hit in c.offsets_for_times(topic, probe).items() if hit}
        assert _get_offsets(target, topic, str(probe)) == want, probe
    assert _get_offsets(target, topic, "-1") == c.latest(topic)
    assert _get_offsets(target, topic, "-2") == c.earliest(topic)
    want_max = {p: hit[0] for p, hit in c.max_timestamp(topic).items() if hit}
    assert _get_offsets(target, topic, "-3") == want_max
    # Without tiered storage: EARLIEST_LOCAL is the log start, LATEST_TIERED is -1 (omitted).
    assert _get_offsets(target, topic, "-4") == c.earliest(topic)
    assert _get_offsets(target, topic, "-5") == {}


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def test_consumer_groups_reset_offsets_to_datetime_then_describe(target: Target) -> None:
    stamps = _stamps(3)
    topic = _topic(target, "cli-groups", stamps)
    group = f"g-{topic}"
    at = sorted(stamps)[len(stamps) // 3]
    tool(CONSUMER_GROUPS, "--bootstrap-server", target.bootstrap, "--reset-offsets",
         "--group", group, "--topic", topic, "--to-datetime", _utc(at), "--execute")
    c = target.client
    latest = c.latest(topic)
    want = {p: (hit[0] if hit else latest[p]) for p, hit in c.offsets_for_times(topic, at).items()}
    out = tool(CONSUMER_GROUPS, "--bootstrap-server", target.bootstrap, "--describe",
               "--group", group).stdout
    got = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[1] == topic:
            got[int(cols[2])] = int(cols[3])
            assert int(cols[4]) == latest[int(cols[2])]
            assert int(cols[5]) == latest[int(cols[2])] - int(cols[3])
    assert got == want


def test_configs_alter_and_describe_a_topic(target: Target) -> None:
    topic = _topic(target, "cli-configs")
    args = ("--bootstrap-server", target.bootstrap, "--entity-type", "topics",
            "--entity-name", topic)
    tool(CONFIGS, *args, "--alter", "--add-config", "retention.ms=123456789,segment.ms=3600000")
    described = tool(CONFIGS, *args, "--describe").stdout
    assert "retention.ms=123456789" in described and "segment.ms=3600000" in described
    configs = target.client.describe_configs(topic)
    assert configs and configs["retention.ms"] == "123456789" and configs["segment.ms"] == "3600000"
    tool(CONFIGS, *args, "--alter", "--delete-config", "segment.ms")
    described = tool(CONFIGS, *args, "--describe").stdout
    assert "segment.ms=" not in described and "retention.ms=123456789" in described
    configs = target.client.describe_configs(topic)
    assert configs and configs["segment.ms"] == "604800000"  # back to the default


def test_delete_records_moves_the_log_start_offset(target: Target, tmp_path: Path) -> None:
    topic = _topic(target, "cli-delete", _stamps(4))
    cut = target.client.latest(topic, [0])[0] // 2
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": cut}],
                                "version": 1}))
    out = tool(DELETE_RECORDS, "--bootstrap-server", target.bootstrap,
               "--offset-json-file", str(spec)).stdout
    assert f"partition: {topic}-0\tlow_watermark: {cut}" in out
    assert target.client.earliest(topic, [0]) == {0: cut}
    assert _get_offsets(target, topic, "-2")[0] == cut


def _table(out: str) -> list[dict[str, str]]:
    """A tab-separated table with a header row, as kafka-transactions prints it."""
    lines = [line for line in out.splitlines() if line.strip()]
    head = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [dict(zip(head, (c.strip() for c in line.split("\t")), strict=False))
            for line in lines[1:]]


def test_transactions_list_describe_and_describe_producers(target: Target) -> None:
    from confluent_kafka import Producer

    topic = _topic(target, "cli-txn")
    txn_id = f"tx-{topic}"
    offsets: list[int] = []
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": txn_id})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0,
              on_delivery=lambda err, msg: offsets.append(msg.offset()))
    p.flush(15)
    p.commit_transaction(15)
    p.begin_transaction()  # left open: Ongoing, with a start offset on partition 0
    p.produce(topic, b"open", partition=0,
              on_delivery=lambda err, msg: offsets.append(msg.offset()))
    p.flush(15)
    bs = ("--bootstrap-server", target.bootstrap)
    node = str(_node_id(target))
    listed = [r for r in _table(tool("org.apache.kafka.tools.TransactionsCommand", *bs,
                                     "list").stdout) if r["TransactionalId"] == txn_id]
    assert [(r["Coordinator"], r["TransactionState"]) for r in listed] == [(node, "Ongoing")]
    pid = listed[0]["ProducerId"]
    [described] = _table(tool("org.apache.kafka.tools.TransactionsCommand", *bs, "describe",
                              "--transactional-id", txn_id).stdout)
    assert (described["CoordinatorId"], described["ProducerId"], described["ProducerEpoch"],
            described["TransactionState"], described["TopicPartitions"]) == \
        (node, pid, "0", "Ongoing", f"{topic}-0")
    [producer] = _table(tool("org.apache.kafka.tools.TransactionsCommand", *bs,
                             "describe-producers", "--topic", topic, "--partition", "0").stdout)
    # One committed record, its marker, then the open transaction's first record.
    assert offsets == [0, 2]
    assert (producer["ProducerId"], producer["ProducerEpoch"], producer["LatestCoordinatorEpoch"],
            producer["LastSequence"], producer["CurrentTransactionStartOffset"]) == \
        (pid, "0", "0", "1", "2")
    p.abort_transaction(15)


def _node_id(target: Target) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": target.bootstrap})  # held until answered
    return int(admin.describe_cluster().result(15).nodes[0].id)


def test_consumer_groups_describe_a_live_kip848_group(target: Target) -> None:
    """A librdkafka member (group.protocol=consumer) holds every partition and has
    committed the end: --describe, --members --verbose and --state --verbose say so."""
    from confluent_kafka import Consumer

    topic = _topic(target, "cli-848", _stamps(5, 12))
    group = f"g848-{topic}"
    latest = target.client.latest(topic)
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "client.id": "cli-848", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        seen, deadline = 0, time.monotonic() + 30
        while seen < sum(latest.values()) and time.monotonic() < deadline:
            m = c.poll(0.2)
            seen += m is not None and m.error() is None
        assert seen == sum(latest.values())
        c.commit(asynchronous=False)
        bs = ("--bootstrap-server", target.bootstrap)
        rows = [line.split() for line in tool(CONSUMER_GROUPS, *bs, "--describe", "--group",
                                              group).stdout.splitlines()]
        rows = [r for r in rows if r[:2] == [group, topic]]
        assert sorted((int(r[2]), int(r[3]), int(r[4]), int(r[5]), r[-1]) for r in rows) == [
            (p, latest[p], latest[p], 0, "cli-848") for p in range(PARTITIONS)]
        members = [line.split() for line in tool(
            CONSUMER_GROUPS, *bs, "--describe", "--group", group, "--members",
            "--verbose").stdout.splitlines()]
        [member] = [r for r in members if r[:1] == [group]]
        assignment = f"{topic}:{','.join(map(str, range(PARTITIONS)))}"
        # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT ...
        assert (member[3], member[4], member[6], member[8]) == (
            "cli-848", str(PARTITIONS), assignment, assignment)
        state = [line.split() for line in tool(
            CONSUMER_GROUPS, *bs, "--describe", "--group", group, "--state",
            "--verbose").stdout.splitlines()]
        [row] = [r for r in state if r[:1] == [group]]
        assert ("uniform", "Stable", "1") == (row[3], row[4], row[-1])
    finally:
        c.close()


@pytest.mark.ecosystem_full  # several JVM starts each: the long set
def test_topics_alter_partitions_and_delete(target: Target) -> None:
    topic = _topic(target, "cli-topics-alter")
    bs = ("--bootstrap-server", target.bootstrap)
    tool(TOPICS, *bs, "--alter", "--topic", topic, "--partitions", str(PARTITIONS + 2))
    deadline = time.monotonic() + 10  # Kafka: until the change reaches its metadata cache
    while len(target.client.partitions_for(topic)) != PARTITIONS + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert target.client.partitions_for(topic) == list(range(PARTITIONS + 2))
    head = tool(TOPICS, *bs, "--describe", "--topic", topic).stdout.splitlines()[0]
    assert f"PartitionCount: {PARTITIONS + 2}" in head
    shrink = tool(TOPICS, *bs, "--alter", "--topic", topic, "--partitions", "1", check=False)
    assert shrink.returncode == 1
    assert "InvalidPartitionsException" in shrink.stdout + shrink.stderr
    tool(TOPICS, *bs, "--delete", "--topic", topic)
    deadline = time.monotonic() + 10
    while topic in tool(TOPICS, *bs, "--list").stdout.split():
        assert time.monotonic() < deadline, f"{topic} still listed"
        time.sleep(0.2)
    assert topic not in target.client.list_topics()


@pytest.mark.ecosystem_full  # several JVM starts each: the long set
def test_console_tools_on_a_log_append_time_topic(target: Target) -> None:
    """The console producer cannot set a record's time (Kafka 4.1 has no such property),
    so a LogAppendTime topic is how its records get a time of the broker's: the console
    consumer prints ``LogAppendTime:<ms>``, the time the broker wrote them."""
    name = f"cli-lat-{time.time_ns() % 10**9}"
    bs = ("--bootstrap-server", target.bootstrap)
    tool(TOPICS, *bs, "--create", "--topic", name, "--partitions", "1", "--replication-factor",
         "1", "--config", "message.timestamp.type=LogAppendTime")
    before = int(time.time() * 1000)
    tool(CONSOLE_PRODUCER, *bs, "--topic", name, stdin="".join(f"line{i}\n" for i in range(5)))
    after = int(time.time() * 1000)
    out = tool(CONSOLE_CONSUMER, *bs, "--topic", name, "--from-beginning", "--max-messages",
               "5", "--timeout-ms", "30000", "--property", "print.timestamp=true",
               "--property", "print.offset=true").stdout
    got = []
    for line in out.splitlines():
        ts, off, value = line.split("\t")
        assert ts.startswith("LogAppendTime:"), line
        got.append((int(off.removeprefix("Offset:")), int(ts.removeprefix("LogAppendTime:")), value))
    served = [(r.offset, r.timestamp, r.value.decode() if r.value is not None else None)
              for r in target.client.consume(name, 0, 0, target.client.latest(name, [0])[0])]
    assert got == served and [v for _, _, v in got] == [f"line{i}" for i in range(5)]
    assert all(before <= ts <= after for _, ts, _ in got)


def _committed(target: Target, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as librdkafka reads them (OffsetFetch); -1001 = none."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)}
    finally:
        c.close()


@pytest.mark.ecosystem_full  # several JVM starts each: the long set
def test_consumer_groups_list_reset_variants_delete_offsets_and_delete(target: Target) -> None:
    topic = _topic(target, "cli-grp2", _stamps(6))
    group = f"g2-{topic}"
    bs = ("--bootstrap-server", target.bootstrap)
    reset = (CONSUMER_GROUPS, *bs, "--reset-offsets", "--group", group, "--topic", topic)
    latest, earliest = target.client.latest(topic), target.client.earliest(topic)
    tool(*reset, "--to-latest", "--execute")
    assert _committed(target, group, topic) == latest
    assert group in tool(CONSUMER_GROUPS, *bs, "--list").stdout.split()
    # Without --execute it is a dry run: the plan is printed, nothing changes.
    plan = tool(*reset, "--to-earliest").stdout
    planned = {int(r[2]): int(r[3]) for r in (line.split() for line in plan.splitlines())
               if r[:2] == [group, topic]}
    assert planned == earliest
    assert _committed(target, group, topic) == latest
    tool(*reset, "--shift-by", "-2", "--execute")
    assert _committed(target, group, topic) == {p: max(earliest[p], o - 2) for p, o in latest.items()}
    tool(CONSUMER_GROUPS, *bs, "--reset-offsets", "--group", group, "--topic", f"{topic}:1",
         "--to-offset", "1", "--execute")
    assert _committed(target, group, topic)[1] == 1
    out = tool(CONSUMER_GROUPS, *bs, "--delete-offsets", "--group", group, "--topic",
               f"{topic}:0").stdout
    assert re.search(rf"{re.escape(topic)}\s+0\s+Successful", out), out
    assert _committed(target, group, topic)[0] == -1001  # OFFSET_INVALID: none
    out = tool(CONSUMER_GROUPS, *bs, "--delete", "--group", group).stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out
    assert group not in tool(CONSUMER_GROUPS, *bs, "--list").stdout.split()
    assert set(_committed(target, group, topic).values()) == {-1001}


@pytest.mark.ecosystem_full  # several JVM starts each: the long set
def test_configs_scram_users_and_a_broker(target: Target) -> None:
    """kafka-configs --entity-type users adds and deletes SCRAM credentials (through
    AlterUserScramCredentials), one mechanism per call, as Kafka's controller wants;
    --entity-type brokers describes the node's dynamic settings."""
    from confluent_kafka.admin import AdminClient

    user = f"cli-user-{time.time_ns() % 10**9}"
    args = ("--bootstrap-server", target.bootstrap, "--entity-type", "users", "--entity-name", user)
    tool(CONFIGS, *args, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw1]")
    tool(CONFIGS, *args, "--alter", "--add-config", "SCRAM-SHA-512=[password=pw2]")
    admin = AdminClient({"bootstrap.servers": target.bootstrap})

    def credentials() -> list[tuple[str, int]]:
        deadline = time.monotonic() + 10
        while True:
            try:
                d = admin.describe_user_scram_credentials([user])[user].result(15)
                got = sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
            except Exception:  # RESOURCE_NOT_FOUND: none (yet, or any more)
                got = []
            if got == want or time.monotonic() > deadline:
                return got

    want = [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]
    assert credentials() == want
    described = tool(CONFIGS, *args, "--describe").stdout.strip()
    head = f"SCRAM credential configs for user-principal '{user}' are "
    assert described.startswith(head), described
    # In the order of the broker's answer, which Kafka does not fix (a hash map there).
    assert sorted(described.removeprefix(head).split(", ")) == [
        "SCRAM-SHA-256=iterations=8192", "SCRAM-SHA-512=iterations=4096"]
    tool(CONFIGS, *args, "--alter", "--delete-config", "SCRAM-SHA-256")
    want = [("SCRAM_SHA_512", 4096)]
    assert credentials() == want
    both = tool(CONFIGS, *args, "--alter", "--add-config",
                "SCRAM-SHA-256=[password=a],SCRAM-SHA-512=[password=b]", check=False)
    assert both.returncode != 0
    assert "A user credential cannot be altered twice in the same request" in both.stdout + both.stderr
    assert credentials() == want  # nothing of the refused request applied

    node = str(_node_id(target))
    brokers = ("--bootstrap-server", target.bootstrap, "--entity-type", "brokers",
               "--entity-name", node)
    tool(CONFIGS, *brokers, "--alter", "--add-config", "log.retention.ms=7200000")
    deadline = time.monotonic() + 10
    while "log.retention.ms=7200000" not in (out := tool(CONFIGS, *brokers, "--describe").stdout):
        assert time.monotonic() < deadline, out
        time.sleep(0.2)
    assert f"Dynamic configs for broker {node} are:" in out
    tool(CONFIGS, *brokers, "--alter", "--delete-config", "log.retention.ms")
    deadline = time.monotonic() + 10
    while "log.retention.ms=" in (out := tool(CONFIGS, *brokers, "--describe").stdout):
        assert time.monotonic() < deadline, out
        time.sleep(0.2)


def test_transactions_find_hanging_finds_none_after_commit_and_abort(target: Target) -> None:
    from confluent_kafka import Producer

    topic = _topic(target, "cli-hang")
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(15)
    for commit in (True, False):
        p.begin_transaction()
        p.produce(topic, b"x", partition=0)
        p.flush(15)
        (p.commit_transaction if commit else p.abort_transaction)(15)
    out = tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
               target.bootstrap, "find-hanging", "--broker-id", str(_node_id(target))).stdout
    # The table's header and no row (Kafka 4.1 prints the header even when none hangs).
    assert out.strip().splitlines() == ["\t".join([
        "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
        "LastTimestamp", "Duration(min)"])]


def test_transactions_abort_ends_a_hanging_transaction(target: Target) -> None:
    """``kafka-transactions abort`` (DescribeProducers, then WriteTxnMarkers to the leader)
    ends a transaction its producer left open: read_committed sees its records as aborted,
    the LSO moves to the high watermark and the partition shows no open transaction."""
    from confluent_kafka import Producer
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTP

    from tests.helpers.confluent import consume_isolated

    topic = _topic(target, "cli-abort")
    sent: dict[bytes, int] = {}  # value -> offset, from the delivery reports

    def delivered(err: object, msg: Any) -> None:
        assert err is None, err
        sent[msg.value()] = msg.offset()

    # transaction.timeout.ms: the coordinator must not abort it itself during the test.
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"tx-{topic}",
                  "transaction.timeout.ms": 300_000})
    p.init_transactions(15)
    p.begin_transaction()
    committed = [f"c{i}".encode() for i in range(3)]
    for v in committed:
        p.produce(topic, v, partition=0, on_delivery=delivered)
    p.flush(15)
    p.commit_transaction(15)
    p.begin_transaction()  # never ended: the hanging transaction
    hanging = [f"h{i}".encode() for i in range(4)]
    for v in hanging:
        p.produce(topic, v, partition=0, on_delivery=delivered)
    assert p.flush(15) == 0
    start = sent[hanging[0]]
    assert target.client.latest(topic, [0], 1)[0] == start  # the LSO waits for it

    tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", target.bootstrap,
         "abort", "--topic", topic, "--partition", "0", "--start-offset", str(start))

    high_watermark = target.client.latest(topic, [0], 0)[0]
    assert high_watermark == sent[hanging[-1]] + 2  # the hanging records, then the ABORT marker
    assert target.client.latest(topic, [0], 1)[0] == high_watermark
    seen = [(v, o) for _, o, v in consume_isolated(target.bootstrap, topic, 1, "read_committed",
                                                   timeout=20)]
    assert seen == [(v, sent[v]) for v in committed]
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        [state] = admin.describe_producers([KpTP(topic, 0)])[KpTP(topic, 0)].active_producers
    finally:
        admin.close()
    assert state.current_transaction_start_offset == -1
    del p  # abandoned, never ending its transaction: the hanging producer of the story
