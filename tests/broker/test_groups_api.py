"""The group APIs over real sockets against the real broker: Kafka's error codes for bad
input, the tools' APIs (Describe/List/Delete groups, OffsetDelete), JoinGroup v0's
rebalance timeout, and group state surviving restarts (groups-facts §1.4, §6).
"""

from __future__ import annotations

import select
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.api import encode_request
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import bring_back, running_broker
from tests.helpers.kafka_socket import KafkaSocket
from tests.helpers.wait import wait_until

NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE = 0, 3, 12
ILLEGAL_GENERATION, INCONSISTENT, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID = 22, 23, 24, 25
INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS = 26, 27
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED = 68, 69, 79, 81
GROUP_SUBSCRIBED_TO_TOPIC = 86
DELAY_MS = 100
MAX_SIZE = 20

OVERRIDES = {
    "group.initial.rebalance.delay.ms": str(DELAY_MS),
    "group.min.session.timeout.ms": "100",
    "group.max.session.timeout.ms": "60000",
    "group.max.size": str(MAX_SIZE),
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, "groups-api", OVERRIDES) as b:
        with KafkaSocket(b.port) as c:
            for name, n in (("gt", 3), ("other", 2)):
                c.request(19, 5, {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1,
                                              "assignments": [], "configs": []}], "timeout_ms": 5000})
        yield b


def subscription(topics: list[str]) -> bytes:
    """A ConsumerProtocolSubscription v0 (what Java/librdkafka consumers put in JoinGroup)."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


class Member:
    """One raw member on its own connection, so a parked JoinGroup blocks only it."""

    def __init__(self, b: BrokerProcess, group: str, *, session: int = 5000, topics: list[str] | None = None,
                 protocol_type: str = "consumer") -> None:
        self.conn = KafkaSocket(b.port, client_id="raw-member")
        self.group = group
        self.session = session
        self.meta = subscription(topics or ["gt"])
        self.protocol_type = protocol_type
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.members: list[Any] = []
        self._sent: int | None = None  # the correlation id of the request awaiting its answer

    def send_join(self, version: int = 5, rebalance: int = 10_000) -> None:
        body = {"group_id": self.group, "session_timeout_ms": self.session,
                "rebalance_timeout_ms": rebalance, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": self.protocol_type,
                "protocols": [{"name": "range", "metadata": self.meta}], "reason": None}
        self._send(11, version, body)

    def _send(self, key: int, version: int, body: dict[str, Any]) -> None:
        self._sent, frame = self.conn.frame(key, version, body)
        self.conn.send(frame)

    def ready(self, timeout: float = 0.0) -> bool:
        return bool(select.select([self.conn.sock], [], [], timeout)[0])

    def receive(self) -> Any:
        assert self._sent is not None
        cid, resp = self.conn.read()
        assert cid == self._sent
        key, _ = self.conn.sent[cid]
        if key == 11 and resp.error_code in (NONE, MEMBER_ID_REQUIRED):
            self.member_id = resp.member_id
            if resp.error_code == NONE:
                self.generation, self.leader, self.members = resp.generation_id, resp.leader, resp.members
        return resp

    def join(self, version: int = 5) -> Any:
        """JoinGroup, through MEMBER_ID_REQUIRED if needed; returns the final answer."""
        self.send_join(version)
        resp = self.receive()
        if resp.error_code == MEMBER_ID_REQUIRED:
            self.send_join(version)
            resp = self.receive()
        return resp

    def send_sync(self, assignments: dict[str, bytes] | None = None, version: int = 3) -> None:
        self._send(14, version, {"group_id": self.group, "generation_id": self.generation,
                                 "member_id": self.member_id, "group_instance_id": None,
                                 "protocol_type": "consumer", "protocol_name": "range",
                                 "assignments": [{"member_id": m, "assignment": a}
                                                 for m, a in (assignments or {}).items()]})

    def heartbeat(self, version: int = 3) -> int:
        self._send(12, version, {"group_id": self.group, "generation_id": self.generation,
                                 "member_id": self.member_id, "group_instance_id": None})
        return int(self.receive().error_code)

    def leave(self) -> int:
        self._send(13, 1, {"group_id": self.group, "member_id": self.member_id})
        return int(self.receive().error_code)

    def commit(self, offsets: dict[tuple[str, int], int], version: int = 8, metadata: str = "") -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                               "committed_leader_epoch": -1, "committed_metadata": metadata})
        self._send(8, version, {"group_id": self.group, "generation_id_or_member_epoch": self.generation,
                                "member_id": self.member_id, "group_instance_id": None,
                                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        resp = self.receive()
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def close(self) -> None:
        self.conn.close()


def stable_group(b: BrokerProcess, group: str, n: int, **kw: Any) -> list[Member]:
    """n raw members joined and synced (the leader assigns each its member id as bytes)."""
    members = [Member(b, group, **kw) for _ in range(n)]
    for m in members:
        m.send_join()
        assert m.receive().error_code == MEMBER_ID_REQUIRED
        m.send_join()
    for m in members:
        assert m.receive().error_code == NONE
    leader = next(m for m in members if m.member_id == m.leader)
    for m in members:
        if m is not leader:
            m.send_sync()
    leader.send_sync({m.member_id: m.member_id.encode() for m in members})
    for m in members:
        resp = m.receive()
        assert (resp.error_code, resp.assignment) == (NONE, m.member_id.encode())
    return members


def request(b: BrokerProcess, key: int, version: int, body: dict[str, Any]) -> Any:
    with KafkaSocket(b.port) as c:
        return c.request(key, version, body)


def describe(b: BrokerProcess, group: str, version: int = 5) -> Any:
    return request(b, 15, version, {"groups": [group], "include_authorized_operations": True}).groups[0]


def fetch(b: BrokerProcess, group: str, version: int = 8) -> dict[tuple[str, int], int]:
    resp = request(b, 9, version, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                               "topics": None}], "require_stable": True})
    return {(t.name, p.partition_index): p.committed_offset for t in resp.groups[0].topics for p in t.partitions}


# ---- bad input: Kafka's error codes, nothing else breaks ----------------------------------------


def test_heartbeats_from_unknown_members_and_stale_generations_are_refused(shared: BrokerProcess) -> None:
    a, b = stable_group(shared, "hb", 2)
    assert a.heartbeat() == NONE
    ghost = Member(shared, "hb")
    ghost.member_id, ghost.generation = "ghost", a.generation
    assert ghost.heartbeat() == UNKNOWN_MEMBER_ID
    nowhere = Member(shared, "no-such-group")
    nowhere.member_id, nowhere.generation = "m", 1
    assert nowhere.heartbeat() == UNKNOWN_MEMBER_ID
    a.generation -= 1
    assert a.heartbeat() == ILLEGAL_GENERATION
    a.generation += 1
    assert a.heartbeat() == NONE and b.heartbeat() == NONE
    assert a.commit({("gt", 0): 5}) == {("gt", 0): NONE}
    a.generation -= 1
    assert a.commit({("gt", 0): 6}) == {("gt", 0): ILLEGAL_GENERATION}
    a.generation += 1
    assert a.commit({("gt", 9): 1, ("nope", 0): 1, ("gt", 1): 2}) == {
        ("gt", 9): UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION, ("gt", 1): NONE}
    assert a.commit({("gt", 2): 1}, metadata="x" * 4097) == {("gt", 2): OFFSET_METADATA_TOO_LARGE}
    assert fetch(shared, "hb") == {("gt", 0): 5, ("gt", 1): 2}
    for m in (a, b, ghost, nowhere):
        m.close()


def test_join_with_a_bad_protocol_type_session_timeout_or_group_id_is_refused(shared: BrokerProcess) -> None:
    (a,) = stable_group(shared, "proto", 1)
    other_type = Member(shared, "proto", protocol_type="connect")
    assert other_type.join().error_code == INCONSISTENT
    empty_type = Member(shared, "proto-new", protocol_type="")
    assert empty_type.join().error_code == INCONSISTENT
    short = Member(shared, "proto", session=50)
    assert short.join().error_code == INVALID_SESSION_TIMEOUT
    no_id = Member(shared, "")
    assert no_id.join().error_code == INVALID_GROUP_ID
    no_id.member_id, no_id.generation = "x", 1
    assert no_id.heartbeat() == INVALID_GROUP_ID
    late = Member(shared, "no-such-group-either")
    late.member_id = "made-up"
    assert late.join().error_code == UNKNOWN_MEMBER_ID
    a.send_sync(version=5)  # a correct v5 SyncGroup in Stable: its assignment again
    assert a.receive().assignment == a.member_id.encode()
    bad = request(shared, 14, 5, {"group_id": "proto", "generation_id": a.generation, "member_id": a.member_id,
                                  "group_instance_id": None, "protocol_type": None, "protocol_name": "range",
                                  "assignments": []})
    assert bad.error_code == INCONSISTENT
    assert a.heartbeat() == NONE  # the group is unharmed
    for m in (a, other_type, empty_type, short, no_id, late):
        m.close()


def test_a_ten_thousand_byte_group_id_works_like_any_other(shared: BrokerProcess) -> None:
    gid = "g" * 10_000
    (a,) = stable_group(shared, gid, 1)
    assert a.commit({("gt", 0): 42}) == {("gt", 0): NONE}
    assert fetch(shared, gid) == {("gt", 0): 42}
    assert describe(shared, gid).group_state == "Stable"
    listed = request(shared, 16, 4, {"states_filter": ["Stable"]}).groups
    assert gid in {g.group_id for g in listed}
    a.close()


def test_join_flood_is_bounded_by_group_max_size_and_pending_ids_expire(shared: BrokerProcess) -> None:
    with KafkaSocket(shared.port) as c:
        codes = []
        for _ in range(3 * MAX_SIZE):
            resp = c.request(11, 5, {"group_id": "flood", "session_timeout_ms": 200, "rebalance_timeout_ms": 200,
                                     "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                     "protocols": [{"name": "range", "metadata": b""}]})
            codes.append(resp.error_code)
        assert codes.count(MEMBER_ID_REQUIRED) == MAX_SIZE
        assert codes.count(GROUP_MAX_SIZE_REACHED) == 2 * MAX_SIZE
        for i in range(200):  # a new group id per request
            resp = c.request(11, 5, {"group_id": f"junk-{i}", "session_timeout_ms": 200,
                                     "rebalance_timeout_ms": 200, "member_id": "", "group_instance_id": None,
                                     "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
            assert resp.error_code == MEMBER_ID_REQUIRED
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        names = {g.group_id for g in request(shared, 16, 4, {"states_filter": []}).groups}
        if not any(n == "flood" or n.startswith("junk-") for n in names):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("pending-only groups were never forgotten")
    # After the flood: the group takes members again.
    (m,) = stable_group(shared, "flood", 1)
    m.close()


# ---- OffsetCommit / OffsetFetch matrix over the wire ----------------------------------------------


def test_offset_commit_generation_rules_over_the_wire(shared: BrokerProcess) -> None:
    (a,) = stable_group(shared, "matrix", 1)
    admin = Member(shared, "matrix")  # generation -1, member "" on an active group
    assert admin.commit({("gt", 0): 1}) == {("gt", 0): UNKNOWN_MEMBER_ID}
    for version, code in ((8, ILLEGAL_GENERATION), (9, GROUP_ID_NOT_FOUND)):
        stranger = Member(shared, f"unknown-{version}")
        stranger.generation, stranger.member_id = 3, "m"
        assert stranger.commit({("gt", 0): 1}, version=version) == {("gt", 0): code}
        simple = Member(shared, f"simple-{version}")
        assert simple.commit({("gt", 0): 7}, version=version) == {("gt", 0): NONE}
        assert fetch(shared, f"simple-{version}", version=9) == {("gt", 0): 7}
    assert a.commit({("gt", 0): 3}, version=9) == {("gt", 0): NONE}
    for v in (1, 5, 7, 8, 9):
        if v >= 8:
            assert fetch(shared, "matrix", version=v) == {("gt", 0): 3}
        else:
            resp = request(shared, 9, v, {"group_id": "matrix", "require_stable": True,
                                          "topics": [{"name": "gt", "partition_indexes": [0, 1]}]})
            got = {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
                   for t in resp.topics for p in t.partitions}
            assert got == {("gt", 0): (3, "", NONE), ("gt", 1): (-1, "", NONE)}
    a.close()


# ---- JoinGroup v0 (KAFKA-8653) ---------------------------------------------------------------------


def test_join_v0_waits_the_session_timeout_as_its_rebalance_timeout(shared: BrokerProcess) -> None:
    a = Member(shared, "v0", session=1500)
    assert a.join(version=0).error_code == NONE
    a.send_sync({a.member_id: b"x"})
    assert a.receive().error_code == NONE
    b = Member(shared, "v0", session=1500)
    started = time.monotonic()
    b.send_join(version=0)
    while not b.ready(0.1):  # a stays alive but never rejoins
        assert a.heartbeat() in (NONE, REBALANCE_IN_PROGRESS)
        assert time.monotonic() - started < 10, "the rebalance never ended"
    elapsed = time.monotonic() - started
    resp = b.receive()
    assert resp.error_code == NONE and resp.leader == b.member_id
    assert [m.member_id for m in resp.members] == [b.member_id]
    assert 1.2 <= elapsed < 5, elapsed
    a.close()
    b.close()


# ---- the tools' APIs (§6 item 9) -----------------------------------------------------------------------


def test_describe_list_delete_and_offset_delete_follow_kafka(shared: BrokerProcess) -> None:
    a, b = stable_group(shared, "tools", 2, topics=["gt"])
    assert a.commit({("gt", 0): 10, ("other", 1): 4}) == {("gt", 0): NONE, ("other", 1): NONE}
    d = describe(shared, "tools")
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (0, "Stable", "consumer", "range")
    assert {m.member_id: m.member_assignment for m in d.members} == {
        a.member_id: a.member_id.encode(), b.member_id: b.member_id.encode()}
    assert all(m.member_metadata == subscription(["gt"]) for m in d.members)
    assert d.authorized_operations != -(2**31)
    for v in (0, 5):
        u = describe(shared, "never-was", v)
        assert (u.error_code, u.group_state, list(u.members)) == (0, "Dead", [])
    u6 = describe(shared, "never-was", 6)
    assert u6.error_code == GROUP_ID_NOT_FOUND and "never-was" in u6.error_message

    def listed(version: int, states: list[str], types: list[str] | None = None) -> dict[str, tuple[str, str]]:
        body: dict[str, Any] = {"states_filter": states, "types_filter": types or []}
        return {g.group_id: (g.group_state, g.group_type) for g in request(shared, 16, version, body).groups}

    assert listed(5, ["stable"], ["CLASSIC"])["tools"] == ("Stable", "classic")
    assert "tools" not in listed(5, [], ["consumer"])
    assert "tools" not in listed(4, ["Empty"])
    assert "tools" in {g.group_id for g in request(shared, 16, 0, {}).groups}

    deleted = request(shared, 42, 2, {"groups_names": ["tools", "never-was"]}).results
    assert [(r.group_id, r.error_code) for r in deleted] == [("tools", NON_EMPTY_GROUP), ("never-was", GROUP_ID_NOT_FOUND)]
    od = request(shared, 47, 0, {"group_id": "tools", "topics": [
        {"name": "gt", "partitions": [{"partition_index": 0}]},
        {"name": "other", "partitions": [{"partition_index": 1}]}]})
    assert od.error_code == NONE
    assert {(t.name, p.partition_index): p.error_code for t in od.topics for p in t.partitions} == {
        ("gt", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("other", 1): NONE}
    assert fetch(shared, "tools") == {("gt", 0): 10}
    assert request(shared, 47, 0, {"group_id": "never-was", "topics": []}).error_code == GROUP_ID_NOT_FOUND

    assert a.leave() == NONE and b.leave() == NONE
    wait_until(lambda: describe(shared, "tools").group_state == "Empty", 5.0, "the group to become Empty",
               interval=0.02)
    assert listed(4, ["EMPTY"])["tools"] == ("Empty", "")
    deleted = request(shared, 42, 1, {"groups_names": ["tools"]}).results
    assert [(r.group_id, r.error_code) for r in deleted] == [("tools", NONE)]
    assert fetch(shared, "tools") == {}
    assert describe(shared, "tools", 6).error_code == GROUP_ID_NOT_FOUND
    a.close()
    b.close()


def test_offset_delete_on_an_active_non_consumer_group_is_non_empty(shared: BrokerProcess) -> None:
    (a,) = stable_group(shared, "connectish", 1, protocol_type="connect")
    od = request(shared, 47, 0, {"group_id": "connectish", "topics": [{"name": "gt", "partitions": [
        {"partition_index": 0}]}]})
    assert od.error_code == NON_EMPTY_GROUP
    a.close()


# ---- restarts (§6 item 10) --------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["graceful", "crash"])
def test_group_state_survives_a_restart(broker_factory: Any, how: str) -> None:
    b = broker_factory(overrides=OVERRIDES)
    with KafkaSocket(b.port) as c:
        c.request(19, 5, {"topics": [{"name": "gt", "num_partitions": 3, "replication_factor": 1,
                                      "assignments": [], "configs": []}], "timeout_ms": 5000})
    a, m2 = stable_group(b, "kept", 2)
    assert a.commit({("gt", 1): 77}) == {("gt", 1): NONE}
    (gone,) = stable_group(b, "emptied", 1)
    assert gone.commit({("gt", 2): 5}) == {("gt", 2): NONE}
    assert gone.leave() == NONE
    wait_until(lambda: describe(b, "emptied").group_state == "Empty", 5.0, "the group to become Empty",
               interval=0.02)
    # Becoming Empty is no answer to anyone, so nothing promised it durable yet; the store
    # writes in order, so an acknowledged commit made after it proves it is on disk.
    assert a.commit({("gt", 1): 77}) == {("gt", 1): NONE}
    for m in (a, m2, gone):
        m.close()
    bring_back(b, how)
    d = describe(b, "kept")
    assert d.group_state == "Stable" and {m.member_id for m in d.members} == {a.member_id, m2.member_id}
    assert {m.member_assignment for m in d.members} == {a.member_id.encode(), m2.member_id.encode()}
    for m in (a, m2):  # the same members carry on without a rebalance
        m.conn = KafkaSocket(b.port)
        assert m.heartbeat() == NONE
    assert fetch(b, "kept") == {("gt", 1): 77}
    e = describe(b, "emptied")
    assert e.group_state == "Empty"
    assert fetch(b, "emptied") == {("gt", 2): 5}
    assert "Traceback" not in b.log()


# ---- mangled group requests ------------------------------------------------------------------------


def _seeds() -> list[bytes]:
    join = {"group_id": "fz", "session_timeout_ms": 1000, "rebalance_timeout_ms": 1000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(["gt"])}], "reason": None}
    member = {"group_id": "fz", "generation_id": 1, "member_id": "m", "group_instance_id": "i"}
    reqs: list[tuple[int, int, dict[str, Any]]] = [
        (11, 0, join), (11, 5, join), (11, 9, join),
        (14, 3, {**member, "assignments": [{"member_id": "m", "assignment": b"a"}]}),
        (14, 5, {**member, "protocol_type": "consumer", "protocol_name": "range", "assignments": []}),
        (12, 0, member), (12, 4, member),
        (13, 0, {"group_id": "fz", "member_id": "m"}),
        (13, 5, {"group_id": "fz", "members": [{"member_id": "m", "group_instance_id": "i", "reason": "r"}]}),
        (15, 6, {"groups": ["fz", ""], "include_authorized_operations": True}),
        (16, 5, {"states_filter": ["Stable"], "types_filter": ["classic"]}),
        (42, 2, {"groups_names": ["fz"]}),
        (47, 0, {"group_id": "fz", "topics": [{"name": "gt", "partitions": [{"partition_index": 0}]}]}),
        (8, 9, {"group_id": "fz", "generation_id_or_member_epoch": 1, "member_id": "m", "group_instance_id": None,
                "topics": [{"name": "gt", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                          "committed_leader_epoch": -1,
                                                          "committed_metadata": ""}]}]}),
        (9, 9, {"groups": [{"group_id": "fz", "member_id": "m", "member_epoch": 3, "topics": None}],
                "require_stable": True}),
    ]
    return [encode_request(k, v, 5, "fuzz", body) for k, v, body in reqs]


SEEDS = _seeds()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.sampled_from(SEEDS), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                                     max_size=4), cut=st.one_of(st.none(), st.integers(0, 10**6)))
def test_mangled_group_requests_are_answered_or_close_their_connection(
    shared: BrokerProcess, seed: bytes, flips: list[tuple[int, int]], cut: int | None
) -> None:
    body = bytearray(seed[4:])
    for pos, value in flips:
        body[8 + pos % max(1, len(body) - 8)] = value  # the header's key/version stay valid
    if cut is not None:
        body = body[: 8 + cut % max(1, len(body) - 7)]
    with KafkaSocket(shared.port) as c:
        c.send(len(body).to_bytes(4, "big") + bytes(body))
        assert c.outcome(3.0) in ("answered", "closed")
    with KafkaSocket(shared.port) as c:  # and everyone else is still served
        assert c.request(18, 3, {"client_software_name": "x", "client_software_version": "1"}).error_code == 0


def test_no_request_so_far_made_a_handler_fail(shared: BrokerProcess) -> None:
    assert "Traceback" not in shared.log()


def test_a_graceful_stop_answers_parked_joins_with_not_coordinator_at_once(broker_factory: Any) -> None:
    b = broker_factory(overrides={**OVERRIDES, "group.initial.rebalance.delay.ms": "60000"})
    m = Member(b, "parked")
    m.send_join()
    assert m.receive().error_code == MEMBER_ID_REQUIRED
    m.send_join()
    assert not m.ready(0.3)  # parked for the (long) initial delay
    started = time.monotonic()
    assert b.stop() == 0
    assert time.monotonic() - started < 10
    assert m.receive().error_code == 16  # NOT_COORDINATOR: the client looks for it again
    m.close()
