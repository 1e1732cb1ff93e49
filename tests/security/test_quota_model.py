"""The sans-I/O quota model against brute-force oracles: Kafka's entity precedence,
DescribeClientQuotas matching, and the windowed rate and throttle time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.quotas.model import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    USER,
    QuotaConfigs,
    Rate,
    describe_matches,
    entity,
)

NAME = st.sampled_from([None, "a", "b"])
ENTITIES = st.one_of(
    st.tuples(NAME).map(lambda n: entity([(USER, n[0])])),
    st.tuples(NAME).map(lambda n: entity([(CLIENT_ID, n[0])])),
    st.tuples(NAME, NAME).map(lambda n: entity([(USER, n[0]), (CLIENT_ID, n[1])])),
)


def precedence_oracle(configured: dict, user: str, client: str):
    """Kafka's order, spelled as (user component, client component); '-' = absent."""
    order = [(user, client), (user, None), (user, "-"), (None, client), (None, None),
             (None, "-"), ("-", client), ("-", None)]
    for u, c in order:
        pairs = ([] if u == "-" else [(USER, u)]) + ([] if c == "-" else [(CLIENT_ID, c)])
        values = configured.get(tuple(sorted(pairs)))
        if values and PRODUCER_BYTE_RATE in values:
            return values[PRODUCER_BYTE_RATE]
    return None


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(ENTITIES, st.integers(1, 100).map(float), max_size=8),
       st.sampled_from(["a", "b", "c"]), st.sampled_from(["a", "b", "c"]))
def test_the_quota_of_a_connection_follows_kafkas_precedence(configured, user, client):
    configs = QuotaConfigs({e: {PRODUCER_BYTE_RATE: v} for e, v in configured.items()})
    found = configs.quota(PRODUCER_BYTE_RATE, user, client)
    expected = precedence_oracle({e: {PRODUCER_BYTE_RATE: v} for e, v in configured.items()},
                                 user, client)
    assert (found[0] if found else None) == expected


COMPONENTS = st.lists(st.tuples(st.sampled_from([USER, CLIENT_ID]), st.sampled_from([0, 1, 2]),
                                st.sampled_from(["a", "b"])), max_size=2,
                      unique_by=lambda c: c[0]).map(
    lambda cs: [(t, m, n if m == 0 else None) for t, m, n in cs])


@settings(max_examples=300, deadline=None)
@given(ENTITIES, COMPONENTS, st.booleans())
def test_describe_filters_match_like_kafka(ent, components, strict):
    names = dict(ent)
    expected = all(
        t in names and (m == 2 or (m == 1 and names[t] is None) or (m == 0 and names[t] == n))
        for t, m, n in components) and (not strict or set(names) == {t for t, _, _ in components})
    assert describe_matches(ent, components, strict) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(1, 1000)), min_size=1, max_size=40),
       st.integers(1, 5), st.sampled_from([100, 1000]))
def test_rate_is_what_the_kept_samples_hold_over_kafkas_window(events, num, size):
    rate = Rate(num, size)
    now = 0
    starts: list[list[int]] = []  # oracle: [start, total] per sample
    for gap, value in events:
        now += gap
        starts = [s for s in starts if now - s[0] < num * size]
        if not starts or now - starts[-1][0] >= size:
            starts.append([now, 0])
            starts = starts[-num:]
        starts[-1][1] += value
        rate.record(value, now)
    starts = [s for s in starts if now - s[0] < num * size]
    elapsed = now - starts[0][0] if starts else 0
    window = max(1, elapsed, elapsed + (num - 1 - elapsed // size) * size)
    expected = sum(s[1] for s in starts) / (window / 1000)
    assert abs(rate.measure(now) - expected) < 1e-6 * max(1.0, expected)
    limit = 1000.0
    want = round((expected - limit) / limit * window) if expected > limit else 0
    assert rate.throttle_ms(limit, now) == want
