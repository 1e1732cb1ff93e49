"""The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as a pure state machine.

One :class:`ClassicGroup` per group id. Every input is a method call carrying
``now_ms``; every output is an error code or an :class:`Effects` (answers to
parked requests, keyed by opaque tickets, and whether to persist). No sockets,
no clock, no asyncio: a unit test drives it with numbers. Kafka's semantics
(``GroupMetadataManager.classicGroup*``, ``ClassicGroup``) are followed.

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, back to
PreparingRebalance on any membership or metadata change, Empty when the last
member goes; Dead once deleted.

Invariants:
- A JoinGroup is parked (its ticket kept) until the join phase completes; a
  SyncGroup from a follower is parked until the leader's SyncGroup arrives. Every
  parked ticket is answered exactly once (with an error if its member goes).
- The join phase from Empty waits ``group.initial.rebalance.delay.ms``, extended by
  one delay per new arrival while the rebalance timeout allows, and never finishes
  early; later join phases finish as soon as every member (and no pending
  member) has rejoined, else at the rebalance timeout.
- A dynamic member joining with an empty id at v4+ gets MEMBER_ID_REQUIRED and a
  pending id; pending ids block join completion until they join or expire after
  their session timeout (KAFKA-7909). Pending plus real members never exceed
  ``group.max.size``, so a client flooding JoinGroup holds bounded memory.
- The generation rises by one at each join completion. Only the leader's JoinGroup
  answer lists the members.
- Members' session timers are reset by heartbeats, joins, syncs and commits; a
  member awaiting a join or sync answer is not expired, except a new member whose
  JoinGroup has been parked for 5 minutes (KAFKA-7610). Static members expire too.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.groups.coordinator import CLASSIC, Effects, register_group_type
from protocol import messages as msg
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.groups.coordinator import GroupCoordinator

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's classicGroupNewMemberJoinTimeoutMs
CONSUMER_PROTOCOL_TYPE = "consumer"
NONE = int(ErrorCode.NONE)
_MAX_TIMER_ROUNDS = 64


@dataclass
class MemberSpec:
    """What a JoinGroup says about its member (and what a member keeps of it)."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


@dataclass
class JoinRequest(MemberSpec):
    """One JoinGroup request's fields (the rebalance timeout already defaulted for v0)."""

    api_version: int = 9
    reason: str | None = None


@dataclass
class ClassicMember(MemberSpec):
    assignment: bytes = b""
    is_new: bool = False
    awaiting_join: bool = False
    join_ticket: Any = None
    join_version: int = 0
    awaiting_sync: bool = False
    sync_ticket: Any = None
    heartbeat_deadline_ms: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str | None:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        return None


@dataclass
class ClassicGroup:
    """One classic group: membership, generation, protocol and timers."""

    group_id: str
    config: BrokerConfig
    state_timestamp_ms: int
    group_type: str = CLASSIC
    state: str = EMPTY
    previous_state: str = EMPTY
    generation_id: int = 0
    protocol_type_: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    pending_members: dict[str, int] = field(default_factory=dict)  # id -> expiry
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_sync: set[str] = field(default_factory=set)
    join_deadline_ms: int | None = None
    initial_delay: tuple[int, int] | None = None  # (delay, remaining) of the initial rebalance
    new_member_added: bool = False
    sync_deadline_ms: int | None = None
    sync_generation: int = -1

    # ---- the shared Group contract ------------------------------------------------

    def protocol_type(self) -> str:
        return self.protocol_type_ or ""

    def state_name(self) -> str:
        return self.state

    def is_empty(self) -> bool:
        return self.state in (EMPTY, DEAD)

    def is_disposable(self) -> bool:
        """Never used by anyone: no members, no pending ids, never completed a join."""
        return self.state == EMPTY and not self.pending_members and self.generation_id == 0

    def validate_offset_commit(self, member_id: str, generation_or_epoch: int,
                               instance_id: str | None, api_version: int) -> int:
        """``ClassicGroup.validateOffsetCommit``: -1 on Empty is an admin/simple commit."""
        if self.state == DEAD:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_or_epoch < 0 and self.state == EMPTY:
            return NONE
        if generation_or_epoch >= 0 or member_id or instance_id is not None:
            err = self._validate_member(member_id, instance_id)
            if err:
                return err
            if generation_or_epoch != self.generation_id:
                return int(ErrorCode.ILLEGAL_GENERATION)
        elif self.state != EMPTY:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state == COMPLETING_REBALANCE:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        return NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        return int(ErrorCode.GROUP_ID_NOT_FOUND) if self.state == DEAD else NONE

    def offset_expiry_base_ms(self, topic: str, commit_timestamp_ms: int) -> int | None:
        """KIP-211 (``ClassicGroup.offsetExpirationCondition``)."""
        if self.protocol_type_ is None:
            return commit_timestamp_ms  # a simple group: from the last commit
        if self.state == EMPTY:
            return self.state_timestamp_ms  # from when the group became Empty
        if self.state == STABLE and self.protocol_type_ == CONSUMER_PROTOCOL_TYPE:
            subscribed = self.subscribed_topics()
            if subscribed is not None and topic not in subscribed:
                return commit_timestamp_ms
        return None  # mid-rebalance or subscribed: never (KAFKA-13636)

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (self.join_deadline_ms, self.sync_deadline_ms) if d is not None]
        deadlines.extend(self.pending_members.values())
        for m in self.members.values():
            if m.is_new or not (m.awaiting_join or m.awaiting_sync):
                deadlines.append(m.heartbeat_deadline_ms)
        return min(deadlines) if deadlines else None

    def on_timer(self, now_ms: int) -> Effects:
        """Fire every timer due at ``now_ms`` (repeatedly: one may arm another that is due)."""
        fx = Effects()
        for _ in range(_MAX_TIMER_ROUNDS):
            fired = False
            if self.join_deadline_ms is not None and now_ms >= self.join_deadline_ms:
                fired = True
                self.join_deadline_ms = None
                if self.initial_delay is not None:
                    self._try_complete_initial_rebalance(now_ms, fx)
                else:
                    self._complete_join(now_ms, fx)
            if self.sync_deadline_ms is not None and now_ms >= self.sync_deadline_ms:
                fired = True
                self.sync_deadline_ms = None
                self._expire_pending_sync(now_ms, fx)
            for mid, deadline in list(self.pending_members.items()):
                if now_ms >= deadline:
                    fired = True
                    del self.pending_members[mid]
                    if self.state == PREPARING_REBALANCE:
                        self._maybe_complete_join(now_ms, fx)
            for m in list(self.members.values()):
                if m.member_id not in self.members:
                    continue
                if now_ms >= m.heartbeat_deadline_ms and (m.is_new or not (m.awaiting_join or m.awaiting_sync)):
                    fired = True
                    self._remove_member(now_ms, m, fx)
            if not fired:
                break
        return fx

    def to_record(self) -> dict[str, Any]:
        """The durable snapshot (Kafka's GroupMetadataValue v3, as JSON)."""
        return {
            "type": CLASSIC,
            "group_id": self.group_id,
            "protocol_type": self.protocol_type_,
            "generation": self.generation_id,
            "protocol": self.protocol_name,
            "leader": self.leader_id,
            "state_timestamp": self.state_timestamp_ms,
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "session_timeout": m.session_timeout_ms,
                    "rebalance_timeout": m.rebalance_timeout_ms,
                    "subscription": _b64(m.metadata(self.protocol_name)),
                    "assignment": _b64(m.assignment),
                }
                for m in self.members.values()
            ],
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], coordinator: GroupCoordinator) -> ClassicGroup:
        """Rebuild a group from its snapshot: Stable with its members (whose sessions start
        now), or Empty. Kafka loads a group the same way after a coordinator move."""
        now = coordinator.clock()
        g = cls(str(record["group_id"]), coordinator.config, int(record["state_timestamp"]))
        g.protocol_type_ = record["protocol_type"]
        g.generation_id = int(record["generation"])
        g.protocol_name = record["protocol"]
        g.leader_id = record["leader"]
        for rm in record["members"]:
            m = ClassicMember(
                member_id=str(rm["member_id"]), instance_id=rm["instance_id"],
                client_id=str(rm["client_id"]), client_host=str(rm["client_host"]),
                session_timeout_ms=int(rm["session_timeout"]),
                rebalance_timeout_ms=int(rm["rebalance_timeout"]),
                protocol_type=g.protocol_type_ or "",
                protocols=[(g.protocol_name or "", _unb64(rm["subscription"]))],
                assignment=_unb64(rm["assignment"]),
            )
            m.heartbeat_deadline_ms = now + m.session_timeout_ms
            g.members[m.member_id] = m
            if m.instance_id is not None:
                g.static_members[m.instance_id] = m.member_id
        g.state = STABLE if g.members else EMPTY
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members), None)
        return g

    # ---- queries -------------------------------------------------------------------

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (ConsumerProtocolSubscription); None if unknown."""
        if self.protocol_type_ != CONSUMER_PROTOCOL_TYPE or not self.members:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC test (unknown subscriptions count as yes)."""
        if not self.members:
            return False
        subscribed = self.subscribed_topics()
        return subscribed is None or topic in subscribed

    def describe_members(self) -> list[msg.DescribeGroupsResponseGroupsMembers]:
        """DescribeGroups' members: metadata and assignment only once Stable, as Kafka."""
        stable = self.state == STABLE
        return [
            msg.DescribeGroupsResponseGroupsMembers(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(self.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in self.members.values()
        ]

    # ---- JoinGroup ---------------------------------------------------------------------

    def join(self, now_ms: int, req: JoinRequest, ticket: Any) -> Effects:
        """A JoinGroup: answered now, or parked until the join phase completes."""
        fx = Effects()
        if self.state == DEAD:
            fx.reply(ticket, _join_error(req.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return fx
        if not self._supports_protocols(req.protocol_type, req.protocols):
            fx.reply(ticket, _join_error(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return fx
        if not self._accepts_joining_member(req.member_id, req.instance_id):
            fx.reply(ticket, _join_error("", ErrorCode.GROUP_MAX_SIZE_REACHED))
            return fx
        if not req.member_id:
            new_id = f"{req.instance_id or req.client_id}-{uuid.uuid4()}"
            if req.instance_id is not None:
                old_id = self.static_members.get(req.instance_id)
                if old_id is None or old_id not in self.members:
                    self._add_member_and_rebalance(now_ms, req, new_id, ticket, fx)
                else:
                    self._replace_static_member(now_ms, req, old_id, new_id, ticket, fx)
            elif req.api_version >= 4:
                # KIP-394: hand out an id first; it must come back (and blocks the join) or expire.
                self.pending_members[new_id] = now_ms + req.session_timeout_ms
                fx.reply(ticket, _join_error(new_id, ErrorCode.MEMBER_ID_REQUIRED))
            else:
                self._add_member_and_rebalance(now_ms, req, new_id, ticket, fx)
            return fx
        if req.member_id in self.pending_members:
            if req.instance_id is not None:
                fx.reply(ticket, _join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return fx
            del self.pending_members[req.member_id]
            self._add_member_and_rebalance(now_ms, req, req.member_id, ticket, fx)
            return fx
        err = self._validate_member(req.member_id, req.instance_id)
        if err:
            fx.reply(ticket, _join_error(req.member_id, err))
            return fx
        member = self.members[req.member_id]
        if self.state == PREPARING_REBALANCE:
            self._update_member_and_rebalance(now_ms, member, req, ticket, fx)
        elif self.state == COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # It lost the JoinGroup answer: the current generation again.
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                fx.reply(ticket, self._join_answer(member, member.member_id == self.leader_id))
            else:
                self._update_member_and_rebalance(now_ms, member, req, ticket, fx)
        elif self.state == STABLE:
            if member.member_id == self.leader_id or not member.matches(req.protocols):
                self._update_member_and_rebalance(now_ms, member, req, ticket, fx)
            else:
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                fx.reply(ticket, self._join_answer(member, False))
        else:
            fx.reply(ticket, _join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        return fx

    def _supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if self.state == EMPTY:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type_:
            return False
        names = {n for n, _ in protocols}
        return any(all(n in {p for p, _ in m.protocols} for m in self.members.values()) for n in names)

    def _accepts_joining_member(self, member_id: str, instance_id: str | None) -> bool:
        limit = self.config.group_max_size
        if member_id and (member_id in self.members or member_id in self.pending_members):
            return True
        if instance_id is not None and instance_id in self.static_members:
            return True
        if self.state == PREPARING_REBALANCE:
            awaiting = sum(1 for m in self.members.values() if m.awaiting_join)
            return awaiting + len(self.pending_members) < limit
        return len(self.members) + len(self.pending_members) < limit

    def _add_member_and_rebalance(self, now_ms: int, req: JoinRequest, member_id: str,
                                  ticket: Any, fx: Effects) -> None:
        member = ClassicMember(
            member_id=member_id, instance_id=req.instance_id, client_id=req.client_id,
            client_host=req.client_host, session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms, protocol_type=req.protocol_type,
            protocols=list(req.protocols), is_new=True, awaiting_join=True, join_ticket=ticket,
            join_version=req.api_version,
            heartbeat_deadline_ms=now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
        )
        if self.state == PREPARING_REBALANCE and self.previous_state == EMPTY:
            self.new_member_added = True
        if not self.members:
            self.protocol_type_ = req.protocol_type
        self.members[member_id] = member
        if req.instance_id is not None:
            self.static_members[req.instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        self._prepare_rebalance_or_complete_join(now_ms, fx)

    def _update_member_and_rebalance(self, now_ms: int, member: ClassicMember, req: JoinRequest,
                                     ticket: Any, fx: Effects) -> None:
        if member.awaiting_join and member.join_ticket is not ticket:
            # A retried JoinGroup replaces the parked one, which is answered as Kafka does.
            fx.reply(member.join_ticket, _join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.awaiting_join = True
        member.join_ticket = ticket
        member.join_version = req.api_version
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        self._prepare_rebalance_or_complete_join(now_ms, fx)

    def _replace_static_member(self, now_ms: int, req: JoinRequest, old_id: str, new_id: str,
                               ticket: Any, fx: Effects) -> None:
        """A static member came back with an empty id: it takes over its old identity."""
        old = self.members.pop(old_id)
        if old.awaiting_join:
            fx.reply(old.join_ticket, _join_error(old_id, ErrorCode.FENCED_INSTANCE_ID))
        if old.awaiting_sync:
            fx.reply(old.sync_ticket, _sync_error(ErrorCode.FENCED_INSTANCE_ID))
        old.awaiting_join = old.awaiting_sync = False
        old.join_ticket = old.sync_ticket = None
        old.member_id = new_id
        self.members[new_id] = old
        self.static_members[req.instance_id or ""] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        old.heartbeat_deadline_ms = now_ms + req.session_timeout_ms
        if self.state == STABLE:
            before = self.protocol_name
            saved = (old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms)
            old.protocols = list(req.protocols)
            old.rebalance_timeout_ms = req.rebalance_timeout_ms
            old.session_timeout_ms = req.session_timeout_ms
            if self._select_protocol() != before:
                old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms = saved
                self._update_member_and_rebalance(now_ms, old, req, ticket, fx)
                return
            is_leader = new_id == self.leader_id
            answer = self._join_answer(old, is_leader)
            answer.skip_assignment = is_leader
            fx.persist = True
            fx.reply(ticket, answer)
        else:  # PreparingRebalance or CompletingRebalance (KAFKA-9801): rebalance
            self._update_member_and_rebalance(now_ms, old, req, ticket, fx)

    def _prepare_rebalance_or_complete_join(self, now_ms: int, fx: Effects) -> None:
        if self.state != PREPARING_REBALANCE:
            self._prepare_rebalance(now_ms, fx)
        # Kafka's tryCompleteElseWatch: a join phase every member has already joined (the
        # only member rejoining, e.g. a leader whose metadata changed) completes now, not
        # at the rebalance timeout (5 min for kafka-python) while the consumer stalls.
        self._maybe_complete_join(now_ms, fx)

    def _prepare_rebalance(self, now_ms: int, fx: Effects) -> None:
        if self.state == COMPLETING_REBALANCE:
            self._reset_assignments_with_error(ErrorCode.REBALANCE_IN_PROGRESS, fx)
        self.sync_deadline_ms = None
        initial = self.state == EMPTY
        self._transition(PREPARING_REBALANCE, now_ms)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(self.rebalance_timeout_ms() - delay, 0)
            self.initial_delay = (delay, remaining)
            self.new_member_added = False
            self.join_deadline_ms = now_ms + delay
        else:
            self.initial_delay = None
            self.join_deadline_ms = now_ms + self.rebalance_timeout_ms()

    def _try_complete_initial_rebalance(self, now_ms: int, fx: Effects) -> None:
        assert self.initial_delay is not None
        delay, remaining = self.initial_delay
        if self.new_member_added and remaining != 0:
            self.new_member_added = False
            new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            self.initial_delay = (new_delay, max(remaining - delay, 0))
            self.join_deadline_ms = now_ms + new_delay
        else:
            self._complete_join(now_ms, fx)

    def _all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def _maybe_complete_join(self, now_ms: int, fx: Effects) -> None:
        if (self.state == PREPARING_REBALANCE and self._all_members_joined()
                and self.previous_state != EMPTY):
            self._complete_join(now_ms, fx)

    def _complete_join(self, now_ms: int, fx: Effects) -> None:
        if self.state != PREPARING_REBALANCE:
            return
        self.join_deadline_ms = None
        self.initial_delay = None
        for m in list(self.members.values()):
            if not m.awaiting_join and m.instance_id is None:
                self._drop_member(m, fx)
        if self.members and not self._elect_joined_leader():
            # Nobody rejoined: wait another rebalance timeout for sessions to expire them.
            self.join_deadline_ms = now_ms + self.rebalance_timeout_ms()
            return
        self.generation_id += 1
        self.pending_sync.clear()
        if not self.members:
            self.protocol_name = None
            self._transition(EMPTY, now_ms)
            fx.persist = True
            return
        self.protocol_name = self._select_protocol()
        self._transition(COMPLETING_REBALANCE, now_ms)
        for m in self.members.values():
            if not m.awaiting_join:  # a static member that did not rejoin
                continue
            fx.reply(m.join_ticket, self._join_answer(m, m.member_id == self.leader_id))
            m.awaiting_join = False
            m.join_ticket = None
            m.is_new = False
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
            self.pending_sync.add(m.member_id)
        self.sync_generation = self.generation_id
        self.sync_deadline_ms = now_ms + self.rebalance_timeout_ms()

    def _elect_joined_leader(self) -> bool:
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def _select_protocol(self) -> str | None:
        if not self.members:
            return None
        members = list(self.members.values())
        candidates = {n for n, _ in members[0].protocols}
        for m in members[1:]:
            candidates &= {n for n, _ in m.protocols}
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for m in members:
            v = m.vote(candidates)
            if v is not None:
                votes[v] = votes.get(v, 0) + 1
        # Most votes wins; ties go to the first member's preference order.
        order = {n: i for i, (n, _) in enumerate(members[0].protocols)}
        return max(votes, key=lambda n: (votes[n], -order.get(n, 0)))

    def _join_answer(self, member: ClassicMember, leader: bool) -> msg.JoinGroupResponse:
        return msg.JoinGroupResponse(
            error_code=NONE,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type_,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            skip_assignment=False,
            member_id=member.member_id,
            members=[
                msg.JoinGroupResponseMembers(member_id=m.member_id, group_instance_id=m.instance_id,
                                             metadata=m.metadata(self.protocol_name))
                for m in self.members.values()
            ] if leader else [],
        )

    # ---- SyncGroup ---------------------------------------------------------------------

    def sync(self, now_ms: int, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes], ticket: Any) -> Effects:
        """A SyncGroup: the leader's completes the generation; followers wait for it."""
        fx = Effects()
        if self.state == DEAD:
            fx.reply(ticket, _sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return fx
        err = self._validate_member(member_id, instance_id)
        if not err and generation_id != self.generation_id:
            err = int(ErrorCode.ILLEGAL_GENERATION)
        if not err and (_inconsistent(protocol_type, self.protocol_type_)
                        or _inconsistent(protocol_name, self.protocol_name)):
            err = int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if err:
            fx.reply(ticket, _sync_error(err))
            return fx
        member = self.members[member_id]
        if self.state == PREPARING_REBALANCE:
            fx.reply(ticket, _sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        elif self.state == COMPLETING_REBALANCE:
            if member.awaiting_sync and member.sync_ticket is not ticket:
                fx.reply(member.sync_ticket, _sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = True
            member.sync_ticket = ticket
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            self.pending_sync.discard(member_id)
            if member_id == self.leader_id:
                for m in self.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                self._transition(STABLE, now_ms)
                fx.persist = True
                for m in self.members.values():
                    if m.awaiting_sync:
                        fx.reply(m.sync_ticket, self._sync_answer(m.assignment))
                        m.awaiting_sync = False
                        m.sync_ticket = None
        elif self.state == STABLE:
            self.pending_sync.discard(member_id)
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            fx.reply(ticket, self._sync_answer(member.assignment))
        else:
            fx.reply(ticket, _sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        return fx

    def _sync_answer(self, assignment: bytes) -> msg.SyncGroupResponse:
        return msg.SyncGroupResponse(error_code=NONE, protocol_type=self.protocol_type_,
                                     protocol_name=self.protocol_name, assignment=assignment)

    def _reset_assignments_with_error(self, error: ErrorCode, fx: Effects) -> None:
        for m in self.members.values():
            m.assignment = b""
            if m.awaiting_sync:
                fx.reply(m.sync_ticket, _sync_error(error))
                m.awaiting_sync = False
                m.sync_ticket = None

    def _expire_pending_sync(self, now_ms: int, fx: Effects) -> None:
        """KAFKA-12890: members that never sent SyncGroup within the rebalance timeout go."""
        if self.sync_generation != self.generation_id or self.state not in (COMPLETING_REBALANCE, STABLE):
            return
        if not self.pending_sync:
            return
        for mid in list(self.pending_sync):
            m = self.members.get(mid)
            if m is not None:
                self._drop_member(m, fx)
        self.pending_sync.clear()
        self._prepare_rebalance(now_ms, fx)

    # ---- Heartbeat, LeaveGroup, commits -----------------------------------------------

    def heartbeat(self, now_ms: int, member_id: str, instance_id: str | None, generation_id: int) -> int:
        """A Heartbeat: its error code, in Kafka's order of checks."""
        if self.state == DEAD:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        err = self._validate_member(member_id, instance_id)
        if err:
            return err
        if generation_id != self.generation_id:
            return int(ErrorCode.ILLEGAL_GENERATION)
        if self.state == EMPTY:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        member = self.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state == PREPARING_REBALANCE:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        return NONE

    def leave(self, now_ms: int, leaving: list[tuple[str, str | None]]) -> tuple[list[int], Effects]:
        """LeaveGroup for (member id, instance id) pairs: per-member error codes."""
        fx = Effects()
        codes: list[int] = []
        for member_id, instance_id in leaving:
            if self.state == DEAD:
                codes.append(int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                continue
            if not member_id and instance_id is not None:
                found = self.static_members.get(instance_id)
                if found is None or found not in self.members:
                    codes.append(int(ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                member_id = found
            elif member_id in self.pending_members and instance_id is None:
                del self.pending_members[member_id]
                codes.append(NONE)
                if self.state == PREPARING_REBALANCE:
                    self._maybe_complete_join(now_ms, fx)
                continue
            err = self._validate_member(member_id, instance_id)
            if err:
                codes.append(err)
                continue
            self._remove_member(now_ms, self.members[member_id], fx)
            codes.append(NONE)
        return codes, fx

    def touch(self, now_ms: int, member_id: str) -> None:
        """An accepted commit from a member counts as a heartbeat (Stable/PreparingRebalance)."""
        m = self.members.get(member_id)
        if m is not None and self.state in (STABLE, PREPARING_REBALANCE):
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms

    def release_parked(self, code: int) -> Effects:
        """Answer every parked JoinGroup/SyncGroup with ``code`` (the coordinator unloads)."""
        fx = Effects()
        for m in self.members.values():
            if m.awaiting_join:
                fx.reply(m.join_ticket, _join_error(m.member_id, code))
                m.awaiting_join = False
                m.join_ticket = None
            if m.awaiting_sync:
                fx.reply(m.sync_ticket, _sync_error(code))
                m.awaiting_sync = False
                m.sync_ticket = None
        return fx

    def mark_dead(self, now_ms: int) -> Effects:
        """Deleted: every parked request is answered with COORDINATOR_NOT_AVAILABLE."""
        fx = Effects()
        for m in self.members.values():
            if m.awaiting_join:
                fx.reply(m.join_ticket, _join_error(m.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            if m.awaiting_sync:
                fx.reply(m.sync_ticket, _sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        self.members.clear()
        self.pending_members.clear()
        self.static_members.clear()
        self.join_deadline_ms = self.sync_deadline_ms = None
        self._transition(DEAD, now_ms)
        return fx

    # ---- membership internals ------------------------------------------------------------

    def _validate_member(self, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None or existing not in self.members:
                return int(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                return int(ErrorCode.FENCED_INSTANCE_ID)
            return NONE
        if member_id not in self.members:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        return NONE

    def _drop_member(self, m: ClassicMember, fx: Effects) -> None:
        """Remove a member, answering its parked requests; no state change."""
        if m.awaiting_join:
            fx.reply(m.join_ticket, _join_error("", ErrorCode.UNKNOWN_MEMBER_ID))
        if m.awaiting_sync:
            fx.reply(m.sync_ticket, _sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        m.awaiting_join = m.awaiting_sync = False
        self.members.pop(m.member_id, None)
        if m.instance_id is not None and self.static_members.get(m.instance_id) == m.member_id:
            del self.static_members[m.instance_id]
        self.pending_sync.discard(m.member_id)
        if self.leader_id == m.member_id:
            self.leader_id = next(iter(self.members), None)

    def _remove_member(self, now_ms: int, m: ClassicMember, fx: Effects) -> None:
        """Remove a member and move the group on (Kafka's removeMemberAndUpdateClassicGroup)."""
        self._drop_member(m, fx)
        if self.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms, fx)
        elif self.state == PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms, fx)

    def _transition(self, state: str, now_ms: int) -> None:
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms


def _inconsistent(given: str | None, current: str | None) -> bool:
    return given is not None and current is not None and given != current


def _join_error(member_id: str, code: ErrorCode | int) -> msg.JoinGroupResponse:
    return msg.JoinGroupResponse(error_code=int(code), generation_id=-1, protocol_type=None,
                                 protocol_name=None, leader="", skip_assignment=False,
                                 member_id=member_id, members=[])


def _sync_error(code: ErrorCode | int) -> msg.SyncGroupResponse:
    return msg.SyncGroupResponse(error_code=int(code), protocol_type=None, protocol_name=None,
                                 assignment=b"")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topic names of a ConsumerProtocolSubscription (any version: the topics come
    first, after the int16 version); None when the bytes do not parse."""
    try:
        pos = 2
        (n,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        if n < 0 or n > len(metadata):
            return None
        topics = []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if ln < 0 or pos + ln > len(metadata):
                return None
            topics.append(metadata[pos:pos + ln].decode())
            pos += ln
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def _from_record(record: dict[str, Any], coordinator: GroupCoordinator) -> ClassicGroup:
    return ClassicGroup.from_record(record, coordinator)


register_group_type(CLASSIC, _from_record)
