"""KIP-848 over raw sockets against a real broker: errors, group types, durability after kill -9."""

from __future__ import annotations

from typing import Any

from tests.helpers.kafka_socket import KafkaSocket, create_topics, metadata

FAST = {"group.consumer.session.timeout.ms": "2000", "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.heartbeat.interval.ms": "200", "group.consumer.min.heartbeat.interval.ms": "100"}


def heartbeat(raw: KafkaSocket, group: str, member: str, epoch: int, owned: list[Any] | None = None,
              **kw: Any) -> Any:
    body = {"group_id": group, "member_id": member, "member_epoch": epoch,
            "rebalance_timeout_ms": kw.pop("rebalance_timeout_ms", 5000 if epoch == 0 else -1),
            "subscribed_topic_names": kw.pop("topics", ["t"] if epoch == 0 else None),
            "topic_partitions": owned if owned is not None else ([] if epoch == 0 else None), **kw}
    return raw.request(68, 1, body)


def commit(raw: KafkaSocket, version: int, group: str, member: str, epoch: int) -> int:
    resp = raw.request(8, version, {"group_id": group, "generation_id_or_member_epoch": epoch,
                                 "member_id": member, "topics": [
                                     {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                   "committed_metadata": ""}]}]})
    return int(resp.topics[0].partitions[0].error_code)


def test_join_answers_topic_ids_and_errors_carry_kafkas_codes(broker_factory: Any) -> None:
    b = broker_factory(overrides=FAST)
    raw = KafkaSocket(b.port)
    create_topics(raw, 7, [{"name": "t", "num_partitions": 2}])
    topic_id = bytes(metadata(raw, 12, ["t"]).topics[0].topic_id)
    r = heartbeat(raw, "g", "m1", 0)
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "m1", 1, 200)
    assert [(bytes(t.topic_id), list(t.partitions)) for t in r.assignment.topic_partitions] == [(topic_id, [0, 1])]
    assert heartbeat(raw, "g", "m1", 5, []).error_code == 110  # FENCED_MEMBER_EPOCH
    assert heartbeat(raw, "g", "nobody", 1, []).error_code == 25
    assert heartbeat(raw, "missing", "m1", 1, []).error_code == 69
    assert heartbeat(raw, "g", "m2", 0, server_assignor="sticky").error_code == 112
    assert heartbeat(raw, "g", "m2", 0, rebalance_timeout_ms=-1).error_code == 42
    assert heartbeat(raw, "g", "", 0).error_code == 42  # v1: the client makes its member id
    assert heartbeat(raw, "", "m2", 0).error_code == 42
    assert heartbeat(raw, "g", "m2", 0, subscribed_topic_regex="(").error_code == 128
    # commits: v9 with the member epoch, stale epoch 113, before v9 35
    assert commit(raw, 9, "g", "m1", 1) == 0
    assert commit(raw, 9, "g", "m1", 0) == 113
    assert commit(raw, 8, "g", "m1", 1) == 35
    # a classic JoinGroup to a consumer group: INCONSISTENT_GROUP_PROTOCOL
    join = raw.request(11, 5, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": b""}]})
    assert join.error_code == 23
    # ConsumerGroupDescribe of a classic group: GROUP_ID_NOT_FOUND
    raw.request(11, 5, {"group_id": "classic", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                     "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                     "protocols": [{"name": "range", "metadata": b""}]})
    d = raw.request(69, 0, {"group_ids": ["classic", "g", ""], "include_authorized_operations": False})
    assert [x.error_code for x in d.groups] == [69, 0, 24]
    assert d.groups[1].members[0].member_type == -1  # v0 has no MemberType: the default
    left = heartbeat(raw, "g", "m1", -1)
    assert (left.error_code, left.member_epoch) == (0, -1)


def test_group_state_survives_kill_9(broker_factory: Any) -> None:
    b = broker_factory(overrides=FAST)
    raw = KafkaSocket(b.port)
    create_topics(raw, 7, [{"name": "t", "num_partitions": 3}])
    r = heartbeat(raw, "g", "m1", 0)
    owned = [{"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in r.assignment.topic_partitions]
    b.kill()
    b.start()
    raw = KafkaSocket(b.port)
    again = heartbeat(raw, "g", "m1", r.member_epoch, owned)  # no 69, no 25: the member is known
    assert (again.error_code, again.member_epoch) == (0, r.member_epoch)
    d = raw.request(69, 1, {"group_ids": ["g"], "include_authorized_operations": False}).groups[0]
    assert (d.group_epoch, d.assignment_epoch, d.group_state) == (1, 1, "Stable")
    assert [list(t.partitions) for t in d.members[0].assignment.topic_partitions] == [[0, 1, 2]]


def test_a_silent_member_expires_without_anyone_heartbeating(broker_factory: Any) -> None:
    import time

    b = broker_factory(overrides=FAST)
    raw = KafkaSocket(b.port)
    create_topics(raw, 7, [{"name": "t"}])
    joined = time.monotonic()
    heartbeat(raw, "g", "m1", 0)
    # The session (2 s) ends on the coordinator's own timer: nobody sends anything to the
    # group meanwhile (ListGroups does not touch it). Polled, as the timer fires late on
    # a loaded machine.
    while True:
        listed = raw.request(16, 5, {"states_filter": ["empty"], "types_filter": []})
        if [(x.group_id, x.group_type) for x in listed.groups] == [("g", "consumer")]:
            break
        assert time.monotonic() - joined < 20, "the silent member never expired"
        time.sleep(0.1)
    assert time.monotonic() - joined >= 1.95  # not before its session ran out
