"""KIP-848 consumer groups: a sans-I/O state machine driven by ConsumerGroupHeartbeat.

The broker computes the assignment (``broker.groups.assignors``); members only
heartbeat, report what they own, and are told what they may own.

Epochs. ``group_epoch`` counts changes that call for a new assignment: a member
joins, leaves or is fenced, a subscription or assignor changes, or a subscribed
topic appears or gains partitions. When it is ahead of ``assignment_epoch`` the
next heartbeat recomputes the target assignment of every member and the
assignment epoch catches up. Each member then reconciles towards its target:

- revoke before assign: a member that still owns partitions its target drops
  keeps its epoch, is told only ``owned ∩ target`` and waits in
  UNREVOKED_PARTITIONS until a heartbeat no longer lists them (or it is fenced
  when its rebalance timeout expires);
- a partition another member still holds (assigned or being revoked) is withheld
  and the member waits in UNRELEASED_PARTITIONS at the new epoch;
- otherwise the member is STABLE at the assignment epoch.

So no partition is ever assigned to two members at once: ``_owners`` maps every
partition held (assigned or pending revocation) to exactly one member.

Group states: Empty (no members), Assigning (group epoch ahead of assignment
epoch), Reconciling (some member not yet at the target), Stable.

Timers use the injected ``clock`` (milliseconds): a member without a heartbeat
for ``session_timeout_ms`` is removed (static members too, also after a
temporary leave with epoch -2), and so is a member stuck in
UNREVOKED_PARTITIONS past its rebalance timeout. :meth:`ConsumerGroup.expire`
runs them; every heartbeat runs it first, and the coordinator calls it
periodically for groups nobody heartbeats to.

Errors (``KafkaError`` with Kafka's code): INVALID_REQUEST 42 (request
validation, :func:`validate_heartbeat`), FENCED_MEMBER_EPOCH 110,
UNKNOWN_MEMBER_ID 25, GROUP_ID_NOT_FOUND 69 (decided by the coordinator),
UNRELEASED_INSTANCE_ID 111, FENCED_INSTANCE_ID 82, UNSUPPORTED_ASSIGNOR 112,
GROUP_MAX_SIZE_REACHED 81, INVALID_REGULAR_EXPRESSION 128; commits get
STALE_MEMBER_EPOCH 113 or UNSUPPORTED_VERSION 35 (OffsetCommit below v9).

An empty SubscribedTopicRegex means "no regex" (librdkafka 2.16 sends "" with
every subscription by names; Kafka's clients send it to drop a regex).

One deliberate difference from Kafka: a known member that heartbeats with epoch
0 (it rejoins after its own error handling, keeping its member id, as
librdkafka does) is taken as a fresh join of that member instead of being
fenced again, which would loop until its session expired.
"""

from __future__ import annotations

import base64
import functools
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import re2

from broker.groups.assignors import ASSIGNORS, Assignment, MemberSpec
from broker.groups.coordinator import Effects, register_group_type
from protocol import messages as msg
from protocol.errors import ErrorCode, KafkaError

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
INT_MAX = (1 << 31) - 1
RECORD_VERSION = 1
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad regex is its error, not a broker log line


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Any:
    """A subscription regex, compiled with RE2 (Kafka uses RE2/J): linear time, so no
    client pattern can stall the event loop; raises INVALID_REGULAR_EXPRESSION (128)."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        raise KafkaError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex {pattern} is invalid: {exc}") from None


class TopicImage(Protocol):
    """What the group needs to know of topics (``broker.partitions.PartitionManager`` is one)."""

    def partition_count(self, topic: str) -> int: ...
    def topic_id(self, topic: str) -> bytes: ...
    def topic_by_id(self, topic_id: bytes) -> str | None: ...
    def topic_names(self) -> list[str]: ...


@dataclass(frozen=True)
class ConsumerGroupSettings:
    """The ``group.consumer.*`` broker settings a group obeys."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = INT_MAX
    assignors: tuple[str, ...] = ("uniform", "range")

    @classmethod
    def from_config(cls, config: Any,
                    group_configs: Mapping[str, str] | None = None) -> ConsumerGroupSettings:
        """The broker's settings, overridden by the group's own configs (GROUP resource)."""
        from broker.groups.assignors import assignor_names

        own = group_configs or {}
        return cls(
            session_timeout_ms=int(own.get("consumer.session.timeout.ms",
                                           config.group_consumer_session_timeout_ms)),
            heartbeat_interval_ms=int(own.get("consumer.heartbeat.interval.ms",
                                              config.group_consumer_heartbeat_interval_ms)),
            max_size=config.group_consumer_max_size,
            assignors=tuple(assignor_names(config.group_consumer_assignors)),
        )


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat as the group sees it (owned partitions already by name)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: dict[str, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass
class HeartbeatResponse:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[str, frozenset[int]] | None  # None = unchanged (not sent)


@dataclass
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: dict[str, frozenset[int]] = field(default_factory=dict)
    pending_revocation: dict[str, frozenset[int]] = field(default_factory=dict)
    session_deadline_ms: float = 0.0
    revocation_deadline_ms: float | None = None


def new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()`` form (22 URL-safe base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def validate_heartbeat(req: HeartbeatRequest, group_id: str) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``: INVALID_REQUEST (42)."""

    def bad(message: str) -> KafkaError:
        return KafkaError(ErrorCode.INVALID_REQUEST, message)

    if not group_id:
        raise bad("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id:
        raise bad("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise bad("RackId can't be empty.")
    if req.server_assignor is not None and not req.server_assignor:
        raise bad("ServerAssignor can't be empty.")
    if req.api_version >= 1 and not req.member_id:
        raise bad("MemberId can't be empty.")
    if req.member_epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise bad("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or any(req.owned.values()):
            raise bad("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise bad("InstanceId can't be null.")
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        raise bad(f"MemberEpoch is invalid: {req.member_epoch}.")
    elif not req.member_id:
        raise bad("MemberId can't be empty.")


def _freeze(assignment: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def _is_subset(owned: Mapping[str, frozenset[int]] | None, assigned: Mapping[str, frozenset[int]]) -> bool:
    if owned is None:
        return False  # as Kafka: a lost-response retry must say what it owns
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


class ConsumerGroup:
    """One KIP-848 group; see the module docstring. Not thread-safe (one event loop)."""

    group_type = "consumer"

    def __init__(self, group_id: str, settings: ConsumerGroupSettings, image: TopicImage,
                 clock: Callable[[], float]) -> None:
        self.group_id = group_id
        self.settings = settings
        self.image = image
        self.clock = clock
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, dict[str, frozenset[int]]] = {}
        self.subscription_metadata: dict[str, int] = {}
        # Regexes whose topics count: a new one is resolved after the heartbeat that brought
        # it (Kafka resolves regexes asynchronously), one nobody uses is dropped.
        self.resolved_regexes: set[str] = set()
        self.created_ms = int(clock())
        self.dead = False
        # Bumped on every change worth persisting (not on a mere session refresh).
        self.version = 0
        self._owners: dict[tuple[str, int], str] = {}

    # ------------------------------------------------------------ registry contract

    def state_name(self) -> str:
        if self.dead:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch >= 0 and (m.member_epoch != self.assignment_epoch
                                        or m.state is not MemberState.STABLE):
                return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def is_disposable(self) -> bool:
        """Never had a member (a first join that failed): the coordinator may forget it."""
        return not self.members and self.group_epoch == 0

    def protocol_type(self) -> str:
        """What ListGroups shows (Kafka: "consumer" for KIP-848 groups)."""
        return "consumer"

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC test (Kafka's
        ``ConsumerGroup.isSubscribedToTopic``): a member subscribes to it by name or regex."""
        return any(topic in self._subscribed_topics(m) for m in self.members.values())

    def offset_expiry_base_ms(self, topic: str, commit_timestamp_ms: int) -> int | None:
        """KIP-211 for consumer groups: offsets of a topic some member subscribes to never
        expire; the others count from their last commit."""
        for m in self.members.values():
            if topic in self._subscribed_topics(m):
                return None
        return commit_timestamp_ms

    def on_timer(self, now_ms: int) -> Effects:
        """The coordinator's timer: expire sessions and revocations; persist if any went."""
        return Effects(persist=bool(self.expire()))

    def validate_offset_commit(self, member_id: str, generation_or_epoch: int,
                               instance_id: str | None, api_version: int) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: 0, 25, 35 or 113."""
        if generation_or_epoch < 0 and not self.members:
            return 0  # admin tools and manual commits to an empty group
        member = self.members.get(member_id)
        if member is None:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if api_version < 9:
            return int(ErrorCode.UNSUPPORTED_VERSION)
        if generation_or_epoch != member.member_epoch:
            return int(ErrorCode.STALE_MEMBER_EPOCH)
        return 0

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: 0, 25 or 113."""
        if member_id is None and member_epoch < 0:
            return 0
        member = self.members.get(member_id or "")
        if member is None:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if member_epoch != member.member_epoch:
            return int(ErrorCode.STALE_MEMBER_EPOCH)
        return 0

    # ------------------------------------------------------------ heartbeat

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        """One ConsumerGroupHeartbeat (already validated); raises KafkaError."""
        now = self.clock()
        self._check_assignor_and_regex(req)
        self.expire()
        self._resolve_regexes(prune_only=True)  # a regex nobody uses any more is forgotten
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            left = self._leave(req)
            self._resolve_regexes(prune_only=True)
            return left
        if req.member_epoch == JOIN_EPOCH:
            member = self._join(req)
        else:
            member = self._existing(req)
        old_assigned = dict(member.assigned)
        old_epoch = member.member_epoch
        bump = self._update_member(member, req)
        if self._refresh_subscription_metadata():
            bump = True
        if bump:
            self._bump()
        if self.group_epoch > self.assignment_epoch:
            self._compute_target()
        self._reconcile(member, req.owned, now)
        member.session_deadline_ms = now + self.settings.session_timeout_ms
        full = req.member_epoch == JOIN_EPOCH or (
            req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
            and req.owned is not None)
        changed = member.assigned != old_assigned
        if changed or member.member_epoch != old_epoch:
            self.version += 1
        self._resolve_regexes()
        return HeartbeatResponse(
            member.member_id, member.member_epoch, self.settings.heartbeat_interval_ms,
            dict(member.assigned) if full or changed else None,
        )

    def _check_assignor_and_regex(self, req: HeartbeatRequest) -> None:
        """UNSUPPORTED_ASSIGNOR (112) and INVALID_REGULAR_EXPRESSION (128), before anything changes."""
        if req.server_assignor is not None and req.server_assignor not in self.settings.assignors:
            raise KafkaError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {req.server_assignor} is not supported. Supported "
                             f"assignors: {', '.join(self.settings.assignors)}.")
        if req.subscribed_topic_regex:
            compile_regex(req.subscribed_topic_regex)

    def _join(self, req: HeartbeatRequest) -> Member:
        member_id = req.member_id or new_member_id()
        if req.instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                self._check_room(member_id)
                member = self.members[member_id] = Member(member_id)
                self.version += 1
            else:
                self._reset(member)  # a known member rejoining: see the module docstring
            return member
        holder_id = self.static_members.get(req.instance_id)
        if holder_id is None:
            self._check_room(member_id)
            member = self.members.get(member_id)
            if member is None:
                member = self.members[member_id] = Member(member_id)
            else:
                self._reset(member)
            member.instance_id = req.instance_id
            self.static_members[req.instance_id] = member_id
            self.version += 1
            return member
        holder = self.members[holder_id]
        if holder.member_epoch != STATIC_LEAVE_EPOCH:
            if holder_id == member_id:
                self._reset(holder)  # the same member rejoining
                return holder
            raise KafkaError(ErrorCode.UNRELEASED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {req.instance_id} cannot join "
                             f"the group because the instance id is owned by {holder_id} member.")
        # The static member comes back (usually under a new member id): it takes over the
        # old member's assignment at epoch 0 and reconciles without a new group epoch.
        del self.members[holder_id]
        for tp in [tp for tp, owner in self._owners.items() if owner == holder_id]:
            self._owners[tp] = member_id
        holder.member_id = member_id
        holder.member_epoch = holder.previous_member_epoch = 0
        holder.state = MemberState.STABLE
        self.members[member_id] = holder
        self.static_members[req.instance_id] = member_id
        if holder_id in self.target:
            self.target[member_id] = self.target.pop(holder_id)
        self.version += 1
        return holder

    def _reset(self, member: Member) -> None:
        self._set_assignment(member, {}, {})
        member.member_epoch = member.previous_member_epoch = 0
        member.state = MemberState.STABLE
        member.revocation_deadline_ms = None

    def _check_room(self, member_id: str) -> None:
        if len(self.members) >= self.settings.max_size and member_id not in self.members:
            raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.settings.max_size} members.")

    def _known(self, req: HeartbeatRequest) -> Member:
        """The member a heartbeat or leave names: UNKNOWN_MEMBER_ID (25) if none, and
        FENCED_INSTANCE_ID (82) if its instance id now belongs to another member."""
        if req.instance_id is None:
            member = self.members.get(req.member_id)
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {self.group_id}.")
        else:
            holder_id = self.static_members.get(req.instance_id)
            if holder_id is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if holder_id != req.member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {req.member_id} with instance id {req.instance_id} "
                                 f"was fenced by member {holder_id}.")
            member = self.members[holder_id]
        return member

    def _existing(self, req: HeartbeatRequest) -> Member:
        member = self._known(req)
        received, known = req.member_epoch, member.member_epoch
        if received > known or (received < known and (
                received != member.previous_member_epoch or not _is_subset(req.owned, member.assigned))):
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a {'greater' if received > known else 'smaller'} "
                             f"member epoch ({received}) than the one known by the group coordinator "
                             f"({known}). The member must abandon all its partitions and rejoin.")
        return member

    def _update_member(self, member: Member, req: HeartbeatRequest) -> bool:
        """Apply the request's non-null fields; True if the assignment must be recomputed."""
        bump = member.member_epoch == JOIN_EPOCH and member.member_id not in self.target
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            bump = True
        regex = req.subscribed_topic_regex or None  # "" clears a regex subscription
        if req.subscribed_topic_regex is not None and regex != member.subscribed_topic_regex:
            member.subscribed_topic_regex = regex
            bump = True
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                bump = True
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        member.client_id = req.client_id
        member.client_host = req.client_host
        if bump:
            self.version += 1
        return bump

    def _resolve_regexes(self, prune_only: bool = False) -> None:
        """Kafka resolves a new subscription regex in the background and bumps the group
        epoch when done, so the heartbeat that brings a regex is answered with the
        topics named literally and a later one adds the regex's topics (librdkafka's 0045
        expects those two steps). Here a regex counts from the next heartbeat on; one no
        member uses any more is forgotten (so subscribing to it again starts over)."""
        used = {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}
        self.resolved_regexes = (self.resolved_regexes & used) if prune_only else used

    def _subscribed_topics(self, member: Member) -> frozenset[str]:
        topics = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex is not None and regex in self.resolved_regexes:
            pattern = compile_regex(regex)
            topics.update(t for t in self.image.topic_names() if pattern.fullmatch(t))
        return frozenset(topics)

    def _refresh_subscription_metadata(self) -> bool:
        """Partition counts of every subscribed topic; True when they changed (new topic,
        more partitions, a topic deleted)."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            for t in self._subscribed_topics(m):
                if t not in counts:
                    n = self.image.partition_count(t)
                    if n > 0:
                        counts[t] = n
        if counts == self.subscription_metadata:
            return False
        self.subscription_metadata = counts
        return True

    def _bump(self) -> None:
        self.group_epoch += 1
        self.version += 1

    def _preferred_assignor(self) -> str:
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.settings.assignors[0]
        return max(votes, key=lambda a: (votes[a], -self.settings.assignors.index(a)))

    def _compute_target(self) -> None:
        specs = [
            MemberSpec(m.member_id, self._subscribed_topics(m), m.instance_id,
                       self.target.get(m.member_id, {}))
            for m in self.members.values()
        ]
        result: Mapping[str, Assignment] = ASSIGNORS[self._preferred_assignor()](
            specs, self.subscription_metadata)
        self.target = {mid: _freeze(a) for mid, a in result.items()}
        self.assignment_epoch = self.group_epoch
        self.version += 1

    # ------------------------------------------------------------ reconciliation

    def _set_assignment(self, member: Member, assigned: Mapping[str, frozenset[int]],
                        pending: Mapping[str, frozenset[int]]) -> None:
        for held in (member.assigned, member.pending_revocation):
            for t, ps in held.items():
                for p in ps:
                    if self._owners.get((t, p)) == member.member_id:
                        del self._owners[(t, p)]
        member.assigned = _freeze(assigned)
        member.pending_revocation = _freeze(pending)
        for held in (member.assigned, member.pending_revocation):
            for t, ps in held.items():
                for p in ps:
                    self._owners[(t, p)] = member.member_id

    def _reconcile(self, member: Member, owned: dict[str, frozenset[int]] | None, now: float) -> None:
        """Kafka's CurrentAssignmentBuilder: move the member one step towards its target."""
        target_epoch = self.assignment_epoch
        if member.state is MemberState.STABLE:
            if member.member_epoch == target_epoch:
                return
            self._next(member, member.member_epoch, owned, now)
        elif member.state is MemberState.UNREVOKED_PARTITIONS:
            if self._owns_any(owned, member.pending_revocation):
                return
            self._next(member, member.member_epoch + 1, owned, now)
        else:  # UNRELEASED_PARTITIONS: pick up partitions released meanwhile
            self._next(member, member.member_epoch, owned, now)

    @staticmethod
    def _owns_any(owned: Mapping[str, frozenset[int]] | None,
                  revoking: Mapping[str, frozenset[int]]) -> bool:
        if owned is None:
            return True  # not reported: assume it still holds them
        return any(ps & revoking.get(t, frozenset()) for t, ps in owned.items())

    def _next(self, member: Member, epoch: int, owned: dict[str, frozenset[int]] | None,
              now: float) -> None:
        target = self.target.get(member.member_id, {})
        assigned: dict[str, frozenset[int]] = {}
        revoking: dict[str, frozenset[int]] = {}
        adding: dict[str, frozenset[int]] = {}
        unreleased = False
        for t in set(target) | set(member.assigned):
            want = target.get(t, frozenset())
            have = member.assigned.get(t, frozenset())
            keep = have & want
            if keep:
                assigned[t] = keep
            if have - keep:
                revoking[t] = have - keep
            free = frozenset(p for p in want - keep if (t, p) not in self._owners)
            if len(free) != len(want - keep):
                unreleased = True
            if free:
                adding[t] = free
        if revoking and self._owns_any(owned, revoking):
            self._move(member, epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking)
            member.revocation_deadline_ms = now + member.rebalance_timeout_ms
            return
        for t, ps in adding.items():
            assigned[t] = assigned.get(t, frozenset()) | ps
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        self._move(member, self.assignment_epoch, state, assigned, {})
        member.revocation_deadline_ms = None

    def _move(self, member: Member, epoch: int, state: MemberState,
              assigned: dict[str, frozenset[int]], pending: dict[str, frozenset[int]]) -> None:
        if epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = epoch
        member.state = state
        self._set_assignment(member, assigned, pending)
        self.version += 1

    # ------------------------------------------------------------ leaving and timers

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResponse:
        member = self._known(req)
        if req.instance_id is not None and req.member_epoch == STATIC_LEAVE_EPOCH:
            # A temporary leave: the assignment waits for the same instance to return.
            member.member_epoch = STATIC_LEAVE_EPOCH
            member.revocation_deadline_ms = None
            self.version += 1
            return HeartbeatResponse(member.member_id, STATIC_LEAVE_EPOCH,
                                     self.settings.heartbeat_interval_ms, None)
        self.remove_member(member.member_id)
        return HeartbeatResponse(member.member_id, LEAVE_EPOCH, self.settings.heartbeat_interval_ms, None)

    def remove_member(self, member_id: str) -> None:
        """Fence a member: its partitions are released and a new assignment is due."""
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._set_assignment(member, {}, {})
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self._refresh_subscription_metadata()
        self._bump()

    def expire(self) -> list[str]:
        """Remove members whose session or revocation deadline passed; returns their ids."""
        now = self.clock()
        gone = [
            m.member_id for m in self.members.values()
            if now >= m.session_deadline_ms
            or (m.state is MemberState.UNREVOKED_PARTITIONS and m.revocation_deadline_ms is not None
                and now >= m.revocation_deadline_ms)
        ]
        for member_id in gone:
            self.remove_member(member_id)
        return gone

    def next_deadline_ms(self) -> int | None:
        """When :meth:`expire` next has something to do (None: no members)."""
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [m.revocation_deadline_ms for m in self.members.values()
                      if m.state is MemberState.UNREVOKED_PARTITIONS and m.revocation_deadline_ms is not None]
        return math.ceil(min(deadlines)) if deadlines else None

    # ------------------------------------------------------------ describe

    def describe(self) -> msg.ConsumerGroupDescribeResponseGroups:
        """The ConsumerGroupDescribe entry of this group (topic ids from the image)."""

        def current(assignment: Mapping[str, frozenset[int]]) -> msg.ConsumerGroupDescribeResponseGroupsMembersAssignment:
            return msg.ConsumerGroupDescribeResponseGroupsMembersAssignment(topic_partitions=[
                msg.ConsumerGroupDescribeResponseGroupsMembersAssignmentTopicPartitions(
                    topic_id=self.image.topic_id(t), topic_name=t, partitions=sorted(ps))
                for t, ps in sorted(assignment.items())
            ])

        def target(assignment: Mapping[str, frozenset[int]],
                   ) -> msg.ConsumerGroupDescribeResponseGroupsMembersTargetAssignment:
            return msg.ConsumerGroupDescribeResponseGroupsMembersTargetAssignment(topic_partitions=[
                msg.ConsumerGroupDescribeResponseGroupsMembersTargetAssignmentTopicPartitions(
                    topic_id=self.image.topic_id(t), topic_name=t, partitions=sorted(ps))
                for t, ps in sorted(assignment.items())
            ])

        return msg.ConsumerGroupDescribeResponseGroups(
            error_code=0,
            error_message=None,
            group_id=self.group_id,
            group_state=self.state_name(),
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor_name=self._preferred_assignor(),
            members=[
                msg.ConsumerGroupDescribeResponseGroupsMembers(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=current(m.assigned),
                    target_assignment=target(self.target.get(m.member_id, {})),
                    member_type=1,
                )
                for m in sorted(self.members.values(), key=lambda m: m.member_id)
            ],
            authorized_operations=-2147483648,
        )

    # ------------------------------------------------------------ persistence

    def to_record(self) -> dict[str, Any]:
        """A JSON-able snapshot: everything but the timers (restarted on load)."""

        def plain(a: Mapping[str, frozenset[int]]) -> dict[str, list[int]]:
            return {t: sorted(ps) for t, ps in sorted(a.items())}

        return {
            "version": RECORD_VERSION,
            "type": self.group_type,
            "group_id": self.group_id,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "created_ms": self.created_ms,
            "subscription_metadata": dict(sorted(self.subscription_metadata.items())),
            "members": [
                {
                    "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
                    "state": m.state.value, "rebalance_timeout_ms": m.rebalance_timeout_ms,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "server_assignor": m.server_assignor,
                    "assigned": plain(m.assigned), "pending_revocation": plain(m.pending_revocation),
                    "target": plain(self.target.get(m.member_id, {})),
                }
                for m in self.members.values()
            ],
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any], settings: ConsumerGroupSettings,
                    image: TopicImage, clock: Callable[[], float]) -> ConsumerGroup:
        """Rebuild a group from :meth:`to_record`; every member gets a fresh session (as
        Kafka restarts the timers when it loads a group)."""
        if record.get("version") != RECORD_VERSION or record.get("type") != cls.group_type:
            raise ValueError(f"not a version {RECORD_VERSION} consumer group record")
        group = cls(str(record["group_id"]), settings, image, clock)
        group.group_epoch = int(record["group_epoch"])
        group.assignment_epoch = int(record["assignment_epoch"])
        group.created_ms = int(record.get("created_ms", group.created_ms))
        group.subscription_metadata = {str(t): int(n) for t, n in record["subscription_metadata"].items()}
        now = clock()
        for r in record["members"]:
            m = Member(
                member_id=str(r["member_id"]), instance_id=r["instance_id"], rack_id=r["rack_id"],
                client_id=r["client_id"], client_host=r["client_host"],
                member_epoch=int(r["member_epoch"]), previous_member_epoch=int(r["previous_member_epoch"]),
                state=MemberState(r["state"]), rebalance_timeout_ms=int(r["rebalance_timeout_ms"]),
                subscribed_topic_names=tuple(r["subscribed_topic_names"]),
                subscribed_topic_regex=r["subscribed_topic_regex"], server_assignor=r["server_assignor"],
                session_deadline_ms=now + settings.session_timeout_ms,
            )
            group.members[m.member_id] = m
            group._set_assignment(m, _freeze(r["assigned"]), _freeze(r["pending_revocation"]))
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                m.revocation_deadline_ms = now + m.rebalance_timeout_ms
            if m.instance_id is not None:
                group.static_members[m.instance_id] = m.member_id
            group.target[m.member_id] = _freeze(r["target"])
        group._resolve_regexes()  # resolved before the restart
        return group


def consumer_group(coordinator: Any, group_id: str, *, create: bool) -> ConsumerGroup:
    """The KIP-848 group ``group_id`` from the coordinator's registry, created by a join.

    Raises GROUP_ID_NOT_FOUND (69) for a missing group when not joining, and for an id
    held by a classic group with members; a classic group without members (a simple
    group that only holds offsets) makes way for the consumer group and keeps its offsets.
    """
    group = coordinator.group(group_id)
    if isinstance(group, ConsumerGroup):
        return group
    if group is None and not create:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    if group is not None:
        if not create or not group.is_empty() or getattr(group, "pending_members", None):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        coordinator.remove(group_id)
    settings = ConsumerGroupSettings.from_config(coordinator.config,
                                                 coordinator.configs.values(group_id))
    new = ConsumerGroup(group_id, settings, coordinator.topics, coordinator.clock)
    coordinator.add(new)
    return new


def _from_record(record: dict[str, Any], coordinator: Any) -> ConsumerGroup:
    settings = ConsumerGroupSettings.from_config(coordinator.config,
                                                 coordinator.configs.values(str(record["group_id"])))
    return ConsumerGroup.from_record(record, settings,
                                     coordinator.topics, coordinator.clock)


register_group_type(ConsumerGroup.group_type, _from_record)
