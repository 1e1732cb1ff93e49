"""CreateTopics, DeleteTopics and Metadata over raw sockets, version by version."""

from __future__ import annotations

from typing import Any

from tests.helpers.kafka_socket import KafkaSocket, create_topics, metadata, produce_frame


def topic_errors(md: Any) -> dict[str, int]:
    return {t.name: t.error_code for t in md.topics}


def test_create_topics_answers_per_topic_with_kafkas_codes(broker_factory: Any) -> None:
    b = broker_factory(overrides={"num.partitions": "3"})
    raw = KafkaSocket(b.port)
    got = create_topics(raw, 7, [
        {"name": "ok", "num_partitions": 2, "configs": {"retention.ms": "1000",
                                                          "message.timestamp.type": "LogAppendTime"}},
        {"name": "defaults", "num_partitions": -1, "replication_factor": -1},
        {"name": "rf2", "replication_factor": 2},
        {"name": "badname!"},
        {"name": "zero", "num_partitions": 0},
        {"name": "badcfg", "configs": {"no.such.config": "1"}},
        {"name": "badval", "configs": {"segment.bytes": "tiny"}},
        {"name": "twice"}, {"name": "twice"},
        {"name": "assigned", "num_partitions": -1, "replication_factor": -1,
         "assignments": [{"partition_index": 1, "broker_ids": [0]},
                         {"partition_index": 0, "broker_ids": [0]}]},
        {"name": "elsewhere", "num_partitions": -1, "replication_factor": -1,
         "assignments": [{"partition_index": 0, "broker_ids": [4]}]},
    ])
    by = {(t.name, i): t for i, t in enumerate(got)}
    codes = [t.error_code for t in got]
    assert codes == [0, 0, 38, 17, 37, 40, 40, 42, 42, 0, 39], codes
    ok = got[0]
    assert (ok.num_partitions, ok.replication_factor) == (2, 1)
    configs = {c.name: (c.value, c.config_source) for c in ok.configs}
    assert configs["retention.ms"] == ("1000", 1)
    assert configs["message.timestamp.type"] == ("LogAppendTime", 1)
    assert configs["segment.bytes"][1] == 5
    assert got[1].num_partitions == 3
    assert "no.such.config" in got[5].error_message
    assert "segment.bytes" in got[6].error_message
    assert got[9].num_partitions == 2
    assert by[("ok", 0)].error_message is None
    again = create_topics(raw, 7, [{"name": "ok"}])
    assert again[0].error_code == 36
    md = metadata(raw, 12, ["ok", "defaults", "assigned", "rf2"], auto=False)
    assert {t.name: len(t.partitions) for t in md.topics} == {"ok": 2, "defaults": 3, "assigned": 2,
                                                             "rf2": 0}
    assert topic_errors(md)["rf2"] == 3


def test_create_topics_versions_and_validate_only(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    for version in range(2, 8):
        got = create_topics(raw, version, [{"name": f"v{version}", "num_partitions": 2}])
        assert got[0].error_code == 0
    for version in range(2, 8):  # -1 = broker default in every version, as Kafka's broker
        got = create_topics(raw, version, [{"name": f"dflt{version}", "num_partitions": -1,
                                     "replication_factor": -1}])
        assert (got[0].error_code, got[0].name) == (0, f"dflt{version}")
        md = metadata(raw, 12, [f"dflt{version}"], auto=False)
        assert len(md.topics[0].partitions) == 1  # num.partitions default
    checked = create_topics(raw, 7, [{"name": "dry", "num_partitions": 4}], validate_only=True)
    assert checked[0].error_code == 0 and checked[0].num_partitions == 4
    assert topic_errors(metadata(raw, 12, ["dry"], auto=False))["dry"] == 3


def test_metadata_topic_lists_by_version(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topics(raw, 7, [{"name": "a"}, {"name": "b", "num_partitions": 3}])
    assert sorted(t.name for t in metadata(raw, 0, []).topics) == ["a", "b"]  # v0: empty = all
    assert sorted(t.name for t in metadata(raw, 1, None).topics) == ["a", "b"]  # v1+: null = all
    assert metadata(raw, 1, []).topics == []  # v1+: empty = none
    md = metadata(raw, 12, ["b"])
    assert md.controller_id == 0
    assert [(br.node_id, br.host, br.port) for br in md.brokers] == [(0, "127.0.0.1", broker.port)]
    part = md.topics[0].partitions
    assert [(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) for p in part] \
        == [(i, 0, [0], [0]) for i in range(3)]
    assert md.topics[0].topic_id != bytes(16)  # a real id from v10 (tests/broker/test_topic_ids.py)
    cluster = md.cluster_id
    assert cluster
    broker.restart()
    assert metadata(KafkaSocket(broker.port), 12, ["b"]).cluster_id == cluster


def test_metadata_auto_creates_only_when_allowed(broker_factory: Any) -> None:
    b = broker_factory()
    raw = KafkaSocket(b.port)
    assert topic_errors(metadata(raw, 4, ["x"], auto=False))["x"] == 3
    assert topic_errors(metadata(raw, 4, ["x"], auto=True))["x"] == 0
    assert topic_errors(metadata(raw, 1, ["y"]))["y"] == 0  # before v4: broker setting decides
    assert topic_errors(metadata(raw, 9, ["no/slash"]))["no/slash"] == 17
    off = broker_factory(overrides={"auto.create.topics.enable": "false"})
    assert topic_errors(metadata(KafkaSocket(off.port), 1, ["z"]))["z"] == 3


def test_delete_topics_removes_logs_and_a_recreated_topic_starts_empty(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topics(raw, 7, [{"name": "gone", "num_partitions": 2}])
    cid, frame = produce_frame(raw, "gone", [b"a", b"b"])
    raw.send(frame)
    raw.read()
    assert (broker.data_dir / "gone-0").exists()
    resp = raw.request(20, 6, {"topics": [{"name": "gone", "topic_id": bytes(16)},
                                       {"name": None, "topic_id": b"\x01" * 16},
                                       {"name": "never", "topic_id": bytes(16)}],
                            "timeout_ms": 5000})
    assert [r.error_code for r in resp.responses] == [0, 100, 3]
    assert not (broker.data_dir / "gone-0").exists()
    assert topic_errors(metadata(raw, 12, ["gone"], auto=False))["gone"] == 3
    for version in range(1, 6):
        create_topics(raw, 7, [{"name": f"d{version}"}])
        old = raw.request(20, version, {"topic_names": [f"d{version}"], "timeout_ms": 5000})
        assert old.responses[0].error_code == 0
    create_topics(raw, 7, [{"name": "gone"}])
    cid, frame = produce_frame(raw, "gone", [b"new"])
    raw.send(frame)
    assert raw.read()[1].responses[0].partition_responses[0].base_offset == 0
    broker.restart()
    raw = KafkaSocket(broker.port)
    assert sorted(t.name for t in metadata(raw, 12, None).topics) == ["gone"]


def test_delete_topics_disabled(broker_factory: Any) -> None:
    b = broker_factory(overrides={"delete.topic.enable": "false"})
    raw = KafkaSocket(b.port)
    create_topics(raw, 7, [{"name": "stay"}])
    resp = raw.request(20, 4, {"topic_names": ["stay"], "timeout_ms": 5000})
    assert resp.responses[0].error_code == 73
