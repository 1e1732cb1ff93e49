"""CountTimeWindows through the bundled client against a real broker, checked against a
brute-force oracle (every record produced, bucketed by its own timestamp).

Random disorder, equal timestamps and late batches into topics with tiny segments and
blocks; boundaries before, after and inside the data; after DeleteRecords, with
aborted transactions under read_committed, after kill -9 with the ``.tsindex``
sidecars deleted or torn, before and after the broker's background step has built
the indexes; DESCRIBE on the topic needed.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import tests.helpers.disordered_topic as dt
from client import SyncClient
from client.aio import COUNT_TIME_WINDOWS
from protocol.errors import ErrorCode, KafkaError
from tests.helpers.acls import STANDARD_AUTHORIZER
from tests.helpers.confluent import some_transactions_aborted, txn_producer
from tests.helpers.disorder import shaped_batches
from tests.helpers.sidecars import kill_with_sidecars_damaged
from tests.helpers.wait import wait_until

NOW = int(time.time() * 1000)
T0 = NOW - 40 * 86_400_000
_topics = itertools.count()


def _oracle(rows: list[dt.Row], bounds: list[int], parts: list[int],
            start: dict[int, int] | None = None) -> dict[int, list[int]]:
    out = {p: [0] * (len(bounds) - 1) for p in parts}
    for p, o, t, _ in rows:
        if o < (start or {}).get(p, 0):
            continue
        k = bisect.bisect_right(bounds, t) - 1
        if 0 <= k < len(bounds) - 1:
            out[p][k] += 1
    return out


def _bound_sets(rows: list[dt.Row], rng: random.Random) -> list[list[int]]:
    tss = sorted(r[2] for r in rows)
    sets = [[T0 - 1000, T0 - 1], [NOW + 1000, NOW + 5000], [tss[0], tss[-1] + 1],
            [T0 - 1, tss[0], tss[0], tss[-1], NOW + 10**9],
            list(range(tss[0] - 7, tss[-1] + 50_000, 50_000))]
    for _ in range(2):
        sets.append([rng.choice(tss) + rng.randint(-3, 3) for _ in range(rng.randint(2, 30))])
    return [sorted(b) for b in sets]


def _check(c: SyncClient, topic: str, rows: list[dt.Row], parts: list[int],
           rng: random.Random, start: dict[int, int] | None = None) -> None:
    for bounds in _bound_sets(rows, rng):
        assert c.count_time_windows(topic, bounds) == _oracle(rows, bounds, parts, start), bounds


@dt.disordered_examples(15, shaped_batches(2, 2000))
def test_counts_equal_the_oracle(broker, shapes, parts: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    topic = f"ctw-{next(_topics)}"
    with SyncClient(broker.bootstrap, client_id="ctw") as c:
        rows, rng = dt.fill_disordered(c, topic, parts, shapes, T0, seed)
        _check(c, topic, rows, list(range(parts)), rng)  # right after produce
        time.sleep(0.3)  # and once background slices have run
        _check(c, topic, rows, list(range(parts)), rng)
        assert c.supports(COUNT_TIME_WINDOWS)


def test_after_delete_records(sync_client: SyncClient) -> None:
    from client.admin import delete_records
    c = sync_client
    rng = random.Random(5)
    c.create_topic("ctw-del", 2, {"segment.bytes": "1000", "index.interval.bytes": "150"})
    rows = dt.produce_batches(c, "ctw-del", 2, dt.scattered_batches(rng, T0, 2, 30, 7, 90_000))
    c._call(delete_records(c.aio, "ctw-del", {0: 17, 1: 40}))
    _check(c, "ctw-del", rows, [0, 1], rng, {0: 17, 1: 40})


def test_read_committed_leaves_out_aborted_records(sync_client: SyncClient, broker) -> None:  # type: ignore[no-untyped-def]
    c = sync_client
    c.create_topic("ctw-txn", 1, {"segment.bytes": "1000", "index.interval.bytes": "100"})
    p = txn_producer(broker.bootstrap, "ctw-txn")
    rows, aborted = some_transactions_aborted(p, "ctw-txn", random.Random(9), T0, 50_000)
    # an open transaction: its records lie past the LSO
    p.begin_transaction()
    p.produce("ctw-txn", value=b"open", timestamp=T0 + 10)
    p.flush(10)
    for bounds in ([T0, T0 + 50_001], [T0, T0 + 10_000, T0 + 20_000, T0 + 60_000],
                   [T0 + 49_000, T0 + 60_000]):
        def want(keep: Callable[[bytes], bool], bounds: list[int] = bounds) -> list[int]:
            out = [0] * (len(bounds) - 1)
            for ts, v in rows:
                k = bisect.bisect_right(bounds, ts) - 1
                if 0 <= k < len(out) and keep(v):
                    out[k] += 1
            return out
        assert c.count_time_windows("ctw-txn", bounds, isolation_level=1) == {
            0: want(lambda v: v not in aborted)}
        everything = want(lambda v: True)
        if bounds[0] <= T0 + 10 < bounds[1]:
            everything[0] += 1
        assert c.count_time_windows("ctw-txn", bounds) == {0: everything}
    p.abort_transaction(15)


@pytest.mark.parametrize("damage", ["deleted", "torn"])
def test_after_kill_9_with_the_sidecars_damaged(broker, damage: str) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(3)
    with SyncClient(broker.bootstrap, client_id="ctw") as c:
        c.create_topic("ctw-kill", 1, {"segment.bytes": "1500", "index.interval.bytes": "100"})
        rows = dt.produce_batches(c, "ctw-kill", 1, dt.scattered_batches(rng, T0, 1, 40, 5, 80_000))
        # the first event-time request starts the partition's index (built on demand)
        c.count_time_windows("ctw-kill", [T0, T0 + 80_001])
    kill_with_sidecars_damaged(broker, "ctw-kill-0", ".tsindex", damage)
    with SyncClient(broker.bootstrap, client_id="ctw") as c:
        _check(c, "ctw-kill", rows, [0], rng)


def test_only_partitions_asked_in_event_time_are_indexed_in_the_background(broker) -> None:  # type: ignore[no-untyped-def]
    """The sorted-timestamp index is built on demand: a partition nobody asks in event
    time gets zone maps (their sidecars show the background step has been there) but
    no index; from its first event-time request on (a PlanTimeWindow, which does not
    wait for it) the background step indexes it, and keeps indexing its appends."""
    rng = random.Random(5)
    pdir = Path(broker.data_dir, "ctw-lazy-0")

    def sealed(suffix: str) -> int:
        return len(list(pdir.glob(f"*{suffix}")))

    def produce(c: SyncClient) -> list[dt.Row]:
        return dt.produce_batches(c, "ctw-lazy", 1, dt.scattered_batches(rng, T0, 1, 30, 5, 80_000))

    with SyncClient(broker.bootstrap, client_id="ctw") as c:
        c.create_topic("ctw-lazy", 1, {"segment.bytes": "1500", "index.interval.bytes": "100"})
        rows = produce(c)
        wait_until(lambda: sealed(".zonemap") >= sealed(".log") - 1 > 0, 20, "no zone-map sidecars")
        time.sleep(0.5)  # more background slices: still no index
        assert sealed(".tsindex") == 0
        c.plan_time_window("ctw-lazy", T0, T0 + 1000)
        wait_until(lambda: sealed(".tsindex") == sealed(".log") - 1, 20, "no index after an event-time request")
        before = sealed(".log")
        rows += produce(c)
        assert sealed(".log") > before
        wait_until(lambda: sealed(".tsindex") == sealed(".log") - 1, 20, "appends after it not indexed")
        _check(c, "ctw-lazy", rows, [0], rng)


def test_counting_needs_describe_on_the_topic(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(STANDARD_AUTHORIZER)
    with SyncClient(b.bootstrap, client_id="ctw") as c:
        dt.guarded_and_allowed(c, b.bootstrap, "ctw-guarded", "ctw-described", "DESCRIBE", T0)
        with pytest.raises(KafkaError) as exc:
            c.count_time_windows("ctw-guarded", [T0, T0 + 1], [0])
        assert exc.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert c.count_time_windows("ctw-described", [T0, T0 + 1], [0]) == {0: [1]}


def test_bad_boundaries_are_refused(sync_client: SyncClient) -> None:
    c = sync_client
    c.create_topic("ctw-bad", 1)
    with pytest.raises(ValueError):
        c.count_time_windows("ctw-bad", [5, 4])
    with pytest.raises(ValueError):
        c.count_time_windows("ctw-bad", [5])
    with pytest.raises(KafkaError) as exc:  # the broker's own limit
        c.count_time_windows("ctw-bad", list(range(10_001)))
    assert exc.value.code == ErrorCode.INVALID_REQUEST


def test_a_broker_without_the_api_is_unsupported_version(sync_client: SyncClient) -> None:
    """What a Kafka broker's ApiVersions leads to: the key is not negotiated."""
    c = sync_client
    c.create_topic("ctw-none", 1)
    c.aio._versions.pop(COUNT_TIME_WINDOWS)
    with pytest.raises(KafkaError) as exc:
        c.count_time_windows("ctw-none", [0, 1])
    assert exc.value.code == ErrorCode.UNSUPPORTED_VERSION
