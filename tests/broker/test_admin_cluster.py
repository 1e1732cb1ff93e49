"""The rest of the admin surface, from real clients: DescribeCluster, DescribeLogDirs,
OffsetForLeaderEpoch, DescribeTopicPartitions (KIP-966), DescribeProducers, ElectLeaders,
Alter/ListPartitionReassignments.

Which clients: each API from at least two of confluent-kafka (librdkafka), kafka-python,
aiokafka and the bundled client, whichever of them sends that API (librdkafka describes
clusters and topics through Metadata, so it is used where it sends the API itself:
ElectLeaders, and OffsetForLeaderEpoch from a consumer, counted on /metrics).
Expectations come from the broker's other answers (Metadata's cluster id), from the
files on disk (log sizes) or from what the test produced, never from literals of ours.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
from confluent_kafka import Consumer, ElectionType, Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import NewTopic
from kafka import KafkaProducer
from kafka import TopicPartition as KpTP
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest

from client import admin
from client.aio import Client, ProducerRecord
from tests.broker.admin_common import Shared, admin_broker
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.kafka_socket import KafkaSocket

TIMEOUT = 15.0


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    mport = free_port_number()
    with admin_broker(tmp_path_factory, "admin-cluster", {"metrics.listener": f"127.0.0.1:{mport}"}) as brokers:
        b, ck, _ = brokers
        b.metrics_port = mport  # type: ignore[attr-defined]
        fs = ck.create_topics([NewTopic("alpha", 3, 1), NewTopic("beta", 2, 1), NewTopic("gamma", 1, 1)])
        for f in fs.values():
            f.result(TIMEOUT)
        yield brokers


def produce(b: BrokerProcess, topic: str, partition: int, n: int) -> list[int]:
    async def go() -> list[int]:
        async with await Client.connect(b.bootstrap) as c:
            return await c.produce(topic, [ProducerRecord(value=b"x" * 100) for _ in range(n)],
                                   partition=partition)
    return asyncio.run(go())


def requests_served(b: BrokerProcess, api: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics").read().decode()  # type: ignore[attr-defined]
    for line in text.splitlines():
        if line.startswith(f'chronolog_requests_total{{api="{api}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_describe_cluster_is_this_broker_as_its_own_controller(
        shared: Shared) -> None:
    b, ck, kp = shared
    cluster_id = ck.list_topics(timeout=TIMEOUT).cluster_id  # Metadata's answer
    got = kp.describe_cluster()
    assert got["cluster_id"] == cluster_id and got["controller_id"] == 0
    assert [(x["broker_id"], x["host"], x["port"]) for x in got["brokers"]] == [(0, "127.0.0.1", b.port)]
    assert "ALTER_CONFIGS" in got["authorized_operations"]  # no authorizer: everything allowed

    async def ours() -> dict[str, Any]:
        async with await Client.connect(b.bootstrap) as c:
            return await admin.describe_cluster(c)
    assert asyncio.run(ours()) == {"cluster_id": cluster_id, "controller_id": 0,
                                   "brokers": [{"id": 0, "host": "127.0.0.1", "port": b.port}]}
    raw = KafkaSocket(b.port)
    try:
        for etype, code in [(2, 114), (7, 115)]:
            resp = raw.request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": etype})
            assert resp.error_code == code and resp.brokers == []
        resp = raw.request(60, 0, {"include_cluster_authorized_operations": False})
        assert resp.cluster_authorized_operations == -2147483648  # not asked for
    finally:
        raw.close()


def _sizes_on_disk(data: Path) -> dict[tuple[str, int], int]:
    out = {}
    for d in data.iterdir():
        name, _, part = d.name.rpartition("-")
        if d.is_dir() and part.isdigit() and not name.startswith("__"):
            out[(name, int(part))] = sum(f.stat().st_size for f in d.glob("*.log"))
    return out


def test_describe_log_dirs_gives_each_partitions_bytes_on_disk(
        shared: Shared) -> None:
    b, _, kp = shared
    produce(b, "alpha", 1, 37)
    produce(b, "beta", 0, 5)
    disk = _sizes_on_disk(b.data_dir)
    assert disk[("alpha", 1)] > 0
    (entry,) = kp.describe_log_dirs()[0]["log_dirs"]
    assert entry["log_dir"] == str(b.data_dir.resolve())
    assert entry["total_bytes"] > 0 and 0 <= entry["usable_bytes"] <= entry["total_bytes"]
    got = {(t["name"], p["partition_index"]): p["partition_size"]
           for t in entry["topics"] for p in t["partitions"]}
    assert got == disk

    async def ours() -> dict[tuple[str, int], int]:
        async with await Client.connect(b.bootstrap) as c:
            return await admin.describe_log_dirs(c, "alpha")
    assert asyncio.run(ours()) == {k: v for k, v in disk.items() if k[0] == "alpha"}
    only = kp.describe_log_dirs({"beta": [1, 7], "nowhere": [0]})[0]["log_dirs"][0]["topics"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only] == [("beta", [1])]


def test_offset_for_leader_epoch_answers_epoch_zero_up_to_the_log_end(
        shared: Shared) -> None:
    b, _, kp = shared
    offsets = produce(b, "gamma", 0, 12)
    leo = offsets[-1] + 1
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Part = Topic.OffsetForLeaderPartition

    def ask(topic: str, partition: int, epoch: int, current: int = -1) -> tuple[int, int, int]:
        req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[Topic(topic=topic, partitions=[
            Part(partition=partition, current_leader_epoch=current, leader_epoch=epoch)])])
        resp = kp._manager.run(kp._manager.send, req, 0)
        (p,) = resp.topics[0].partitions
        return p.error_code, p.leader_epoch, p.end_offset

    assert ask("gamma", 0, 0) == (0, 0, leo)
    assert ask("gamma", 0, 0, current=0) == (0, 0, leo)
    assert ask("beta", 1, 0) == (0, 0, 0)                  # an empty log: (0, 0), as Kafka seeds it
    assert ask("gamma", 0, 3) == (0, -1, -1)               # an epoch we never had
    assert ask("gamma", 0, 0, current=4) == (75, -1, -1)   # UNKNOWN_LEADER_EPOCH
    assert ask("gamma", 0, 0, current=-3) == (74, -1, -1)  # FENCED_LEADER_EPOCH
    assert ask("nowhere", 0, 0) == (3, -1, -1)
    # librdkafka validates a position that carries a leader epoch with this API, and
    # keeps consuming from that position when the answer says nothing was truncated.
    before = requests_served(b, "OffsetForLeaderEpoch")
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "olde", "enable.auto.commit": False})
    c.assign([CkTP("gamma", 0, 0)])
    first = None
    deadline = time.monotonic() + TIMEOUT
    while first is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        first = m if m is not None and m.error() is None else None
    assert first is not None and first.leader_epoch() == 0
    c.seek(CkTP("gamma", 0, 7, leader_epoch=0))
    got = None
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        got = m if m is not None and m.error() is None else None
    c.close()
    assert got is not None and got.offset() == 7
    assert requests_served(b, "OffsetForLeaderEpoch") > before


def test_describe_topic_partitions_pages_through_every_partition_in_name_order(
        shared: Shared) -> None:
    b, ck, kp = shared
    md = ck.list_topics(timeout=TIMEOUT)
    oracle = [(t, p) for t in sorted(md.topics) for p in sorted(md.topics[t].partitions)]
    for limit in (1, 2, 4, 2000):
        seen: list[tuple[str, int]] = []
        cursor = None
        for _ in range(20):
            resp = kp.describe_topic_partitions([], response_partition_limit=limit, cursor=cursor)
            for t in resp["topics"]:
                assert t["error_code"] == 0
                seen += [(t["name"], p["partition_index"]) for p in t["partitions"]]
                assert all(p["leader_id"] == 0 and p["isr_nodes"] == [0] for p in t["partitions"])
            cursor = resp["next_cursor"]
            if cursor is None:
                break
        assert seen == oracle, limit
    named = kp.describe_topic_partitions(["gamma", "nowhere", "alpha"])
    assert [(t["name"], t["error_code"], len(t["partitions"])) for t in named["topics"]] == \
        [("alpha", 0, 3), ("gamma", 0, 1), ("nowhere", 3, 0)]
    raw = KafkaSocket(b.port)
    try:
        for cursor in ({"topic_name": "beta", "partition_index": 0}, {"topic_name": "alpha", "partition_index": -1}):
            resp = raw.request(75, 0, {"topics": [{"name": "alpha"}], "response_partition_limit": 10,
                                    "cursor": cursor})
            assert [t.error_code for t in resp.topics] == [42]
        resp = raw.request(75, 0, {"topics": [{"name": "alpha"}], "response_partition_limit": 2,
                                "cursor": {"topic_name": "alpha", "partition_index": 1}})
        assert [p.partition_index for p in resp.topics[0].partitions] == [1, 2]
        assert resp.next_cursor is None
    finally:
        raw.close()


def test_describe_producers_lists_the_idempotent_producers_of_a_partition(
        shared: Shared) -> None:
    b, ck, kp = shared
    ck.create_topics([NewTopic("idem", 2, 1)])["idem"].result(TIMEOUT)
    kprod = KafkaProducer(bootstrap_servers=b.bootstrap, enable_idempotence=True)
    for _ in range(5):
        kprod.send("idem", b"kp", partition=0)
    kprod.flush()
    kprod.close()
    cprod = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
    for _ in range(3):
        cprod.produce("idem", b"ck", partition=0)
    assert cprod.flush(TIMEOUT) == 0
    got = kp.describe_producers([KpTP("idem", 0), KpTP("idem", 1)])
    states = got[KpTP("idem", 0)].active_producers
    assert sorted(s.last_sequence for s in states) == [2, 4]  # 3 and 5 records, sequences from 0
    assert all(s.producer_epoch == 0 and s.current_transaction_start_offset == -1 for s in states)
    assert got[KpTP("idem", 1)].active_producers == []
    raw = KafkaSocket(b.port)
    try:
        resp = raw.request(61, 0, {"topics": [{"name": "idem", "partition_indexes": [0, 5]}]})
        (t,) = resp.topics
        assert sorted(p.producer_id for p in t.partitions[0].active_producers) == \
            sorted(s.producer_id for s in states)
        assert t.partitions[1].error_code == 3
    finally:
        raw.close()
    # records deleted below every batch of a producer leave its state, as in Kafka since
    # KIP-360 (kept until producer.id.expiration.ms; tests/broker/test_kafka_parity.py)
    assert kp.delete_records({KpTP("idem", 0): -1})[KpTP("idem", 0)]["error_code"] == 0
    kept = kp.describe_producers([KpTP("idem", 0)])[KpTP("idem", 0)].active_producers
    assert sorted((s.producer_id, s.last_sequence) for s in kept) == \
        sorted((s.producer_id, s.last_sequence) for s in states)


def test_elect_leaders_is_never_needed_on_one_node(
        shared: Shared) -> None:
    _, ck, kp = shared
    tp = CkTP("alpha", 1)
    result = ck.elect_leaders(ElectionType.PREFERRED, [tp]).result(TIMEOUT)
    assert result[tp].code() == 84  # ELECTION_NOT_NEEDED, as Kafka answers for the leader in place
    resp = kp.elect_leaders(0, {"alpha": [0], "nowhere": [0]}, raise_errors=False)
    codes = {(r.topic, p.partition_id): p.error_code
             for r in resp.replica_election_results for p in r.partition_result}
    assert codes == {("alpha", 0): 84, ("nowhere", 0): 3}
    # None = every partition: the broker omits them all, none needs an election
    raw = KafkaSocket(shared[0].port)
    try:
        resp = raw.request(43, 2, {"election_type": 1, "topic_partitions": None, "timeout_ms": 1000})
    finally:
        raw.close()
    assert resp.error_code == 0 and resp.replica_election_results == []


def test_partition_reassignments_keep_the_only_replica_and_list_nothing(
        shared: Shared) -> None:
    b, _, kp = shared
    got = kp.alter_partition_reassignments({KpTP("beta", 0): [0], KpTP("beta", 1): [1],
                                            KpTP("gamma", 0): None, KpTP("nowhere", 0): [0]})
    codes = {tp: (None if e is None else e.errno) for tp, e in got.items()}
    assert codes == {KpTP("beta", 0): None, KpTP("beta", 1): 39, KpTP("gamma", 0): 85,
                     KpTP("nowhere", 0): 3}
    assert kp.list_partition_reassignments() == {}
    assert kp.list_partition_reassignments({"beta": [0, 1]}) == {}

    async def aiokafka_side() -> tuple[Any, Any]:
        a = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap)
        await a.start()
        try:
            alter = await a._send_request_to_node(0, AlterPartitionReassignmentsRequest(
                timeout_ms=5000, topics=[("beta", [(0, [0], {}), (1, [0, 0], {})], {})], tags={}))
            listed = await a._send_request_to_node(0, ListPartitionReassignmentsRequest(
                timeout_ms=5000, topics=None, tags={}))
            return alter, listed
        finally:
            await a.close()

    alter, listed = asyncio.run(aiokafka_side())
    assert alter.error_code == 0
    assert [(p[0], p[1]) for t in alter.responses for p in t[1]] == [(0, 0), (1, 39)]
    assert listed.error_code == 0 and listed.topics == []
