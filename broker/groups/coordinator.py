"""The group coordinator: one registry of groups, their timers and their durable state.

Handlers reach it as ``ctx.broker.groups``. A single node coordinates every group
(FindCoordinator always names this broker).

Contract between group types (classic here, KIP-848 ``consumer`` in
``broker/groups/consumer.py``):
- A group id maps to exactly one group object, of one type. Both types implement
  :class:`Group`: ``group_id``, ``group_type`` (``"classic"`` / ``"consumer"``),
  ``protocol_type()`` and ``state_name()`` for ListGroups, ``is_empty()``,
  ``validate_offset_commit(member_id, generation_or_epoch, instance_id, api_version)``
  and ``validate_offset_fetch(member_id, member_epoch)`` returning an error code
  (0 = accepted), ``offset_expiry_base_ms(topic, commit_timestamp_ms)`` (KIP-211;
  None = never expires now), ``next_deadline_ms()`` / ``on_timer(now_ms)`` for its
  timers, and ``to_record()``: a JSON-able snapshot whose ``"type"`` key selects the
  ``from_record(record, coordinator)`` factory registered with :func:`register_group_type`
  (the coordinator adds ``"group_id"`` to the record it passes).
- The wrong type for an API: a classic JoinGroup/SyncGroup/Heartbeat/LeaveGroup to a
  consumer group answers INCONSISTENT_GROUP_PROTOCOL (23) (:meth:`GroupCoordinator.classic`);
  ConsumerGroupDescribe of a classic group answers GROUP_ID_NOT_FOUND (69);
  DescribeGroups treats a consumer group as not found.
- Optional hooks, used when a type has them: ``touch(now_ms, member_id)`` (an accepted
  commit renews the member's session), ``is_subscribed_to_topic(topic)`` (OffsetDelete's
  GROUP_SUBSCRIBED_TO_TOPIC), ``is_disposable()`` (never used and no offsets: forgotten
  at once), ``release_parked(code) -> Effects`` (answer parked requests at shutdown),
  ``pending_members`` (truthy: the empty group is not swept yet).
- Group types register themselves from their own modules; this module imports
  ``broker.groups.classic`` and, when it exists, ``broker.groups.consumer`` once.
- Effects of a state change are returned as an :class:`Effects` (answers for parked
  requests, whether to persist); :meth:`GroupCoordinator.run_effects` persists first,
  then answers, then re-arms the group's timer. Tickets are asyncio futures here;
  the state machines treat them as opaque, so unit tests drive them without a loop.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from broker.group_configs import GroupConfigs
from broker.groups.store import CommittedOffset, GroupStore
from protocol.errors import ErrorCode
from protocol.messages import KafkaMessage

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.groups.classic import ClassicGroup

log = logging.getLogger("chronolog.broker")

CLASSIC = "classic"
CONSUMER = "consumer"


@dataclass
class Effects:
    """What a group state change asks of the I/O shell.

    ``replies``: (ticket, response fields) for parked requests, answered after the
    persist (if any) is durable. ``persist``: write ``group.to_record()`` first; if
    that write fails the replies carry COORDINATOR_NOT_AVAILABLE instead (what Kafka
    answers when its offsets-log append fails).
    """

    replies: list[tuple[Any, KafkaMessage]] = field(default_factory=list)
    persist: bool = False

    def reply(self, ticket: Any, body: KafkaMessage) -> None:
        if ticket is not None:
            self.replies.append((ticket, body))

    def extend(self, other: Effects) -> Effects:
        self.replies.extend(other.replies)
        self.persist = self.persist or other.persist
        return self


@runtime_checkable
class Group(Protocol):
    """What every group type offers the coordinator and the shared handlers."""

    group_id: str
    group_type: str

    def protocol_type(self) -> str: ...
    def state_name(self) -> str: ...
    def is_empty(self) -> bool: ...
    def validate_offset_commit(self, member_id: str, generation_or_epoch: int,
                               instance_id: str | None, api_version: int) -> int: ...
    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int: ...
    def offset_expiry_base_ms(self, topic: str, commit_timestamp_ms: int) -> int | None: ...
    def next_deadline_ms(self) -> int | None: ...
    def on_timer(self, now_ms: int) -> Effects: ...
    def to_record(self) -> dict[str, Any]: ...


GroupFactory = Callable[[dict[str, Any], "GroupCoordinator"], Group]
_GROUP_TYPES: dict[str, GroupFactory] = {}
_TYPES_LOADED = False


def register_group_type(group_type: str, from_record: GroupFactory) -> None:
    """Make ``from_record(record, coordinator)`` rebuild groups whose record type is ``group_type``."""
    _GROUP_TYPES[group_type] = from_record


def _load_group_types() -> None:
    global _TYPES_LOADED
    if _TYPES_LOADED:
        return
    _TYPES_LOADED = True
    for name in ("broker.groups.classic", "broker.groups.consumer"):
        importlib.import_module(name)


def wall_ms() -> int:
    return int(time.time() * 1000)


class InconsistentGroupType(Exception):
    """The group id belongs to a group of another type (INCONSISTENT_GROUP_PROTOCOL)."""


class GroupCoordinator:
    """Every group of this broker, by id; their timers; their durable state."""

    def __init__(self, config: BrokerConfig, store: GroupStore, *,
                 clock: Callable[[], int] = wall_ms, topics: Any = None,
                 configs: GroupConfigs | None = None) -> None:
        _load_group_types()
        self.config = config
        self.store = store
        # Per-group configs (GROUP config resources); in memory only unless the broker
        # passes its persisted set. Loaded groups read them, so they come first.
        self.configs = configs if configs is not None else GroupConfigs(None, config)
        self.clock = clock
        # The topics KIP-848 groups assign (``broker.groups.consumer.TopicImage``: partition
        # counts and topic ids); the broker passes its PartitionManager.
        self.topics = topics
        self._groups: dict[str, Group] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._deadlines: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._load()

    # ---- registry --------------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def groups(self) -> list[Group]:
        return list(self._groups.values())

    def add(self, group: Group) -> Group:
        """Register a new group (its id must be free)."""
        if group.group_id in self._groups:
            raise ValueError(f"group {group.group_id!r} already exists")
        self._groups[group.group_id] = group
        return group

    def remove(self, group_id: str) -> None:
        """Forget a group in memory (its durable state is the caller's business)."""
        self._groups.pop(group_id, None)
        handle = self._timers.pop(group_id, None)
        if handle is not None:
            handle.cancel()
        self._deadlines.pop(group_id, None)

    def classic(self, group_id: str, *, create: bool) -> ClassicGroup | None:
        """The classic group ``group_id``; created Empty if missing and ``create``.

        Raises :class:`InconsistentGroupType` if the id belongs to a consumer group."""
        from broker.groups.classic import ClassicGroup

        g = self._groups.get(group_id)
        if g is None:
            if not create:
                return None
            return self.add(ClassicGroup(group_id, self.config, self.clock()))  # type: ignore[return-value]
        if not isinstance(g, ClassicGroup):
            if not (create and g.is_empty()):
                raise InconsistentGroupType(group_id)
            # An empty KIP-848 group makes way for a classic one (Kafka's
            # getOrMaybeCreateClassicGroup); the committed offsets stay.
            self.remove(group_id)
            return self.add(ClassicGroup(group_id, self.config, self.clock()))  # type: ignore[return-value]
        return g

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[Group]:
        """ListGroups' answer: filters match case-insensitively; empty filters match all."""
        want_states = {s.lower() for s in states}
        want_types = {t.lower() for t in types}
        return [
            g for g in self._groups.values()
            if (not want_states or g.state_name().lower() in want_states)
            and (not want_types or g.group_type.lower() in want_types)
        ]

    # ---- effects, persistence, timers ------------------------------------------------

    async def run_effects(self, group: Group, effects: Effects) -> None:
        """Persist (if asked), then answer the parked requests, then re-arm the timer."""
        if effects.persist:
            try:
                await self.persist(group)
            except OSError as exc:
                log.error("group %r state could not be stored: %s", group.group_id, exc)
                for ticket, body in effects.replies:
                    body = msgspec.structs.replace(body, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                    _resolve(ticket, body)
                self.schedule(group)
                return
        for ticket, body in effects.replies:
            _resolve(ticket, body)
        self.schedule(group)
        self._drop_if_unused(group)

    def _drop_if_unused(self, group: Group) -> None:
        """A group that never got a member and holds no offsets (a rejected join, an
        expired pending id) is forgotten, so junk group ids cost no memory."""
        disposable = getattr(group, "is_disposable", None)
        if (disposable is not None and disposable() and self._groups.get(group.group_id) is group
                and not self.store.has_group(group.group_id)):
            self.remove(group.group_id)

    async def call(self, group: Group, effects: Effects, ticket: asyncio.Future[Any]) -> Any:
        """Run ``effects`` and wait for the answer to ``ticket`` (at once, or when parked)."""
        await self.run_effects(group, effects)
        return await ticket

    def ticket(self) -> asyncio.Future[Any]:
        """A ticket for a request the group may park: a future its answer resolves."""
        return asyncio.get_running_loop().create_future()

    async def persist(self, group: Group) -> None:
        """Durably write the group's snapshot (only groups still registered)."""
        if self._groups.get(group.group_id) is group:
            await self.store.write_group(group.group_id, group.to_record())

    async def delete(self, group_id: str) -> None:
        """Forget a group and all its offsets, durably (DeleteGroups, expiry)."""
        self.remove(group_id)
        await self.store.write_group(group_id, None)

    def schedule(self, group: Group) -> None:
        """Arm one precise timer for the group's next deadline (none when it has none)."""
        gid = group.group_id
        deadline = group.next_deadline_ms() if self._groups.get(gid) is group else None
        if self._deadlines.get(gid) == deadline:
            return
        old = self._timers.pop(gid, None)
        if old is not None:
            old.cancel()
        if deadline is None:
            self._deadlines.pop(gid, None)
            return
        self._deadlines[gid] = deadline
        loop = self._loop
        if loop is None:
            return  # not started (tests): the caller drives on_timer itself
        delay = max(0.0, (deadline - self.clock()) / 1000.0)
        self._timers[gid] = loop.call_later(delay, self._fire, gid)

    def _fire(self, group_id: str) -> None:
        self._timers.pop(group_id, None)
        self._deadlines.pop(group_id, None)
        group = self._groups.get(group_id)
        if group is None:
            return
        try:
            effects = group.on_timer(self.clock())
        except Exception:
            log.exception("group %r timer failed", group_id)
            return
        loop = self._loop
        assert loop is not None
        task = loop.create_task(self.run_effects(group, effects), name="group-timer")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- offsets -----------------------------------------------------------------------

    async def commit_offsets(self, group_id: str, items: list[tuple[str, int, CommittedOffset]]) -> None:
        """Durably store accepted offsets; a group that has none yet becomes a simple group."""
        if group_id not in self._groups:
            self.classic(group_id, create=True)
        await self.store.commit_async(group_id, items)
        if group_id not in self._groups:  # deleted while the write was in flight
            self.classic(group_id, create=True)

    async def expire_offsets(self, now_ms: int) -> int:
        """KIP-211 expiry: drop offsets whose base is older than offsets.retention.minutes,
        then delete empty groups left without offsets; returns how many offsets went."""
        retention = self.config.offsets_retention_minutes * 60_000
        n = 0
        for group_id in self.store.groups():
            group = self._groups.get(group_id)
            expired = []
            for (topic, partition), off in self.store.fetch_group(group_id).items():
                base: int | None = off.commit_timestamp_ms
                if group is not None:
                    base = group.offset_expiry_base_ms(topic, off.commit_timestamp_ms)
                if base is not None and now_ms - base >= retention:
                    expired.append((topic, partition))
            if not expired:
                continue
            n += len(expired)
            log.info("group %r: %d committed offsets expired (offsets.retention.minutes)",
                     group_id, len(expired))
            await self.store.delete_offsets(group_id, expired)
        # Kafka's cleanup: an empty group without offsets is deleted (with its snapshot).
        for group in list(self._groups.values()):
            if (group.is_empty() and not self.store.has_group(group.group_id)
                    and not getattr(group, "pending_members", None)):
                log.info("group %r is empty and has no committed offsets: deleted", group.group_id)
                if self.store.has_record(group.group_id):
                    await self.delete(group.group_id)
                else:
                    self.remove(group.group_id)
        return n

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Arm the timers of the loaded groups; from now on timers fire on ``loop``."""
        self._loop = loop
        self._deadlines.clear()
        for group in self._groups.values():
            self.schedule(group)

    def close(self) -> None:
        """Stop the timers and answer every parked request with NOT_COORDINATOR, as a
        Kafka coordinator does when it unloads its groups (clients find it again)."""
        for group in self._groups.values():
            release = getattr(group, "release_parked", None)
            if release is not None:
                for ticket, body in release(int(ErrorCode.NOT_COORDINATOR)).replies:
                    _resolve(ticket, body)
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._deadlines.clear()
        self._loop = None

    def _load(self) -> None:
        """Rebuild groups from their snapshots; groups with offsets only become simple groups."""
        for group_id, record in self.store.group_records().items():
            factory = _GROUP_TYPES.get(str(record.get("type")))
            if factory is None:
                log.error("group %r has a record of unknown type %r; ignored",
                          group_id, record.get("type"))
                continue
            try:
                self._groups[group_id] = factory(dict(record, group_id=group_id), self)
            except (KeyError, TypeError, ValueError) as exc:
                log.error("group %r record does not load (%s); ignored", group_id, exc)
        for group_id in self.store.groups():
            if group_id not in self._groups:
                self.classic(group_id, create=True)


def _resolve(ticket: Any, body: KafkaMessage) -> None:
    if isinstance(ticket, asyncio.Future) and not ticket.done():
        ticket.set_result(body)
