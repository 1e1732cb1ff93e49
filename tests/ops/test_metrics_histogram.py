"""The broker's plain-number histogram exports what Prometheus means by a histogram:
bucket ``le=b`` counts observations <= b (cumulative), ``+Inf`` counts all of them."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from broker.metrics import _LATENCY_BUCKETS, _Histogram

latencies = st.one_of(
    st.sampled_from(_LATENCY_BUCKETS),  # exactly on a bound: counted in that bucket
    st.floats(min_value=0.0, max_value=30.0, allow_nan=False),
)


@given(st.lists(latencies, max_size=200))
def test_buckets_are_cumulative_counts_of_values_at_or_below_each_bound(values: list[float]) -> None:
    h = _Histogram()
    for v in values:
        h.observe(v)
    buckets, total = h.export()
    bounds = [*_LATENCY_BUCKETS, math.inf]
    assert [float(le) for le, _ in buckets] == bounds
    assert [n for _, n in buckets] == [sum(1 for v in values if v <= b) for b in bounds]
    assert math.isclose(total, sum(values), rel_tol=1e-9, abs_tol=1e-12)
