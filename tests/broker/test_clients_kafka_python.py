"""kafka-python 3 against the real broker, with no special settings.

kafka-python 3 defaults to an idempotent producer with acks=all (InitProducerId, then
sequence-numbered batches), negotiates API versions up to ListOffsets v11 / Fetch v12,
and reports "no record at or after T" as None. Only gzip is tested for it: snappy, lz4
and zstd need optional packages (python-snappy, lz4, zstandard) that are not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

import tests.helpers.client_scenarios as scenarios
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import Rec, for_kafka_python, running_broker, topic_name

TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, "kafka-python") as b:
        yield b


def produce(b: BrokerProcess, topic: str, recs: list[Rec], partition: int = 0, **conf: Any) -> list[int]:
    p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=20, **conf)
    try:
        futures = [
            p.send(topic, value=r.value, key=r.key, partition=partition,
                   headers=list(r.headers), timestamp_ms=r.timestamp)
            for r in recs
        ]
        p.flush(TIMEOUT_MS / 1000)
        return [f.get(TIMEOUT_MS / 1000).offset for f in futures]
    finally:
        p.close()


def consumer(b: BrokerProcess, **conf: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=b.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50,
        request_timeout_ms=TIMEOUT_MS + 5000, **conf,
    )


def polled(c: KafkaConsumer) -> list[Any]:
    return [m for batch in c.poll(timeout_ms=300).values() for m in batch]


class KafkaPython(scenarios.Client):
    """kafka-python as the shared scenarios' Client."""

    records = staticmethod(scenarios.kafka_python_records)

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
        try:
            admin.create_topics(
                [NewTopic(name, num_partitions=partitions, replication_factor=1, topic_configs=config or {})]
            )
        finally:
            admin.close()

    def produce(self, topic: str, recs: list[Rec], partition: int = 0,
                compression: str | None = None, **conf: Any) -> list[int]:
        return produce(self.broker, topic, recs, partition, compression_type=compression, **conf)

    def consume(self, topic: str, start: int, n: int, partition: int = 0) -> list[scenarios.Got]:
        c = consumer(self.broker)
        try:
            tp = TopicPartition(topic, partition)
            c.assign([tp])
            c.seek(tp, start)
            msgs = scenarios.collect(n, lambda _: polled(c), TIMEOUT_MS / 1000)
        finally:
            c.close()
        return [scenarios.from_kafka_python(m) for m in msgs]

    def offsets_for_times(self, topic: str, times: list[int],
                          partition: int = 0) -> dict[int, scenarios.Found | None]:
        c = consumer(self.broker)
        try:
            tp = TopicPartition(topic, partition)
            out: dict[int, scenarios.Found | None] = {}
            for t in times:
                got = c.offsets_for_times({tp: t}, timeout_ms=TIMEOUT_MS)[tp]
                out[t] = None if got is None else scenarios.Found(got.offset, got.timestamp)
            return out
        finally:
            c.close()


@pytest.fixture(scope="module")
def client(kb: BrokerProcess) -> KafkaPython:
    return KafkaPython(kb)


def test_admin_creates_topics_and_refuses_duplicates(client: KafkaPython) -> None:
    name = topic_name("adm")
    client.create_topic(name, partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    c = consumer(client.broker)
    try:
        assert c.partitions_for_topic(name) == {0, 1}
    finally:
        c.close()
    with pytest.raises(TopicAlreadyExistsError):
        client.create_topic(name)


@pytest.mark.parametrize("compression", (None, "gzip"))
def test_every_acks_setting_round_trips_byte_exact(client: KafkaPython, compression: str | None) -> None:
    confs: list[dict[str, Any]] = [
        {},  # kafka-python 3 default: idempotent, acks=all
        {"acks": 0}, {"acks": 1}, {"acks": "all", "enable_idempotence": False},
    ]
    scenarios.every_acks_setting_round_trips(client, compression, confs, 40)


TestLookupsAndRecords = scenarios.lookup_and_record_tests((5, 3), for_kafka_python, lookups=False)


def test_log_append_time_topic_and_lookups_after_restart(client: KafkaPython) -> None:
    scenarios.log_append_time_stamps_and_lookups(client, 25, 10, restart=True)


def test_beginning_and_end_offsets_in_both_isolation_levels(kb: BrokerProcess, client: KafkaPython) -> None:
    topic = scenarios.filled_topic(client, "wm", 9, partitions=2, partition=1)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    for isolation in ("read_uncommitted", "read_committed"):
        c = consumer(kb, isolation_level=isolation)
        try:
            assert c.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
            assert c.end_offsets(tps) == {tps[0]: 0, tps[1]: 9}
        finally:
            c.close()


def test_committed_offsets_round_trip_with_metadata(kb: BrokerProcess, client: KafkaPython) -> None:
    topic = scenarios.filled_topic(client, "co", 10)
    group = topic_name("group")
    tp = TopicPartition(topic, 0)
    c = consumer(kb, group_id=group)
    try:
        c.assign([tp])
        assert c.committed(tp) is None
        c.commit({tp: OffsetAndMetadata(6, "why not", -1)})
        got = c.committed(tp, metadata=True)
        assert (got.offset, got.metadata) == (6, "why not")
    finally:
        c.close()
    kb.restart()
    c = consumer(kb, group_id=group, auto_offset_reset="earliest")
    try:
        c.assign([tp])
        msgs = scenarios.collect(4, lambda _: polled(c), TIMEOUT_MS / 1000)
        assert [m.offset for m in msgs] == [6, 7, 8, 9]
    finally:
        c.close()


def test_transactional_producer_commits_and_aborts(kb: BrokerProcess) -> None:
    p = KafkaProducer(bootstrap_servers=kb.bootstrap, transactional_id="tx-kp")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("tx-kp", b"kept")
        p.commit_transaction()
        p.begin_transaction()
        p.send("tx-kp", b"dropped")
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=5)
    c = KafkaConsumer(bootstrap_servers=kb.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        c.assign([TopicPartition("tx-kp", 0)])
        assert [m.value for m in c] == [b"kept"]
    finally:
        c.close()
