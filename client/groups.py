"""Consumer-group administration: list, describe, delete, committed offsets, and the
reset-offsets plan with ``kafka-consumer-groups.sh --reset-offsets`` semantics.

Every function takes a connected :class:`client.aio.Client`; :class:`SyncGroupAdmin`
is the blocking twin over a :class:`client.sync.SyncClient`. Group requests go to
the group's coordinator (FindCoordinator), partition lookups through the client's
ListOffsets.

Invariants:
- ``describe_group`` asks DescribeGroups about a classic group and ConsumerGroupDescribe
  (KIP-848) about a group ListGroups v5 types "consumer", as Kafka's Admin does: the
  broker answers DescribeGroups for a consumer-type group with GROUP_ID_NOT_FOUND.
- Each group API is used at ``min(our max, broker's max)`` of the versions below; an
  API the broker does not serve raises ``KafkaError(UNSUPPORTED_VERSION)`` naming it.
- A reset plan is exact and clamped as Kafka's tool does: ``to_offset`` and
  ``shift_by`` land in ``[earliest, latest]``; a time with no record at or after it
  resolves to ``latest``; ``shift_by`` needs a committed offset.
- :func:`apply_plan` refuses an active group (any state but Empty, Dead or unknown)
  before writing anything, and commits with generation -1 and member id "", so the
  broker rejects it (UNKNOWN_MEMBER_ID) if members joined meanwhile.
"""

from __future__ import annotations

import re
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import protocol.api as api
from client.aio import EARLIEST, LATEST, Client, TopicPartition, _raise_for
from protocol.consumer_protocol import decode_assignment
from protocol.errors import ErrorCode, KafkaError

__all__ = [
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "PartitionLag",
    "ResetPlanEntry",
    "ActiveGroupError",
    "SyncGroupAdmin",
    "apply_plan",
    "commit_plan",
    "committed_offsets",
    "delete_group",
    "describe_group",
    "list_groups",
    "parse_duration",
    "plan_reset",
]

T = TypeVar("T")

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
CONSUMER_GROUP_DESCRIBE = 69

#: The versions this module can speak per API: OffsetFetch stays on the one-group
#: form (v2-7, null topics = all); OffsetCommit below v9 (no member epochs here).
GROUP_VERSIONS: dict[int, tuple[int, int]] = {
    OFFSET_COMMIT: (2, 8),
    OFFSET_FETCH: (2, 7),
    FIND_COORDINATOR: (1, 3),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
}
_NAMES = {OFFSET_COMMIT: "OffsetCommit", OFFSET_FETCH: "OffsetFetch",
          FIND_COORDINATOR: "FindCoordinator", DESCRIBE_GROUPS: "DescribeGroups",
          LIST_GROUPS: "ListGroups", DELETE_GROUPS: "DeleteGroups",
          CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe"}

#: States in which Kafka's tool lets offsets be reset ("" = the group does not exist).
INACTIVE_STATES = frozenset({"Empty", "Dead", ""})


class ActiveGroupError(Exception):
    """Offsets of a group with members cannot be reset; the message is Kafka's tool's."""

    def __init__(self, group: str, state: str) -> None:
        super().__init__(f"Assignments can only be reset if the group '{group}' is inactive, "
                         f"but the current state is {state}.")
        self.group = group
        self.state = state


def _version(client: Client, api_key: int) -> int:
    lo, hi = GROUP_VERSIONS[api_key]
    codec = api.API_VERSIONS.get(api_key)  # type: ignore[call-overload]
    broker = client.broker_versions(api_key)
    if codec is not None and broker is not None:
        lo, hi = max(lo, codec.min_version, broker[0]), min(hi, codec.max_version, broker[1])
        if hi >= lo:
            return hi
    raise KafkaError(
        ErrorCode.UNSUPPORTED_VERSION,
        f"{_NAMES[api_key]}: client supports v{GROUP_VERSIONS[api_key][0]}-"
        f"v{GROUP_VERSIONS[api_key][1]}, broker "
        + (f"v{broker[0]}-v{broker[1]}" if broker else "does not support it"),
    )


async def _call(client: Client, api_key: int, body: dict[str, Any], node_id: int | None = None) -> Any:
    version = _version(client, api_key)
    conn = await client.connection(node_id)
    return await conn.request(api_key, version, body)


async def _coordinator(client: Client, group: str) -> int:
    """The node id of ``group``'s coordinator (FindCoordinator, key type 0 = group)."""
    resp = await _call(client, FIND_COORDINATOR, {"key": group, "key_type": 0})
    _raise_for(resp["error_code"], f"find coordinator of group {group!r}", resp.get("error_message"))
    client.add_broker(resp["node_id"], resp["host"], resp["port"])
    node_id: int = resp["node_id"]
    return node_id


# ------------------------------------------------------------------ list / describe / delete


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str  # "consumer", "" for a simple group (commits only)
    state: str | None  # None when the broker answers ListGroups below v4
    type: str | None  # "classic" / "consumer"; None below v5


async def list_groups(client: Client, states: Sequence[str] = (),
                      types: Sequence[str] = ()) -> list[GroupListing]:
    """Every group the cluster knows: ListGroups to each broker (each lists the groups it
    coordinates), brokers from a topic-less Metadata request."""
    await client.cluster_metadata([])
    version = _version(client, LIST_GROUPS)
    body = {"states_filter": list(states), "types_filter": list(types)}
    found: dict[str, GroupListing] = {}
    nodes: list[int | None] = [*sorted(client.brokers)] or [None]
    for node_id in nodes:
        resp = await _call(client, LIST_GROUPS, body, node_id)
        _raise_for(resp["error_code"], "list groups")
        for g in resp["groups"]:
            found[g["group_id"]] = GroupListing(g["group_id"], g["protocol_type"],
                                                g["group_state"] if version >= 4 else None,
                                                g["group_type"] if version >= 5 else None)
    return sorted(found.values(), key=lambda g: g.group_id)


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, list[int]]  # decoded ConsumerProtocolAssignment; {} when none
    #: KIP-848 members only (None in a classic group): the member's epoch, the partitions
    #: the coordinator means it to own once reconciled, and its subscription.
    member_epoch: int | None = None
    target_assignment: dict[str, list[int]] | None = None
    subscribed_topics: list[str] | None = None


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: nothing committed
    log_end: int
    lag: int | None  # log end - committed; None without a commit
    member_id: str | None  # the member assigned the partition, if any


@dataclass
class GroupDescription:
    group_id: str
    state: str  # Kafka's state name; "Dead" for a group that does not exist
    type: str | None  # "classic" / "consumer", from ListGroups v5 (None: unknown)
    protocol_type: str
    protocol: str  # the chosen assignor of a consumer group (classic or KIP-848)
    members: list[MemberDescription] = field(default_factory=list)
    partitions: list[PartitionLag] = field(default_factory=list)
    group_epoch: int | None = None  # KIP-848 groups only (ConsumerGroupDescribe)
    assignment_epoch: int | None = None


async def _describe_raw(client: Client, group: str, coordinator: int) -> Any:
    resp = await _call(client, DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False},
                       coordinator)
    (g,) = resp["groups"]
    return g


async def _listing(client: Client, group: str) -> GroupListing | None:
    """The group's ListGroups entry (None if absent). ListGroups lists every type of group,
    while DescribeGroups answers KIP-848 "consumer" groups as not found."""
    for listing in await list_groups(client):
        if listing.group_id == group:
            return listing
    return None


async def group_state(client: Client, group: str) -> str:
    """The group's state; "Dead" when the broker does not know it (GROUP_ID_NOT_FOUND in v6).

    A group DescribeGroups does not know is looked up in ListGroups too, so that an
    active KIP-848 group is never taken for an inactive one.
    """
    g = await _describe_raw(client, group, await _coordinator(client, group))
    if g["error_code"] != ErrorCode.GROUP_ID_NOT_FOUND:
        _raise_for(g["error_code"], f"describe group {group!r}", g.get("error_message"))
        if g["group_state"] != "Dead":
            state: str = g["group_state"]
            return state
    listing = await _listing(client, group)
    return listing.state if listing is not None and listing.state else "Dead"


def _topic_partitions(assignment: Any) -> dict[str, list[int]]:
    return {t["topic_name"]: sorted(t["partitions"]) for t in assignment["topic_partitions"]
            if t["partitions"]}


async def _describe_consumer(client: Client, group: str, coordinator: int) -> GroupDescription | None:
    """A KIP-848 group through ConsumerGroupDescribe; None when the broker answers
    GROUP_ID_NOT_FOUND (the group is gone, or classic after all) or does not serve the
    API, so the caller falls back to DescribeGroups as Kafka's Admin does."""
    if client.broker_versions(CONSUMER_GROUP_DESCRIBE) is None:
        return None
    resp = await _call(client, CONSUMER_GROUP_DESCRIBE,
                       {"group_ids": [group], "include_authorized_operations": False}, coordinator)
    (g,) = resp["groups"]
    if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    _raise_for(g["error_code"], f"describe group {group!r}", g.get("error_message"))
    desc = GroupDescription(group, g["group_state"], "consumer", "consumer", g["assignor_name"],
                            group_epoch=g["group_epoch"], assignment_epoch=g["assignment_epoch"])
    for m in g["members"]:
        desc.members.append(MemberDescription(
            m["member_id"], m["instance_id"], m["client_id"], m["client_host"],
            _topic_partitions(m["assignment"]), member_epoch=m["member_epoch"],
            target_assignment=_topic_partitions(m["target_assignment"]),
            subscribed_topics=sorted(m["subscribed_topic_names"])))
    return desc


async def _describe_classic(client: Client, group: str, coordinator: int) -> GroupDescription:
    g = await _describe_raw(client, group, coordinator)
    if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
        return GroupDescription(group, "Dead", None, "", "")
    _raise_for(g["error_code"], f"describe group {group!r}", g.get("error_message"))
    desc = GroupDescription(group, g["group_state"], None, g["protocol_type"], g["protocol_data"])
    for m in g["members"]:
        try:
            assignment = decode_assignment(bytes(m["member_assignment"])) \
                if desc.protocol_type == "consumer" else {}
        except Exception as exc:  # a member's blob is opaque to the broker; show, don't fail
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"member {m['member_id']}: undecodable assignment: {exc}") from None
        desc.members.append(MemberDescription(m["member_id"], m.get("group_instance_id"),
                                              m["client_id"], m["client_host"], assignment))
    return desc


async def describe_group(client: Client, group: str) -> GroupDescription:
    """State, members with their assignments, and per partition the lag.

    ListGroups gives the group's type: a "consumer" (KIP-848) group is described with
    ConsumerGroupDescribe (epochs, assignor, current and target assignments), any other
    with DescribeGroups (assignments decoded from the members' ConsumerProtocol blobs).
    """
    coordinator = await _coordinator(client, group)
    listing = await _listing(client, group)
    desc = None
    if listing is not None and listing.type == "consumer":
        desc = await _describe_consumer(client, group, coordinator)
    if desc is None:
        desc = await _describe_classic(client, group, coordinator)
        if listing is not None:
            desc.type = listing.type
            if desc.state == "Dead" and listing.state:  # KIP-848 group without API 69: no members
                desc.state, desc.protocol_type = listing.state, listing.protocol_type
    owner = {(t, p): m.member_id for m in desc.members for t, ps in m.assignment.items() for p in ps}
    committed = await committed_offsets(client, group, coordinator=coordinator)
    tps = sorted(set(committed) | {TopicPartition(t, p) for t, p in owner})
    ends = await client.list_offsets({tp: LATEST for tp in tps}) if tps else {}
    for tp in tps:
        done = committed.get(tp)
        end = ends[tp][0]
        desc.partitions.append(PartitionLag(tp.topic, tp.partition, done, end,
                                            None if done is None else max(end - done, 0),
                                            owner.get((tp.topic, tp.partition))))
    return desc


async def delete_group(client: Client, group: str) -> None:
    """DeleteGroups: NON_EMPTY_GROUP (68) for a group with members, GROUP_ID_NOT_FOUND (69)."""
    resp = await _call(client, DELETE_GROUPS, {"groups_names": [group]},
                       await _coordinator(client, group))
    for r in resp["results"]:
        _raise_for(r["error_code"], f"delete group {r['group_id']!r}")


# ------------------------------------------------------------------ committed offsets


async def committed_offsets(client: Client, group: str, topics: Iterable[str] | None = None, *,
                            coordinator: int | None = None) -> dict[TopicPartition, int]:
    """Committed offsets of ``group`` (all topics when ``topics`` is None); none → absent."""
    node = await _coordinator(client, group) if coordinator is None else coordinator
    want = None
    if topics is not None:
        want = [{"name": t, "partition_indexes": await client.partitions_for(t)} for t in topics]
    resp = await _call(client, OFFSET_FETCH, {"group_id": group, "topics": want, "require_stable": False},
                       node)
    _raise_for(resp["error_code"], f"fetch offsets of group {group!r}")
    out = {}
    for t in resp["topics"]:
        for p in t["partitions"]:
            _raise_for(p["error_code"], f"fetch offset of {t['name']}-{p['partition_index']}")
            if p["committed_offset"] >= 0:
                out[TopicPartition(t["name"], p["partition_index"])] = p["committed_offset"]
    return out


# ------------------------------------------------------------------ reset-offsets


_DURATION = re.compile(
    r"^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?$",
    re.IGNORECASE | re.ASCII,
)
_SHORT = re.compile(r"^(\d+)\s*(ms|s|m|h|d|w)$", re.IGNORECASE | re.ASCII)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration(text: str) -> int:
    """Milliseconds of Kafka's ``--by-duration`` text (Java's ``PnDTnHnMn.nS``), or a short
    form like ``15m`` / ``2h``. Raises ValueError naming an accepted form."""
    s = text.strip()
    short = _SHORT.match(s)
    if short:
        return int(short.group(1)) * _UNIT_MS[short.group(2).lower()]
    m = _DURATION.match(s)
    if not m or not any(m.groups()[1:6]) or s.upper().endswith("T"):
        raise ValueError(f"cannot parse duration {text!r}: use PnDTnHnMnS (P1DT2H, PT15M, PT0.5S) or 15m")
    sign, days, hours, minutes, seconds, frac = m.groups()
    ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
          + int(seconds or 0) * 1000)
    if frac:
        ms += (-1 if (seconds or "").startswith("-") else 1) * int(frac.ljust(9, "0")) // 1_000_000
    return -ms if sign == "-" else ms


@dataclass(frozen=True)
class ResetPlanEntry:
    topic: str
    partition: int
    current: int | None  # the committed offset before the reset, None if none
    new: int


async def _scope(client: Client, group: str, topics: Mapping[str, Sequence[int] | None] | None,
                 committed: Mapping[TopicPartition, int]) -> list[TopicPartition]:
    """``--topic t[:p,...]`` (all partitions when none listed) or ``--all-topics`` (None:
    every partition the group has committed)."""
    if topics is None:
        return sorted(committed)
    out: list[TopicPartition] = []
    for t, parts in topics.items():
        existing = await client.partitions_for(t)
        for p in parts if parts else existing:
            if p not in existing:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {t!r} has no partition {p}")
            out.append(TopicPartition(t, p))
    return sorted(set(out))


async def plan_reset(
    client: Client, group: str, topics: Mapping[str, Sequence[int] | None] | None, *,
    to_time: int | None = None, to_earliest: bool = False, to_latest: bool = False,
    to_offset: int | None = None, shift_by: int | None = None,
) -> list[ResetPlanEntry]:
    """The new offset of every partition in scope, resolved as ``kafka-consumer-groups``
    resolves it (exactly one scenario must be given; ``--by-duration`` is ``to_time``
    = now - duration)."""
    chosen = [to_time is not None, to_earliest, to_latest, to_offset is not None, shift_by is not None]
    if sum(chosen) != 1:
        raise ValueError("give exactly one of --to-time, --by-duration, --to-earliest, --to-latest, "
                         "--to-offset, --shift-by")
    coordinator = await _coordinator(client, group)
    committed = await committed_offsets(client, group, None, coordinator=coordinator)
    tps = await _scope(client, group, topics, committed)
    if not tps:
        return []
    earliest = {tp: o for tp, (o, _) in (await client.list_offsets({tp: EARLIEST for tp in tps})).items()}
    latest = {tp: o for tp, (o, _) in (await client.list_offsets({tp: LATEST for tp in tps})).items()}
    if to_time is not None:
        found = await client.list_offsets({tp: to_time for tp in tps})
        new = {tp: (found[tp][0] if found[tp][0] >= 0 else latest[tp]) for tp in tps}
    elif to_earliest:
        new = dict(earliest)
    elif to_latest:
        new = dict(latest)
    elif to_offset is not None:
        new = {tp: to_offset for tp in tps}
    else:
        assert shift_by is not None
        missing = [tp for tp in tps if tp not in committed]
        if missing:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "--shift-by needs a committed offset; none for "
                             + ", ".join(f"{tp.topic}:{tp.partition}" for tp in missing))
        new = {tp: committed[tp] + shift_by for tp in tps}
    return [ResetPlanEntry(tp.topic, tp.partition, committed.get(tp),
                           min(max(new[tp], earliest[tp]), latest[tp])) for tp in tps]


async def apply_plan(client: Client, group: str, plan: Sequence[ResetPlanEntry]) -> None:
    """Commit the plan for an inactive group (generation -1, member id "", metadata "")."""
    state = await group_state(client, group)
    if state not in INACTIVE_STATES:
        raise ActiveGroupError(group, state)
    await commit_plan(client, group, plan)


async def commit_plan(client: Client, group: str, plan: Sequence[ResetPlanEntry]) -> None:
    """The commit of :func:`apply_plan` without its check: a group that has members gets
    UNKNOWN_MEMBER_ID from the broker (a commit with generation -1 and member id "")."""
    if not plan:
        return
    by_topic: dict[str, list[ResetPlanEntry]] = {}
    for e in plan:
        by_topic.setdefault(e.topic, []).append(e)
    body = {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": [
            {"partition_index": e.partition, "committed_offset": e.new, "committed_leader_epoch": -1,
             "commit_timestamp": -1, "committed_metadata": ""} for e in es]}
            for t, es in by_topic.items()],
    }
    resp = await _call(client, OFFSET_COMMIT, body, await _coordinator(client, group))
    for t in resp["topics"]:
        for p in t["partitions"]:
            _raise_for(p["error_code"], f"commit {t['name']}-{p['partition_index']} for group {group!r}")


class SyncGroupAdmin:
    """The blocking twin of this module's functions over a :class:`client.sync.SyncClient`."""

    def __init__(self, sync_client: Any) -> None:
        self._sync = sync_client

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        result: T = self._sync._call(coro)
        return result

    def list_groups(self, states: Sequence[str] = (), types: Sequence[str] = ()) -> list[GroupListing]:
        return self._run(list_groups(self._sync.aio, states, types))

    def describe_group(self, group: str) -> GroupDescription:
        return self._run(describe_group(self._sync.aio, group))

    def delete_group(self, group: str) -> None:
        self._run(delete_group(self._sync.aio, group))

    def committed_offsets(self, group: str, topics: Iterable[str] | None = None) -> dict[TopicPartition, int]:
        return self._run(committed_offsets(self._sync.aio, group, topics))

    def plan_reset(self, group: str, topics: Mapping[str, Sequence[int] | None] | None,
                   **scenario: Any) -> list[ResetPlanEntry]:
        return self._run(plan_reset(self._sync.aio, group, topics, **scenario))

    def apply_plan(self, group: str, plan: Sequence[ResetPlanEntry]) -> None:
        self._run(apply_plan(self._sync.aio, group, plan))

    def commit_plan(self, group: str, plan: Sequence[ResetPlanEntry]) -> None:
        self._run(commit_plan(self._sync.aio, group, plan))
