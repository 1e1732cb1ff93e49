"""Kafka's own CLI tools, run as Kafka ships them (``java -cp … <main class>``), against Chronolog.

Each tool's answer is compared with what Chronolog's own client says about the
same topic (the oracle), never with hard-coded numbers. The same tests run
against the real Apache Kafka node too (under ``make test-ecosystem``), which
checks both the tools' parsing here and that the two brokers answer alike.
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
