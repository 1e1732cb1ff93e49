"""The classic group state machine, driven by a fake clock without sockets.

Each test plays one of Kafka's rules (groups-facts §1.2-1.4, §6) through
``ClassicGroup`` with opaque tickets and checks who is answered, when, and with what.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig
from broker.groups.classic import (
    COMPLETING_REBALANCE,
    EMPTY,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    JoinRequest,
    parse_subscription_topics,
)
from broker.groups.coordinator import Effects, GroupCoordinator
from broker.groups.store import GroupStore

MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID = 79, 27, 25
ILLEGAL_GENERATION, FENCED_INSTANCE_ID, INCONSISTENT = 22, 82, 23
GROUP_MAX_SIZE_REACHED = 81
DELAY = 300
SESSION = 10_000
REBALANCE = 30_000


@dataclass(eq=False)
class Ticket:
    name: str


class Harness:
    """One group, a fake clock that fires timers in order, and every answer given."""

    def __init__(self, **config: Any) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", DELAY)
        self.g = ClassicGroup("g", BrokerConfig(**config), 0)
        self.now = 0
        self.answers: dict[Ticket, dict[str, Any]] = {}
        self.persists = 0

    def _take(self, fx: Effects) -> None:
        for ticket, body in fx.replies:
            assert ticket not in self.answers, f"{ticket.name} answered twice"
            self.answers[ticket] = body
        self.persists += fx.persist

    def join(self, member_id: str = "", *, instance: str | None = None, v: int = 5,
             protocols: list[tuple[str, bytes]] | None = None, ptype: str = "consumer",
             session: int = SESSION, rebalance: int = REBALANCE, name: str = "") -> Ticket:
        t = Ticket(name or f"join-{member_id or instance or 'new'}@{self.now}")
        req = JoinRequest(member_id, instance, "client", "/127.0.0.1", session, rebalance, ptype,
                          protocols if protocols is not None else [("range", b"meta")], v)
        self._take(self.g.join(self.now, req, t))
        return t

    def join_new(self, **kw: Any) -> str:
        """The v4+ two-step join's first step: the member id handed out."""
        t = self.join(**kw)
        assert self.answers[t]["error_code"] == MEMBER_ID_REQUIRED
        return str(self.answers[t]["member_id"])

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             instance: str | None = None) -> Ticket:
        t = Ticket(f"sync-{member_id}@{self.now}")
        self._take(self.g.sync(self.now, member_id, instance, generation, None, None,
                               assignments or {}, t))
        return t

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> int:
        return self.g.heartbeat(self.now, member_id, instance, generation)

    def leave(self, *members: tuple[str, str | None]) -> list[int]:
        codes, fx = self.g.leave(self.now, list(members))
        self._take(fx)
        return codes

    def advance(self, ms: int) -> None:
        """Move the clock, firing each timer at its own deadline, in order."""
        target = self.now + ms
        while (d := self.g.next_deadline_ms()) is not None and d <= target:
            self.now = max(self.now, d)
            self._take(self.g.on_timer(self.now))
        self.now = target

    def settle(self, tickets: list[Ticket]) -> None:
        """Advance delay by delay until every ticket is answered (the initial delay may extend)."""
        for _ in range(100):
            if all(t in self.answers for t in tickets):
                return
            self.advance(DELAY)
        raise AssertionError("never answered")

    def answered(self, t: Ticket) -> dict[str, Any] | None:
        return self.answers.get(t)

    def stable_group(self, n: int) -> list[str]:
        """n dynamic members through join and sync: Stable at generation 1."""
        ids = [self.join_new() for _ in range(n)]
        tickets = [self.join(m) for m in ids]
        self.settle(tickets)
        leader = self.g.leader_id
        assert leader is not None
        syncs = [self.sync(m, 1, {x: x.encode() for x in ids} if m == leader else None) for m in ids]
        assert all(self.answers[t]["error_code"] == 0 for t in tickets + syncs)
        assert self.g.state == STABLE
        return ids


# ---- 1. two-step join (KIP-394, KAFKA-7909) ------------------------------------------------


def test_v4_join_without_id_gets_member_id_required_then_joins_with_it() -> None:
    h = Harness()
    first = h.join()
    answer = h.answered(first)
    assert answer is not None and answer["error_code"] == MEMBER_ID_REQUIRED
    mid = answer["member_id"]
    assert mid.startswith("client-") and h.g.state == EMPTY and not h.g.members
    second = h.join(mid)
    assert h.answered(second) is None  # parked for the initial delay
    h.advance(DELAY)
    got = h.answered(second)
    assert got is not None
    assert (got["error_code"], got["generation_id"], got["leader"], got["member_id"]) == (0, 1, mid, mid)
    assert [m["member_id"] for m in got["members"]] == [mid]
    assert h.g.state == COMPLETING_REBALANCE


def test_v3_join_is_added_at_once_without_member_id_required() -> None:
    h = Harness()
    t = h.join(v=3)
    h.advance(DELAY)
    got = h.answered(t)
    assert got is not None and got["error_code"] == 0 and got["generation_id"] == 1


def test_pending_member_blocks_the_join_until_it_expires() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    h.join_new(session=2000)  # a pending id that never comes back
    rejoin = h.join(a, protocols=[("range", b"changed")])  # forces a rebalance
    assert h.g.state == PREPARING_REBALANCE
    h.advance(1999)
    assert h.answered(rejoin) is None  # blocked by the pending id (KAFKA-7909)
    h.advance(1)
    got = h.answered(rejoin)
    assert got is not None and got["generation_id"] == 2  # long before the rebalance timeout
    assert not h.g.pending_members


def test_unknown_member_id_rejoining_gets_unknown_member() -> None:
    h = Harness()
    h.stable_group(1)
    t = h.join("nobody")
    assert h.answered(t)["error_code"] == UNKNOWN_MEMBER_ID  # type: ignore[index]


# ---- 2. the initial delay -----------------------------------------------------------------


def test_initial_rebalance_waits_the_delay_even_when_everyone_joined() -> None:
    h = Harness()
    t = h.join(h.join_new())
    h.advance(DELAY - 1)
    assert h.answered(t) is None
    h.advance(1)
    assert h.answered(t) is not None


def test_initial_delay_is_extended_by_each_new_arrival_within_the_rebalance_timeout() -> None:
    h = Harness()
    a = h.join(h.join_new(), rebalance=1000)
    h.advance(200)
    b = h.join(h.join_new(), rebalance=1000)
    h.advance(100)  # t=300: the first delay ends, a member arrived meanwhile: extend
    assert h.answered(a) is None
    h.advance(299)
    assert h.answered(a) is None
    h.advance(1)  # t=600
    assert h.answered(a)["generation_id"] == h.answered(b)["generation_id"] == 1  # type: ignore[index]


def test_initial_delay_extension_stops_at_the_rebalance_timeout() -> None:
    h = Harness()
    first = h.join(h.join_new(), rebalance=500)  # remaining = 500 - 300 = 200
    for _ in range(10):  # new members keep arriving
        h.advance(100)
        h.join(h.join_new(), rebalance=500)
    # delay 300, then one extension of min(300, 200) = 200 (remaining 0): done at 500.
    assert h.answered(first) is not None
    assert h.answered(first)["generation_id"] == 1  # type: ignore[index]


# ---- 3. a second member joins, then leaves ------------------------------------------------


def test_second_member_joining_makes_the_first_rejoin_and_bumps_the_generation() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    b = h.join_new()
    tb = h.join(b)
    assert h.g.state == PREPARING_REBALANCE
    assert h.heartbeat(a, 1) == REBALANCE_IN_PROGRESS
    ta = h.join(a)
    ja, jb = h.answered(ta), h.answered(tb)  # everyone rejoined: completes at once
    assert ja is not None and jb is not None
    assert ja["generation_id"] == jb["generation_id"] == 2
    assert ja["leader"] == a and {m["member_id"] for m in ja["members"]} == {a, b}
    assert jb["members"] == []  # only the leader sees the members
    follower = h.sync(b, 2)
    assert h.answered(follower) is None  # parked until the leader's SyncGroup
    leader = h.sync(a, 2, {a: b"A", b: b"B"})
    assert h.answered(leader)["assignment"] == b"A"  # type: ignore[index]
    assert h.answered(follower)["assignment"] == b"B"  # type: ignore[index]
    assert h.g.state == STABLE and h.persists >= 1


def test_the_only_member_rejoining_a_stable_group_gets_the_next_generation_at_once() -> None:
    """A kafka-python leader that assigned before its metadata knew the topic rejoins
    when the metadata arrives: nobody else to wait for, so no rebalance timeout."""
    h = Harness()
    (a,) = h.stable_group(1)
    t = h.join(a, protocols=[("range", b"meta with the topic")])
    got = h.answered(t)
    assert got is not None and got["error_code"] == 0 and got["generation_id"] == 2, got
    assert got["leader"] == a and h.g.state == COMPLETING_REBALANCE
    s = h.sync(a, 2, {a: b"A"})
    assert h.answered(s)["assignment"] == b"A" and h.g.state == STABLE  # type: ignore[index]


def test_the_only_member_rejoining_with_new_metadata_while_completing_gets_the_next_generation() -> None:
    h = Harness()
    a = h.join_new()
    h.settle([h.join(a)])
    assert h.g.state == COMPLETING_REBALANCE and h.g.generation_id == 1
    t = h.join(a, protocols=[("range", b"meta with the topic")])  # before its SyncGroup
    got = h.answered(t)
    assert got is not None and got["error_code"] == 0 and got["generation_id"] == 2, got


def test_a_stable_leader_rejoining_waits_for_the_other_members() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    leader = h.g.leader_id
    other = b if leader == a else a
    assert leader is not None
    t = h.join(leader)
    assert h.answered(t) is None and h.g.state == PREPARING_REBALANCE
    h.join(other)  # the last one in: completes at once
    got = h.answered(t)
    assert got is not None and got["generation_id"] == 2


def test_a_leaving_member_makes_the_rest_rejoin_without_it() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    assert h.leave((b, None)) == [0]
    assert h.heartbeat(a, 1) == REBALANCE_IN_PROGRESS
    t = h.join(a)
    got = h.answered(t)
    assert got is not None and got["generation_id"] == 2 and [m["member_id"] for m in got["members"]] == [a]


def test_members_the_leader_left_out_get_empty_assignments() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    assert h.g.members[a].assignment and h.g.members[b].assignment
    h.join(a)
    h.join(b)
    leader = h.g.leader_id
    assert leader is not None
    other = b if leader == a else a
    tf = h.sync(other, 2)
    h.sync(leader, 2, {leader: b"x"})
    assert h.answered(tf)["assignment"] == b""  # type: ignore[index]


def test_the_last_member_leaving_empties_the_group_and_persists_it() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    before = h.persists
    h.leave((a, None))
    h.advance(0)
    assert h.g.state == EMPTY and h.g.generation_id == 2 and h.persists == before + 1


# ---- 4. removal completes or restarts the rebalance ------------------------------------------


def test_leave_during_preparing_rebalance_completes_the_join() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    c = h.join_new()
    tc = h.join(c)
    ta = h.join(a)
    assert h.answered(ta) is None  # b has not rejoined
    h.leave((b, None))
    assert h.answered(ta)["generation_id"] == h.answered(tc)["generation_id"] == 2  # type: ignore[index]


def test_session_expiry_during_preparing_rebalance_completes_the_join() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    h.advance(SESSION // 2)
    h.heartbeat(a, 1)
    ta = h.join(a, protocols=[("range", b"new")])
    h.advance(SESSION // 2)  # b's session ends long before the rebalance timeout
    got = h.answered(ta)
    assert got is not None and got["generation_id"] == 2 and [m["member_id"] for m in got["members"]] == [a]


def test_dead_member_is_removed_after_its_session_timeout() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    for _ in range(5):
        h.advance(SESSION // 2)
        assert h.heartbeat(a, 1) in (0, REBALANCE_IN_PROGRESS)
    assert b not in h.g.members and h.g.state == PREPARING_REBALANCE


def test_rebalance_timeout_drops_dynamic_members_that_did_not_rejoin() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    ta = h.join(a, protocols=[("range", b"x")])
    for _ in range(REBALANCE // 5000):  # b keeps heartbeating but never rejoins
        h.advance(5000)
        h.heartbeat(b, 1)
        h.heartbeat(a, 1)
    got = h.answered(ta)
    assert got is not None and [m["member_id"] for m in got["members"]] == [a]


def test_member_without_sync_group_is_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    ta, tb = h.join(h.join_new()), h.join(h.join_new())
    h.settle([ta, tb])
    a, b = h.answered(ta)["member_id"], h.answered(tb)["member_id"]  # type: ignore[index]
    leader = h.g.leader_id
    follower = b if leader == a else a
    h.sync(str(leader), 1, {a: b"1", b: b"2"})
    for _ in range(REBALANCE // 5000):
        h.advance(5000)
        h.heartbeat(str(leader), 1)
    assert follower not in h.g.members  # KAFKA-12890
    assert h.g.state == PREPARING_REBALANCE


def test_a_new_member_parked_five_minutes_is_answered_unknown_member() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    h.g.members[a].rebalance_timeout_ms = 2 * NEW_MEMBER_JOIN_TIMEOUT_MS  # a slow group
    newcomer = h.join(h.join_new(), rebalance=2 * NEW_MEMBER_JOIN_TIMEOUT_MS)
    for _ in range(NEW_MEMBER_JOIN_TIMEOUT_MS // 5000):  # a heartbeats but never rejoins
        h.advance(5000)
        h.heartbeat(a, 1)
    got = h.answered(newcomer)
    assert got is not None and got["error_code"] == UNKNOWN_MEMBER_ID  # KAFKA-7610
    assert list(h.g.members) == [a]


def test_rebalance_with_nobody_rejoining_rearms_the_timer_at_the_same_generation() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    h.g.members[a].instance_id = "static-a"
    h.g.static_members["static-a"] = a
    h.leave((b, None))  # Stable -> PreparingRebalance; a is static and does not rejoin
    for _ in range(2 * REBALANCE // 5000):  # but stays alive
        h.advance(5000)
        assert h.heartbeat(a, 1, instance="static-a") == REBALANCE_IN_PROGRESS
    assert h.g.state == PREPARING_REBALANCE and h.g.generation_id == 1 and a in h.g.members


# ---- 5. the offset commit matrix ----------------------------------------------------------------


def test_offset_commit_matrix_follows_kafka() -> None:
    h = Harness()
    g = h.g
    assert g.validate_offset_commit("", -1, None, 8) == 0  # Empty, admin commit
    a, b = h.stable_group(2)
    assert g.validate_offset_commit("", -1, None, 8) == UNKNOWN_MEMBER_ID  # -1 on an active group
    assert g.validate_offset_commit(a, 1, None, 8) == 0
    assert g.validate_offset_commit(a, 0, None, 8) == ILLEGAL_GENERATION  # stale
    assert g.validate_offset_commit("ghost", 1, None, 8) == UNKNOWN_MEMBER_ID
    h.join(a, protocols=[("range", b"x")])  # PreparingRebalance, still generation 1
    assert g.state == PREPARING_REBALANCE
    assert g.validate_offset_commit(b, 1, None, 8) == 0  # cooperative consumers commit here
    h.join(b)
    assert g.state == COMPLETING_REBALANCE
    assert g.validate_offset_commit(b, 2, None, 8) == REBALANCE_IN_PROGRESS


def test_commits_keep_a_member_alive_like_heartbeats() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    for _ in range(4):
        h.advance(SESSION // 2)
        h.g.touch(h.now, a)
        h.heartbeat(b, 1)
    assert a in h.g.members


# ---- 7. static membership (KIP-345) -------------------------------------------------------------


def static_group(h: Harness, n: int) -> list[str]:
    tickets = [h.join(instance=f"i{k}") for k in range(n)]
    h.settle(tickets)
    ids = [h.answered(t)["member_id"] for t in tickets]  # type: ignore[index]
    leader = h.g.leader_id
    for k, m in enumerate(ids):
        h.sync(m, 1, {x: x.encode() for x in ids} if m == leader else None, instance=f"i{k}")
    assert h.g.state == STABLE
    return ids


def test_static_member_joins_at_once_without_member_id_required() -> None:
    h = Harness()
    t = h.join(instance="i0", v=5)
    assert h.answered(t) is None
    h.advance(DELAY)
    got = h.answered(t)
    assert got is not None and got["error_code"] == 0 and got["member_id"].startswith("i0-")


def test_static_member_restart_keeps_the_generation_and_fences_the_old_id() -> None:
    h = Harness()
    old_a, old_b = static_group(h, 2)
    follower, k = (old_b, 1) if h.g.leader_id == old_a else (old_a, 0)
    t = h.join(instance=f"i{k}")
    got = h.answered(t)
    assert got is not None and got["error_code"] == 0 and got["generation_id"] == 1
    assert h.g.state == STABLE  # no rebalance
    new_id = got["member_id"]
    assert new_id != follower
    assert h.heartbeat(follower, 1, instance=f"i{k}") == FENCED_INSTANCE_ID
    assert h.heartbeat(new_id, 1, instance=f"i{k}") == 0
    sync = h.sync(new_id, 1, instance=f"i{k}")
    assert h.answered(sync)["assignment"] == follower.encode()  # type: ignore[index]


def test_static_leader_restart_at_v9_is_told_to_skip_assignment() -> None:
    h = Harness()
    ids = static_group(h, 2)
    k = ids.index(str(h.g.leader_id))
    got = h.answered(h.join(instance=f"i{k}", v=9))
    assert got is not None and got["skip_assignment"] is True and len(got["members"]) == 2
    assert h.g.state == STABLE and h.g.leader_id == got["member_id"]


def test_static_rejoin_during_completing_rebalance_rebalances() -> None:
    h = Harness()
    static_group(h, 2)
    h.join(h.join_new())  # a third member: rebalance
    h.join(instance="i0")
    h.join(instance="i1")
    assert h.g.state == COMPLETING_REBALANCE
    h.join(instance="i0")  # KAFKA-9801: the old id may be in the leader's assignment
    assert h.g.state == PREPARING_REBALANCE


def test_static_members_expire_too() -> None:
    h = Harness()
    a, b = static_group(h, 2)
    for _ in range(3):
        h.advance(SESSION // 2)
        h.heartbeat(a, 1, instance="i0")
    assert b not in h.g.members and "i1" not in h.g.static_members


def test_static_member_leaves_by_instance_id() -> None:
    h = Harness()
    static_group(h, 2)
    assert h.leave(("", "i1"), ("", "nope")) == [0, UNKNOWN_MEMBER_ID]
    assert "i1" not in h.g.static_members


# ---- protocol selection, bad joins -----------------------------------------------------------


def test_inconsistent_protocol_type_or_no_common_protocol_is_refused() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.answered(h.join(ptype="connect"))["error_code"] == INCONSISTENT  # type: ignore[index]
    assert h.answered(h.join(protocols=[("roundrobin", b"")]))["error_code"] == INCONSISTENT  # type: ignore[index]
    fresh = Harness()
    assert fresh.answered(fresh.join(ptype=""))["error_code"] == INCONSISTENT  # type: ignore[index]
    assert fresh.answered(fresh.join(protocols=[]))["error_code"] == INCONSISTENT  # type: ignore[index]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.permutations(["range", "roundrobin", "sticky"]), min_size=1, max_size=6))
def test_selected_protocol_is_the_one_most_members_prefer(prefs: list[list[str]]) -> None:
    h = Harness()
    tickets = [h.join(h.join_new(), protocols=[(n, n.encode()) for n in p]) for p in prefs]
    h.settle(tickets)
    votes: dict[str, int] = {}
    for p in prefs:
        votes[p[0]] = votes.get(p[0], 0) + 1
    best = max(votes.values())
    chosen = h.answered(tickets[0])["protocol_name"]  # type: ignore[index]
    assert votes.get(chosen) == best
    leader = next(h.answered(t) for t in tickets if h.answered(t)["members"])  # type: ignore[index]
    assert all(m["metadata"] == chosen.encode() for m in leader["members"])  # type: ignore[index]


def test_group_max_size_bounds_members_and_pending_ids() -> None:
    h = Harness(group_max_size=3)
    ids = [h.join_new() for _ in range(3)]
    flood = [h.join() for _ in range(100)]
    assert all(h.answered(t)["error_code"] == GROUP_MAX_SIZE_REACHED for t in flood)  # type: ignore[index]
    assert len(h.g.pending_members) == 3
    h.advance(SESSION)  # pending ids expire: memory is given back
    assert not h.g.pending_members and h.g.is_disposable()
    assert ids


def test_heartbeat_checks_follow_kafkas_order() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    assert h.heartbeat("ghost", 1) == UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, 7) == ILLEGAL_GENERATION
    assert h.heartbeat(a, 1) == 0
    assert h.leave(("ghost", None)) == [UNKNOWN_MEMBER_ID]


def test_sync_with_wrong_generation_or_protocol_is_refused() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    assert h.answered(h.sync(a, 5))["error_code"] == ILLEGAL_GENERATION  # type: ignore[index]
    t = Ticket("bad-proto")
    h._take(h.g.sync(h.now, a, None, 1, "connect", None, {}, t))
    assert h.answers[t]["error_code"] == INCONSISTENT


# ---- 10. expiry base (KIP-211) and snapshots ----------------------------------------------------


def test_offsets_expire_from_when_the_group_became_empty_never_mid_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    g = h.g
    assert g.offset_expiry_base_ms("t", 5) is None  # subscribed (unknown subscription bytes)
    h.join(a, protocols=[("range", b"x")])
    assert g.offset_expiry_base_ms("t", 5) is None  # mid-rebalance (KAFKA-13636)
    h.leave((a, None), (b, None))
    h.advance(0)
    assert g.state == EMPTY
    assert g.offset_expiry_base_ms("t", 5) == g.state_timestamp_ms == h.now
    simple = ClassicGroup("s", g.config, 0)
    assert simple.offset_expiry_base_ms("t", 5) == 5  # no protocol type: from the last commit


def test_unsubscribed_topics_of_a_stable_consumer_group_expire_from_their_last_commit() -> None:
    sub = subscription(["orders"])
    assert parse_subscription_topics(sub) == ["orders"]
    h = Harness()
    t = h.join(h.join_new(), protocols=[("range", sub)])
    h.advance(DELAY)
    mid = h.answered(t)["member_id"]  # type: ignore[index]
    h.sync(mid, 1, {mid: b""})
    assert h.g.offset_expiry_base_ms("orders", 5) is None
    assert h.g.offset_expiry_base_ms("old", 5) == 5
    assert h.g.is_subscribed_to_topic("orders") and not h.g.is_subscribed_to_topic("old")


def subscription(topics: list[str]) -> bytes:
    out = b"\x00\x01" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"  # null user data (v1 owned partitions would follow)


@pytest.mark.parametrize("members", [0, 2])
def test_snapshot_round_trips_through_the_coordinator_and_store(tmp_path: Path, members: int) -> None:
    h = Harness()
    if members:
        h.stable_group(members)
    else:
        h.g.protocol_type_ = "consumer"
    record = h.g.to_record()
    coord = GroupCoordinator(h.g.config, GroupStore(tmp_path), clock=lambda: 1234)
    back = ClassicGroup.from_record(record, coord)
    assert back.to_record() == record
    assert back.state == (STABLE if members else EMPTY)
    assert all(m.heartbeat_deadline_ms == 1234 + SESSION for m in back.members.values())
