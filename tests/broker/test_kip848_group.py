"""The KIP-848 ConsumerGroup state machine, driven without a socket by a fake clock."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from broker.groups.consumer import (
    ConsumerGroup,
    ConsumerGroupSettings,
    HeartbeatRequest,
    MemberState,
    validate_heartbeat,
)
from protocol.errors import ErrorCode, KafkaError

SESSION = 45000
SETTINGS = ConsumerGroupSettings(session_timeout_ms=SESSION, heartbeat_interval_ms=5000, max_size=5)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Image:
    """Topics as the group sees them: name -> partition count, with fixed ids."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)

    def partition_count(self, topic: str) -> int:
        return self.topics.get(topic, 0)

    def topic_id(self, topic: str) -> bytes:
        return topic.encode().ljust(16, b"\0")[:16]

    def topic_by_id(self, topic_id: bytes) -> str | None:
        name = topic_id.rstrip(b"\0").decode()
        return name if name in self.topics else None

    def topic_names(self) -> list[str]:
        return sorted(self.topics)


def make(topics: dict[str, int] | None = None, **kw: Any) -> tuple[ConsumerGroup, Clock, Image]:
    clock, image = Clock(), Image(topics or {"t": 6})
    return ConsumerGroup("g", kw.pop("settings", SETTINGS), image, clock), clock, image


def join(g: ConsumerGroup, member: str, topics: list[str] | None = None, **kw: Any) -> Any:
    req = HeartbeatRequest(member, 0, rebalance_timeout_ms=kw.pop("rebalance", 30000),
                           subscribed_topic_names=["t"] if topics is None else topics, owned={}, **kw)
    validate_heartbeat(req, g.group_id)
    return g.heartbeat(req)


def beat(g: ConsumerGroup, member: str, epoch: int, owned: dict[str, frozenset[int]] | None, **kw: Any) -> Any:
    req = HeartbeatRequest(member, epoch, owned=owned, **kw)
    validate_heartbeat(req, g.group_id)
    return g.heartbeat(req)


def code_of(fn: Any) -> int:
    with pytest.raises(KafkaError) as info:
        fn()
    return int(info.value.code)


def fs(*ps: int) -> frozenset[int]:
    return frozenset(ps)


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    g, _, _ = make()
    r = join(g, "a")
    assert (r.member_epoch, r.assignment, r.heartbeat_interval_ms) == (1, {"t": fs(*range(6))}, 5000)
    assert g.state_name() == "Stable" and (g.group_epoch, g.assignment_epoch) == (1, 1)


def test_second_member_waits_for_revocation_before_it_is_assigned() -> None:
    g, _, _ = make()
    a = join(g, "a")
    b = join(g, "b")
    assert b.member_epoch == 2 and b.assignment == {}  # its partitions are still a's
    assert g.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert g.state_name() == "Reconciling"
    ra = beat(g, "a", 1, a.assignment)  # a still owns everything
    assert ra.member_epoch == 1 and g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    kept = ra.assignment["t"]
    assert len(kept) == 3
    assert beat(g, "b", 2, {}).assignment is None  # a has not released yet: nothing new for b
    ra = beat(g, "a", 1, {"t": kept})  # revoked
    assert ra.member_epoch == 2 and g.members["a"].state is MemberState.STABLE
    rb = beat(g, "b", 2, {})
    assert rb.assignment == {"t": fs(*range(6)) - kept}
    assert g.state_name() == "Stable"


def test_leaving_member_gives_its_partitions_back() -> None:
    g, _, _ = make()
    join(g, "a")
    settle(g, {"a": join(g, "b")})
    r = beat(g, "b", g.members["b"].member_epoch, None, )
    left = beat(g, "b", -1, None)
    assert left.member_epoch == -1 and "b" not in g.members
    ra = beat(g, "a", g.members["a"].member_epoch, g.members["a"].assigned)
    assert ra.assignment == {"t": fs(*range(6))}
    del r


def settle(g: ConsumerGroup, _: Any = None, rounds: int = 6) -> None:
    """Heartbeat every member a few times reporting exactly what it was given."""
    for _ in range(rounds):
        for mid in list(g.members):
            m = g.members[mid]
            beat(g, mid, m.member_epoch, dict(m.assigned))


def test_session_timeout_removes_a_silent_member_and_moves_its_partitions() -> None:
    g, clock, _ = make()
    join(g, "a")
    join(g, "b")
    settle(g)
    clock.now += SESSION - 1
    beat(g, "a", g.members["a"].member_epoch, g.members["a"].assigned)
    assert set(g.members) == {"a", "b"}
    clock.now += 2  # b's session ran out; a heartbeated 2 ms ago
    assert g.expire() == ["b"]
    r = beat(g, "a", g.members["a"].member_epoch, g.members["a"].assigned)
    assert r.assignment == {"t": fs(*range(6))}
    assert code_of(lambda: beat(g, "b", 2, {})) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() -> None:
    g, clock, _ = make()
    a = join(g, "a", rebalance=1000)
    join(g, "b")
    beat(g, "a", 1, a.assignment)
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    clock.now += 999
    beat(g, "a", 1, a.assignment)  # still holding on
    assert "a" in g.members
    clock.now += 1
    assert g.expire() == ["a"]
    rb = beat(g, "b", g.members["b"].member_epoch, {})
    assert rb.assignment == {"t": fs(*range(6))}


def test_epoch_errors_follow_kafka() -> None:
    g, _, _ = make()
    r = join(g, "a")
    assert code_of(lambda: beat(g, "a", 2, r.assignment)) == ErrorCode.FENCED_MEMBER_EPOCH  # ahead
    join(g, "b")
    beat(g, "a", 1, {"t": fs()})  # a revokes everything and moves to epoch 2
    assert g.members["a"].member_epoch == 2
    # the previous epoch with owned ⊆ assigned is a lost response: accepted
    assert beat(g, "a", 1, {}).member_epoch == 2
    assert code_of(lambda: beat(g, "a", 1, {"t": fs(0, 1, 2, 3, 4, 5)})) == ErrorCode.FENCED_MEMBER_EPOCH
    assert code_of(lambda: beat(g, "zz", 1, {})) == ErrorCode.UNKNOWN_MEMBER_ID


def test_request_validation_is_invalid_request() -> None:
    def v(**kw: Any) -> int:
        base = dict(member_id="m", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], owned={})
        base.update(kw)
        return code_of(lambda: validate_heartbeat(HeartbeatRequest(**base), "g"))

    assert v(rebalance_timeout_ms=-1) == 42
    assert v(owned=None) == 42
    assert v(owned={"t": fs(1)}) == 42
    assert v(subscribed_topic_names=None) == 42
    assert v(member_epoch=-3) == 42
    assert v(member_epoch=-2, instance_id=None) == 42
    assert v(instance_id="") == 42
    assert v(member_id="") == 42  # v1 requires a client-made id
    assert code_of(lambda: validate_heartbeat(HeartbeatRequest("m", 1), "")) == 42
    validate_heartbeat(HeartbeatRequest("", 0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], owned={},
                                        api_version=0), "g")  # v0 may leave it to the broker


def test_v0_join_without_member_id_gets_one() -> None:
    g, _, _ = make()
    r = g.heartbeat(HeartbeatRequest("", 0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], owned={},
                                     api_version=0))
    assert len(r.member_id) == 22 and r.member_id in g.members


def test_unsupported_assignor_bad_regex_and_full_group() -> None:
    g, _, _ = make()
    assert code_of(lambda: join(g, "a", server_assignor="sticky")) == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert code_of(lambda: join(g, "a", topics=None, subscribed_topic_regex="(")) == \
        ErrorCode.INVALID_REGULAR_EXPRESSION
    for i in range(5):
        join(g, f"m{i}")
    assert code_of(lambda: join(g, "m5")) == ErrorCode.GROUP_MAX_SIZE_REACHED
    join(g, "m0")  # a member already in the group may rejoin


def test_range_assignor_on_request_and_regex_subscription() -> None:
    g, _, image = make({"orders-1": 2, "orders-2": 2, "other": 4})
    r = join(g, "a", topics=None, subscribed_topic_regex="orders-.*", server_assignor="range")
    assert r.assignment == {}  # as Kafka: a new regex is resolved after the heartbeat bringing it
    r = beat(g, "a", r.member_epoch, r.assignment)
    assert r.assignment == {"orders-1": fs(0, 1), "orders-2": fs(0, 1)}
    assert g.describe()["assignor_name"] == "range"
    image.topics["orders-3"] = 1  # a new topic matching the regex bumps the group epoch
    epoch = g.group_epoch
    r = beat(g, "a", r.member_epoch, r.assignment)
    assert g.group_epoch == epoch + 1 and r.assignment["orders-3"] == fs(0)


def test_new_partitions_bump_the_group_epoch() -> None:
    g, _, image = make({"t": 2})
    r = join(g, "a")
    image.topics["t"] = 4
    r2 = beat(g, "a", r.member_epoch, r.assignment)
    assert r2.member_epoch == 2 and r2.assignment == {"t": fs(0, 1, 2, 3)}


def test_static_member_temporary_leave_and_return_keep_the_assignment() -> None:
    g, _, _ = make()
    join(g, "a1", instance_id="i-a")
    join(g, "b", instance_id="i-b")
    settle(g)
    before = g.members["a1"].assigned
    epoch = g.group_epoch
    assert code_of(lambda: join(g, "a2", instance_id="i-a")) == ErrorCode.UNRELEASED_INSTANCE_ID
    assert beat(g, "a1", -2, None, instance_id="i-a").member_epoch == -2
    r = join(g, "a2", instance_id="i-a")
    assert r.assignment == before and g.group_epoch == epoch  # no rebalance
    assert "a1" not in g.members
    assert code_of(lambda: beat(g, "a1", 3, {}, instance_id="i-a")) == ErrorCode.FENCED_INSTANCE_ID
    assert code_of(lambda: beat(g, "x", 3, {}, instance_id="i-zz")) == ErrorCode.UNKNOWN_MEMBER_ID


def test_offset_commit_and_fetch_validation() -> None:
    g, _, _ = make()
    assert g.validate_offset_commit("", -1, None, 9) == 0  # empty group: admin commit
    r = join(g, "a")
    assert g.validate_offset_commit("a", r.member_epoch, None, 9) == 0
    assert g.validate_offset_commit("a", r.member_epoch - 1, None, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert g.validate_offset_commit("a", r.member_epoch, None, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert g.validate_offset_commit("nobody", 1, None, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_offset_commit("", -1, None, 9) == ErrorCode.UNKNOWN_MEMBER_ID  # not empty now
    assert g.validate_offset_fetch(None, -1) == 0
    assert g.validate_offset_fetch("a", r.member_epoch) == 0
    assert g.validate_offset_fetch("a", 7) == ErrorCode.STALE_MEMBER_EPOCH
    assert g.validate_offset_fetch("b", 1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_snapshot_round_trips_through_json_and_restarts_sessions() -> None:
    g, clock, image = make({"t": 6, "u": 3})
    join(g, "a", topics=["t", "u"], instance_id="i")
    join(g, "b", topics=["t"])
    beat(g, "a", 1, g.members["a"].assigned)  # a is now revoking
    record = json.loads(json.dumps(g.to_record()))
    clock.now += 10 * SESSION
    back = ConsumerGroup.from_record(record, SETTINGS, image, clock)
    assert back.to_record() == g.to_record()
    assert back.state_name() == g.state_name() and back.expire() == []
    assert back._owners == g._owners


@dataclass
class Client:
    """A faithful KIP-848 client: owns exactly what the last assignment said."""

    member_id: str
    epoch: int = 0
    owned: dict[str, frozenset[int]] = field(default_factory=dict)
    joined: bool = False
    instance_id: str | None = None
    restarts: int = 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "beat", "beat", "beat", "leave", "tick", "grow", "bounce"]),
                          st.integers(0, 3)), max_size=60),
       st.sampled_from(["uniform", "range"]))
def test_no_partition_is_ever_owned_by_two_clients_and_the_group_converges(ops: list[Any], assignor: str) -> None:
    g, clock, image = make({"t": 5, "u": 3})
    clients = [Client(f"c{i}", instance_id=f"i{i}" if i < 2 else None) for i in range(4)]

    def apply(c: Client, r: Any) -> None:
        c.epoch = r.member_epoch
        if r.assignment is not None:
            c.owned = {t: ps for t, ps in r.assignment.items() if ps}

    def check() -> None:
        seen: set[tuple[str, int]] = set()
        for c in clients:
            for t, ps in c.owned.items():
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} owned twice"
                    seen.add((t, p))

    for op, i in [("join", 0), ("join", 1), ("join", 2), *ops]:
        c = clients[i]
        try:
            if op == "join" and not c.joined:
                apply(c, join(g, c.member_id, topics=["t", "u"], server_assignor=assignor,
                              instance_id=c.instance_id))
                c.joined = True
            elif op == "beat" and c.joined:
                apply(c, beat(g, c.member_id, c.epoch, dict(c.owned), instance_id=c.instance_id))
            elif op == "bounce" and c.joined and c.instance_id is not None:
                # a static member restarts: temporary leave, then a new process (member id)
                beat(g, c.member_id, -2, None, instance_id=c.instance_id)
                c.owned, c.epoch = {}, 0
                check()
                c.restarts += 1
                event("static member bounced")
                c.member_id = f"{c.member_id.split('.')[0]}.{c.restarts}"
                apply(c, join(g, c.member_id, topics=["t", "u"], server_assignor=assignor,
                              instance_id=c.instance_id))
            elif op == "leave" and c.joined:
                beat(g, c.member_id, -1, None, instance_id=c.instance_id)
                c.owned, c.joined, c.epoch = {}, False, 0
            elif op == "tick":
                clock.now += 1000
            elif op == "grow":
                image.topics["t"] += 1
        except KafkaError as exc:
            assert exc.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH)
            c.owned, c.joined, c.epoch = {}, False, 0  # the client gives everything up
        check()
    # Converge: with everyone heartbeating, every partition ends up owned exactly once.
    for _ in range(8):
        for c in clients:
            if c.joined:
                apply(c, beat(g, c.member_id, c.epoch, dict(c.owned), instance_id=c.instance_id))
                check()
    if any(c.joined for c in clients):
        owned = sorted((t, p) for c in clients for t, ps in c.owned.items() for p in ps)
        assert owned == sorted((t, p) for t, n in image.topics.items() for p in range(n))
        assert g.state_name() == "Stable"
        assert {c.epoch for c in clients if c.joined} == {g.group_epoch}


def test_a_subscribed_topic_created_later_bumps_the_group_epoch_and_is_assigned() -> None:
    g, _, image = make({"t": 2})
    r = join(g, "a", topics=["t", "later"])
    assert r.assignment == {"t": fs(0, 1)}
    assert beat(g, "a", r.member_epoch, r.assignment).assignment is None  # nothing changed
    image.topics["later"] = 3
    r2 = beat(g, "a", r.member_epoch, r.assignment)
    assert (g.group_epoch, r2.member_epoch) == (2, 2)
    assert r2.assignment == {"t": fs(0, 1), "later": fs(0, 1, 2)}
    del image.topics["later"]  # deleted again: its partitions are revoked
    r3 = beat(g, "a", r2.member_epoch, r2.assignment)
    assert g.group_epoch == 3 and r3.assignment == {"t": fs(0, 1)}


def test_a_fenced_member_rejoining_with_epoch_zero_and_its_id_is_taken_back() -> None:
    g, _, _ = make()
    join(g, "a")
    join(g, "b")
    settle(g)
    assert code_of(lambda: beat(g, "a", 9, {})) == ErrorCode.FENCED_MEMBER_EPOCH
    # librdkafka gives up its partitions and rejoins at epoch 0 under the same member id
    r = join(g, "a")
    assert r.member_epoch == g.assignment_epoch and r.member_id == "a"
    settle(g)
    assert sorted(p for m in g.members.values() for p in m.assigned.get("t", ())) == list(range(6))
    assert g.state_name() == "Stable"


def test_a_new_regex_counts_from_the_next_heartbeat_and_a_dropped_one_starts_over() -> None:
    """As Kafka, which resolves regexes in the background (librdkafka 0045_resubscribe_with_regex
    expects it): the literal topics first, the regex's one heartbeat later; once no member
    uses the regex, subscribing to it again takes the two steps again."""
    g, _, _ = make({"rx-1": 2, "rx-2": 2, "lit": 1})
    both = {"lit": fs(0), "rx-1": fs(0, 1), "rx-2": fs(0, 1)}
    r = join(g, "a", topics=["lit"], subscribed_topic_regex="rx-.*")
    assert r.assignment == {"lit": fs(0)}
    beat(g, "a", r.member_epoch, r.assignment)
    settle(g)
    assert g.members["a"].assigned == both
    m = g.members["a"]
    beat(g, "a", m.member_epoch, dict(m.assigned), subscribed_topic_regex="")
    settle(g)
    assert g.members["a"].assigned == {"lit": fs(0)}
    m = g.members["a"]
    beat(g, "a", m.member_epoch, dict(m.assigned), subscribed_topic_regex="rx-.*")
    assert g.members["a"].assigned == {"lit": fs(0)}
    settle(g)
    assert g.members["a"].assigned == both


def test_regex_subscriptions_use_re2_so_a_backtracking_pattern_is_answered() -> None:
    # Python's re needs ~fib(60) steps to reject this name; RE2 (Kafka's engine) is linear.
    g, _, _ = make({"a" * 60: 2, "aab": 1})
    r = join(g, "m", topics=None, subscribed_topic_regex="(a|aa)+b")
    r = beat(g, "m", r.member_epoch, r.assignment)  # the regex counts from the next heartbeat
    assert r.assignment == {"aab": fs(0)}
    assert code_of(lambda: join(g, "n", topics=None, subscribed_topic_regex="(?<=x)y")) == \
        ErrorCode.INVALID_REGULAR_EXPRESSION  # look-behind: not RE2 (nor RE2/J)
