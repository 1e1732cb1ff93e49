"""Topic ids over the wire: CreateTopics v7, Metadata v10+ (and by id in v12), DeleteTopics v6."""

from __future__ import annotations

from typing import Any

from storage.partition_metadata import new_topic_id, read_topic_id
from tests.helpers.kafka_socket import KafkaSocket, create_topics, metadata


def by_id(raw: KafkaSocket, ids: list[bytes], version: int = 12) -> Any:
    return raw.request(3, version, {"topics": [{"name": None, "topic_id": i} for i in ids],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})


def test_created_topics_have_distinct_ids_that_metadata_and_the_files_agree_on(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    made = create_topics(raw, 7, [{"name": "a", "num_partitions": 3}, {"name": "b"}])
    ids = {t.name: bytes(t.topic_id) for t in made}
    assert bytes(16) not in ids.values() and len(set(ids.values())) == 2
    md = metadata(raw, 10, ["a", "b"])
    assert {t.name: bytes(t.topic_id) for t in md.topics} == ids
    assert {read_topic_id(broker.data_dir / f"a-{p}") for p in range(3)} == {ids["a"]}


def test_ids_survive_restart_and_kill(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topics(raw, 7, [{"name": "keep", "num_partitions": 2}])
    before = bytes(metadata(raw, 12, ["keep"]).topics[0].topic_id)
    broker.restart()
    assert bytes(metadata(KafkaSocket(broker.port), 12, ["keep"]).topics[0].topic_id) == before
    broker.kill()
    broker.start()
    assert bytes(metadata(KafkaSocket(broker.port), 12, None).topics[0].topic_id) == before


def test_metadata_v12_looks_topics_up_by_id(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topics(raw, 7, [{"name": "x", "num_partitions": 2}, {"name": "y"}])
    ids = {t.name: bytes(t.topic_id) for t in metadata(raw, 12, ["x", "y"]).topics}
    unknown = new_topic_id()
    md = by_id(raw, [ids["y"], unknown, ids["x"]])
    got = [(t.error_code, t.name, bytes(t.topic_id), len(t.partitions)) for t in md.topics]
    assert got == [(0, "y", ids["y"], 1), (100, None, unknown, 0), (0, "x", ids["x"], 2)]


def test_metadata_v10_and_v11_refuse_a_lookup_by_id_with_invalid_request(broker: Any) -> None:
    """Found by the live fuzzer: v10-11 let a request carry a null name, but their answer
    cannot (the name is nullable from v12); the broker failed to encode it."""
    raw = KafkaSocket(broker.port)
    create_topics(raw, 7, [{"name": "z"}])
    zid = bytes(metadata(raw, 12, ["z"]).topics[0].topic_id)
    for version in (10, 11):
        md = by_id(raw, [zid], version)
        assert [(t.error_code, t.name) for t in md.topics] == [(42, "")]
    assert "Traceback" not in broker.log()


def test_delete_topics_v6_by_id_and_a_recreated_topic_gets_a_new_id(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    old = bytes(create_topics(raw, 7, [{"name": "gone"}])[0].topic_id)
    resp = raw.request(20, 6, {"topics": [{"name": None, "topic_id": old},
                                       {"name": None, "topic_id": old}], "timeout_ms": 5000})
    assert [(r.error_code, r.name) for r in resp.responses] == [(0, "gone"), (100, None)]
    assert by_id(raw, [old]).topics[0].error_code == 100
    new = bytes(create_topics(raw, 7, [{"name": "gone"}])[0].topic_id)
    assert new not in (old, bytes(16))


def test_librdkafka_describe_topics_reports_the_topic_id(broker: Any) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("seen", 2, 1)])["seen"].result(10)
    expected = bytes(metadata(KafkaSocket(broker.port), 12, ["seen"]).topics[0].topic_id)
    desc = admin.describe_topics(TopicCollection(["seen"]))["seen"].result(10)
    got = desc.topic_id
    assert (got.get_most_significant_bits(), got.get_least_significant_bits()) == (
        int.from_bytes(expected[:8], "big", signed=True), int.from_bytes(expected[8:], "big", signed=True))
    assert len(desc.partitions) == 2
