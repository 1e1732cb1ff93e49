"""Kafka's client quota model, sans I/O (``ClientQuotaManager``, ``QuotaUtils``,
``metrics.stats.Rate``, ``ClientQuotaControlManager``).

Invariants (security-admin-facts §6):
- An entity is a set of (type, name) pairs over ``user``, ``client-id`` and ``ip``
  (``ip`` alone); a None name is that type's default entity.
- A connection's quota for one key is the first configured entity, in Kafka's order,
  among (u,c) (u,dc) (u) (du,c) (du,dc) (du) (c) (dc). Connections that resolve to the
  same entity share one rate; a default component is shared per actual name.
- A rate is Kafka's ``Rate``: ``quota.window.num`` samples of
  ``quota.window.size.seconds``, measured over the span of the kept samples but at
  least (num - 1) windows. Over the quota, throttle = (rate - quota) / quota x window.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable
from typing import NamedTuple

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
#: key -> (entity types it applies to, integral?)
KEYS: dict[str, tuple[frozenset[str], bool]] = {
    PRODUCER_BYTE_RATE: (frozenset({USER, CLIENT_ID}), True),
    CONSUMER_BYTE_RATE: (frozenset({USER, CLIENT_ID}), True),
    REQUEST_PERCENTAGE: (frozenset({USER, CLIENT_ID}), False),
    "controller_mutation_rate": (frozenset({USER, CLIENT_ID}), False),
    "connection_creation_rate": (frozenset({IP}), True),
}

Entity = tuple[tuple[str, "str | None"], ...]  # sorted by type


class InvalidQuota(ValueError):
    """Refused with INVALID_REQUEST (42)."""


class UnknownEntityType(ValueError):
    """DescribeClientQuotas with an entity type Kafka does not know: UNSUPPORTED_VERSION (35)."""


def entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """Validate and normalise an entity; raises :class:`InvalidQuota`."""
    pairs = list(pairs)
    types = [t for t, _ in pairs]
    if not pairs:
        raise InvalidQuota("an entity needs at least one component")
    if len(set(types)) != len(types):
        raise InvalidQuota(f"duplicate entity type in {types}")
    for t in types:
        if t not in ENTITY_TYPES:
            raise InvalidQuota(f"unknown entity type {t!r}")
    if IP in types and len(types) > 1:
        raise InvalidQuota("an ip entity cannot be combined with other types")
    return tuple(sorted(pairs))


def check_value(ent: Entity, key: str, value: float) -> None:
    spec = KEYS.get(key)
    if spec is None:
        raise InvalidQuota(f"unknown quota key {key!r}")
    types, integral = spec
    if not {t for t, _ in ent} <= types:
        raise InvalidQuota(f"{key} does not apply to {[t for t, _ in ent]}")
    if not value > 0 or math.isinf(value) or math.isnan(value):
        raise InvalidQuota(f"{key} must be positive, got {value}")
    if integral and value != int(value):
        raise InvalidQuota(f"{key} must be an integer, got {value}")


def describe_matches(ent: Entity, components: list[tuple[str, int, str | None]],
                     strict: bool) -> bool:
    """DescribeClientQuotas: match types 0 exact name, 1 default, 2 any."""
    names = dict(ent)
    for etype, match_type, match in components:
        if etype not in names:
            return False
        name = names[etype]
        if match_type == 0 and name != match:
            return False
        if match_type == 1 and name is not None:
            return False
    return not strict or len(names) == len(components)


def check_components(components: list[tuple[str, int, str | None]]) -> None:
    types = [t for t, _, _ in components]
    for etype, match_type, match in components:
        if etype not in ENTITY_TYPES:
            raise UnknownEntityType(f"unknown entity type {etype!r}")
        if match_type == 0 and match is None:
            raise InvalidQuota("an exact match needs a name")
        if match_type in (1, 2) and match is not None:
            raise InvalidQuota("a default or any match takes no name")
        if match_type not in (0, 1, 2):
            raise InvalidQuota(f"unknown match type {match_type}")
    if len(set(types)) != len(types):
        raise InvalidQuota("duplicate entity type")
    if IP in types and len(types) > 1:
        raise InvalidQuota("ip cannot be combined with other types")


def _order(user: str, client: str) -> list[tuple[Entity, tuple[str, str]]]:
    """Kafka's precedence, each with the key of the rate it shares."""
    U, C = USER, CLIENT_ID
    return [
        (((C, client), (U, user)), (user, client)),
        (((C, None), (U, user)), (user, client)),
        (((U, user),), (user, "")),
        (((C, client), (U, None)), (user, client)),
        (((C, None), (U, None)), (user, client)),
        (((U, None),), (user, "")),
        (((C, client),), ("", client)),
        (((C, None),), ("", client)),
    ]


class QuotaConfigs:
    """The configured quotas: entity -> {key: value}."""

    def __init__(self, entries: dict[Entity, dict[str, float]] | None = None) -> None:
        self.entries: dict[Entity, dict[str, float]] = dict(entries or {})
        self._cache: dict[tuple[str, str, str], tuple[float, tuple[str, str]] | None] = {}

    def keys_in_use(self) -> set[str]:
        return {k for values in self.entries.values() for k in values}

    def replace(self, entries: dict[Entity, dict[str, float]]) -> None:
        self.entries = dict(entries)
        self._cache.clear()

    def set(self, ent: Entity, values: dict[str, float]) -> None:
        if values:
            self.entries[ent] = values
        else:
            self.entries.pop(ent, None)
        self._cache.clear()

    def quota(self, key: str, user: str, client: str) -> tuple[float, tuple[str, str]] | None:
        """(limit, shared-rate key) of ``key`` for a connection, or None if unlimited."""
        ck = (key, user, client)
        try:
            return self._cache[ck]
        except KeyError:
            pass
        found = None
        for ent, rate_key in _order(user, client):
            values = self.entries.get(ent)
            if values is not None and key in values:
                found = (values[key], rate_key)
                break
        self._cache[ck] = found
        return found


class Rate:
    """Kafka's windowed ``Rate`` (units per second) over ``num`` samples of ``size_ms``."""

    __slots__ = ("num", "size_ms", "samples")

    def __init__(self, num: int, size_ms: int) -> None:
        self.num = num
        self.size_ms = size_ms
        self.samples: collections.deque[list[float]] = collections.deque()  # [start_ms, total]

    def _purge(self, now_ms: float) -> None:
        samples = self.samples
        expire = self.num * self.size_ms
        while samples and now_ms - samples[0][0] >= expire:
            samples.popleft()

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        samples = self.samples
        if not samples or now_ms - samples[-1][0] >= self.size_ms:
            samples.append([now_ms, 0.0])
            if len(samples) > self.num:
                samples.popleft()
        samples[-1][1] += value

    def unrecord(self, value: float) -> None:
        if self.samples:
            self.samples[-1][1] -= value

    def window_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        elapsed = now_ms - self.samples[0][0] if self.samples else 0.0
        full = int(elapsed // self.size_ms)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.size_ms
        return max(elapsed, 1.0)  # quota.window.num=1 right after a new sample: 1 ms, not 0

    def measure(self, now_ms: float) -> float:
        window = self.window_ms(now_ms)
        return sum(s[1] for s in self.samples) / (window / 1000.0)

    def throttle_ms(self, limit: float, now_ms: float) -> int:
        """Kafka's ``QuotaUtils.throttleTime`` once the rate exceeds ``limit``; else 0."""
        rate = self.measure(now_ms)
        if rate <= limit:
            return 0
        return round((rate - limit) / limit * self.window_ms(now_ms))


class Quotas:
    """Configured quotas plus the live rates they are enforced with."""

    def __init__(self, configs: QuotaConfigs, window_num: int, window_size_s: int) -> None:
        self.configs = configs
        self.num = window_num
        self.size_ms = window_size_s * 1000
        self.rates: dict[tuple[str, tuple[str, str]], Rate] = {}
        self.active = bool(configs.entries)

    def changed(self) -> None:
        self.active = bool(self.configs.entries)

    def record(self, key: str, user: str, client: str, value: float, now_ms: float) -> tuple[int, Rate | None]:
        """Record ``value`` against the connection's quota for ``key``: (throttle ms, rate)."""
        q = self.configs.quota(key, user, client)
        if q is None:
            return 0, None
        limit, rate_key = q
        rk = (key, rate_key)
        rate = self.rates.get(rk)
        if rate is None:
            rate = self.rates[rk] = Rate(self.num, self.size_ms)
        rate.record(value, now_ms)
        return rate.throttle_ms(limit, now_ms), rate


class Usage(NamedTuple):
    """What one request costs against the quotas."""

    request_bytes: int
    response_bytes: int
    thread_seconds: float
