"""KIP-848 server-side assignors: ``uniform`` and ``range``, as pure functions.

Both take the members (id, instance id, subscribed topic names, current
assignment) and the partition count of every subscribed topic, and return each
member's target assignment ``{topic: frozenset(partitions)}`` (every member
appears, possibly with ``{}``).

Invariants (property-tested in tests/broker/test_kip848_assignors.py):
- Every partition of a topic that at least one member subscribes to is assigned
  to exactly one member, and only to a member that subscribes to its topic.
- ``uniform``: balance first, then stickiness (Kafka's UniformAssignor). With
  identical subscriptions the member sizes differ by at most one; in general no
  partition could move to an eligible member holding two or more fewer. A member
  keeps ``min(valid owned, floor(total / members))`` of the partitions it held
  (valid = still subscribed and claimed by no member before it in id order, whether
  or not that member kept it).
- ``range``: per topic, subscribers in order (static members by instance id first,
  then the others by member id) get contiguous ranges; with ``n`` partitions and
  ``m`` subscribers each gets ``n // m`` and the first ``n % m`` one more, so
  members subscribing to the same topics are co-partitioned.
- Both are deterministic: the same input gives the same output.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

Assignment = dict[str, frozenset[int]]


@dataclass(frozen=True)
class MemberSpec:
    """What an assignor knows of one member."""

    member_id: str
    subscribed: frozenset[str]
    instance_id: str | None = None
    owned: Mapping[str, frozenset[int]] = field(default_factory=dict)


def uniform(members: Sequence[MemberSpec], topics: Mapping[str, int]) -> dict[str, Assignment]:
    """Balanced, then sticky: see the module docstring."""
    if not members:
        return {}
    order = sorted(members, key=lambda m: m.member_id)
    subscribers: dict[str, list[str]] = {}
    for m in order:
        for t in sorted(m.subscribed):
            if topics.get(t, 0) > 0:
                subscribers.setdefault(t, []).append(m.member_id)
    total = sum(topics[t] for t in subscribers)
    homogeneous = len({frozenset(m.subscribed & subscribers.keys()) for m in order}) == 1
    quota = total // len(order) + (1 if total % len(order) else 0) if homogeneous else total
    held: dict[str, set[tuple[str, int]]] = {m.member_id: set() for m in order}
    taken: set[tuple[str, int]] = set()
    # 1. stickiness: keep what is still valid, up to the balanced size (identical subscriptions).
    # A partition two members claim (a stale assignment) belongs to the first in id order,
    # kept or not: a later claimant keeps what only it holds instead, so the contested
    # partition is the one that moves.
    claimed: set[tuple[str, int]] = set()
    for m in order:
        valid = {(t, p) for t, parts in m.owned.items() if t in m.subscribed and t in subscribers
                 for p in parts if 0 <= p < topics[t]} - claimed
        claimed |= valid
        for tp in sorted(valid):
            if len(held[m.member_id]) >= quota:
                break
            held[m.member_id].add(tp)
            taken.add(tp)
    # 2. what is left goes to the eligible member holding the fewest (ties: lowest id)
    size = {mid: len(tps) for mid, tps in held.items()}
    for t in sorted(subscribers):
        heap = [(size[mid], mid) for mid in subscribers[t]]
        heapq.heapify(heap)
        for p in range(topics[t]):
            if (t, p) not in taken:
                n, target = heapq.heappop(heap)
                held[target].add((t, p))
                taken.add((t, p))
                size[target] = n + 1
                heapq.heappush(heap, (n + 1, target))
    # 3. balance: move partitions from a member to an eligible one holding two or more fewer
    owned = {m.member_id: {(t, p) for t, ps in m.owned.items() for p in ps} for m in order}
    _balance(held, size, subscribers, owned)
    out: dict[str, Assignment] = {}
    for m in order:
        per_topic: dict[str, set[int]] = {}
        for t, p in held[m.member_id]:
            per_topic.setdefault(t, set()).add(p)
        out[m.member_id] = {t: frozenset(ps) for t, ps in per_topic.items()}
    return out


def _balance(held: dict[str, set[tuple[str, int]]], size: dict[str, int],
             subscribers: Mapping[str, list[str]], owned: Mapping[str, set[tuple[str, int]]]) -> None:
    """Move partitions until none can go to an eligible member with two or more fewer.

    Each move lowers the sum of squared sizes, so this ends. A giver parts first
    with partitions it did not own before (stickiness), then with its highest.
    ``subscribers`` lists are sorted by member id, so ``min`` breaks ties by id."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(held, key=lambda mid: (-size[mid], mid)):
            for t in sorted({t for t, _ in held[giver]}):
                subs = subscribers[t]
                taker = min(subs, key=size.__getitem__)
                if size[giver] - size[taker] < 2:
                    continue
                # new partitions first, then the highest: sorted once, popped from the end
                mine = sorted((tp for tp in held[giver] if tp[0] == t),
                              key=lambda x: (x not in owned[giver], x))
                while mine and size[giver] - size[taker] >= 2:
                    tp = mine.pop()
                    held[giver].discard(tp)
                    held[taker].add(tp)
                    size[giver] -= 1
                    size[taker] += 1
                    moved = True
                    taker = min(subs, key=size.__getitem__)


def range_(members: Sequence[MemberSpec], topics: Mapping[str, int]) -> dict[str, Assignment]:
    """Contiguous per-topic ranges: see the module docstring."""
    out: dict[str, dict[str, frozenset[int]]] = {m.member_id: {} for m in members}
    ordered = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id))
    for t in sorted({t for m in members for t in m.subscribed}):
        n = topics.get(t, 0)
        subs = [m.member_id for m in ordered if t in m.subscribed]
        if n <= 0 or not subs:
            continue
        per, extra = divmod(n, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            size = per + (1 if i < extra else 0)
            if size:
                out[mid][t] = frozenset(range(start, start + size))
            start += size
    return out


ASSIGNORS: dict[str, Callable[[Sequence[MemberSpec], Mapping[str, int]], dict[str, Assignment]]] = {
    "uniform": uniform,
    "range": range_,
}
# Kafka's class names (3.7 and 4.x packages) name the same assignors.
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    "org.apache.kafka.coordinator.group.api.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.api.assignor.RangeAssignor": "range",
}


def assignor_names(setting: str) -> list[str]:
    """``group.consumer.assignors`` as short names, in order; ConfigError for an unknown one."""
    from broker.config import ConfigError

    names = []
    for raw in setting.split(","):
        name = raw.strip()
        short = _CLASS_NAMES.get(name, name)
        if short not in ASSIGNORS:
            raise ConfigError(f"group.consumer.assignors: unknown assignor {name!r} "
                              f"(known: {', '.join(ASSIGNORS)})")
        if short not in names:
            names.append(short)
    if not names:
        raise ConfigError("group.consumer.assignors must name at least one assignor")
    return names
