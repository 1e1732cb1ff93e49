"""Event-time reads through the bundled client against a real broker, checked against a
brute-force oracle (every record produced, filtered by T1 <= ts < T2).

Records arrive with random disorder, equal timestamps and whole late batches into
topics with tiny segments; windows are random, empty, before and after all data. The
event-time read (records, and the Arrow path) must equal the oracle exactly, each
partition in offset order; every matching record must lie in a planned range. Also
after DeleteRecords, with aborted transactions (read_committed), after kill -9 with
the zone-map sidecars deleted or torn, and the positional default is unchanged.
"""

from __future__ import annotations

import itertools
import random
import time

import pyarrow as pa
import pytest

from client import SyncClient
from client.aio import PLAN_TIME_WINDOW
from tests.helpers.acls import STANDARD_AUTHORIZER
from tests.helpers.confluent import some_transactions_aborted, txn_producer
from tests.helpers.disorder import shaped_batches
from tests.helpers.disordered_topic import (
    Row,
    disordered_examples,
    fill_disordered,
    guarded_and_allowed,
    produce_batches,
    scattered_batches,
)
from tests.helpers.sidecars import kill_with_sidecars_damaged

NOW = int(time.time() * 1000)
T0 = NOW - 40 * 86_400_000
_topics = itertools.count()


def _oracle(rows: list[Row], t1: int, t2: int, start: dict[int, int]
            | None = None) -> list[Row]:
    return sorted(r for r in rows if t1 <= r[2] < t2 and r[1] >= (start or {}).get(r[0], 0))


def _read(c: SyncClient, topic: str, t1: int, t2: int, **kw: object
          ) -> list[Row]:
    return [(r.partition, r.offset, r.timestamp, r.value)
            for r in c.read_time_range(topic, t1, t2, event_time=True, **kw)]  # type: ignore[arg-type]


def _read_arrow(c: SyncClient, topic: str, t1: int, t2: int, **kw: object
                ) -> list[Row]:
    out = []
    for p, batch in c.read_time_range_arrow(topic, t1, t2, event_time=True, **kw):  # type: ignore[arg-type]
        assert isinstance(batch, pa.RecordBatch)
        d = batch.to_pydict()
        out += [(p, o, t, v) for o, t, v in zip(d["offset"], d["timestamp"], d["value"],
                                                 strict=True)]
    return out


def _windows(rows: list[Row], rng: random.Random) -> list[tuple[int, int]]:
    tss = sorted(r[2] for r in rows)
    w = [(T0 - 1000, T0 - 1), (NOW + 1000, NOW + 5000), (tss[0], tss[0]),
         (tss[0], tss[-1] + 1), (tss[-1], tss[-1] + 1)]
    for _ in range(4):
        a = rng.choice(tss)
        w.append((a - rng.randint(0, 5000), a + rng.randint(1, 20_000)))
    return w


def _check(c: SyncClient, topic: str, rows: list[Row],
           t1: int, t2: int, start: dict[int, int] | None = None) -> None:
    want = _oracle(rows, t1, t2, start)
    got = _read(c, topic, t1, t2)
    assert got == want, (t1, t2)
    assert _read_arrow(c, topic, t1, t2) == want
    plans = c.plan_time_window(topic, t1, t2)
    for p, o, _, _ in want:
        assert any(r.start_offset <= o < r.end_offset for r in plans[p].ranges), (p, o)
    # What a Spark task per planned range reads, put back together.
    per_range = [(p, r.offset, r.timestamp, r.value) for p, plan in sorted(plans.items())
                 for rng in plan.ranges for r in c.read_planned_range(topic, p, rng, t1, t2)]
    assert per_range == want
    arrow = [(p, o, t, v) for p, plan in sorted(plans.items()) for rng in plan.ranges
             for b in c.read_planned_range_arrow(topic, p, rng, t1, t2)
             for o, t, v in zip(b.column("offset").to_pylist(), b.column("timestamp").to_pylist(),
                                b.column("value").to_pylist(), strict=True)]
    assert arrow == want


@disordered_examples(25, shaped_batches(3, 400_000))
def test_event_time_reads_equal_the_oracle(broker, shapes, parts: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    topic = f"evt-{next(_topics)}"
    with SyncClient(broker.bootstrap, client_id="evt") as c:
        rows, rng = fill_disordered(c, topic, parts, shapes, T0, seed)
        for t1, t2 in _windows(rows, rng):
            _check(c, topic, rows, t1, t2)


def test_positional_stays_the_default(sync_client: SyncClient) -> None:
    c = sync_client
    c.create_topic("evt-pos", 1, {"segment.bytes": "2000"})
    rows = produce_batches(c, "evt-pos", 1, [(0, [T0 + 100, T0 + 300]), (0, [T0 + 50]),
                                            (0, [T0 + 400, T0 + 200])])
    positional = [(r.offset, r.timestamp) for r in c.read_time_range("evt-pos", T0 + 100, T0 + 250)]
    s, e = c.time_range_offsets("evt-pos", T0 + 100, T0 + 250)[0]
    assert positional == [(o, t) for _, o, t, _ in rows if s <= o < e]
    assert positional != [(o, t) for _, o, t, _ in _oracle(rows, T0 + 100, T0 + 250)]
    assert [(o, t) for _, o, t, _ in _read(c, "evt-pos", T0 + 100, T0 + 250)] == [
        (0, T0 + 100), (4, T0 + 200)]
    plan = c.plan_time_window("evt-pos", T0, T0 + 1000)[0]
    assert plan.disorder.late_records == 2  # T0+50 after T0+300, T0+200 after T0+400
    assert plan.disorder.max_lateness_ms == 250
    assert plan.disorder.records == 5
    assert c.disorder_stats("evt-pos") == {0: plan.disorder}
    assert c.supports(PLAN_TIME_WINDOW)


def test_after_delete_records(sync_client: SyncClient) -> None:
    from client.admin import delete_records
    c = sync_client
    rng = random.Random(5)
    c.create_topic("evt-del", 2, {"segment.bytes": "1000"})
    rows = produce_batches(c, "evt-del", 2, scattered_batches(rng, T0, 2, 30, 7, 90_000))
    c._call(delete_records(c.aio, "evt-del", {0: 17, 1: 40}))
    start = {0: 17, 1: 40}
    for t1, t2 in _windows(rows, rng):
        _check(c, "evt-del", rows, t1, t2, start)


def test_read_committed_leaves_out_aborted_records(sync_client: SyncClient, broker) -> None:  # type: ignore[no-untyped-def]
    c = sync_client
    c.create_topic("evt-txn", 1, {"segment.bytes": "1000"})
    p = txn_producer(broker.bootstrap, "evt-txn")
    rows, aborted = some_transactions_aborted(p, "evt-txn", random.Random(9), T0, 50_000)
    for t1, t2 in [(T0, T0 + 50_001), (T0 + 10_000, T0 + 20_000), (T0 + 49_000, T0 + 60_000)]:
        want = sorted((ts, v) for ts, v in rows if t1 <= ts < t2 and v not in aborted)
        got = [(r.timestamp, r.value) for r in c.read_time_range(
            "evt-txn", t1, t2, event_time=True, isolation_level=1)]
        assert sorted(got) == want
        assert [o for o in (r.offset for r in c.read_time_range(
            "evt-txn", t1, t2, event_time=True, isolation_level=1))] == sorted(
            r.offset for r in c.read_time_range("evt-txn", t1, t2, event_time=True,
                                                 isolation_level=1))
        arrow = sorted((t, v) for _, b in c.read_time_range_arrow(
            "evt-txn", t1, t2, event_time=True, isolation_level=1)
            for t, v in zip(b.column("timestamp").to_pylist(), b.column("value").to_pylist(),
                            strict=True))
        assert arrow == want
        everything = sorted((r.timestamp, r.value) for r in c.read_time_range(
            "evt-txn", t1, t2, event_time=True))
        assert everything == sorted((ts, v) for ts, v in rows if t1 <= ts < t2)


@pytest.mark.parametrize("damage", ["deleted", "torn"])
def test_after_kill_9_with_the_sidecars_damaged(broker, damage: str) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(3)
    with SyncClient(broker.bootstrap, client_id="evt") as c:
        c.create_topic("evt-kill", 1, {"segment.bytes": "1500", "index.interval.bytes": "100"})
        rows = produce_batches(c, "evt-kill", 1, scattered_batches(rng, T0, 1, 40, 5, 80_000))
    kill_with_sidecars_damaged(broker, "evt-kill-0", ".zonemap", damage)
    with SyncClient(broker.bootstrap, client_id="evt") as c:
        for t1, t2 in _windows(rows, rng):
            _check(c, "evt-kill", rows, t1, t2)
        stats = c.plan_time_window("evt-kill", 0, 1)[0].disorder
        run = -1
        late = 0
        for _, _, t, _ in sorted(rows):
            late += t < run
            run = max(run, t)
        assert (stats.late_records, stats.records) == (late, len(rows))


def test_planning_needs_describe_on_the_topic(broker_factory) -> None:  # type: ignore[no-untyped-def]
    from protocol.errors import ErrorCode, KafkaError

    b = broker_factory(STANDARD_AUTHORIZER)
    with SyncClient(b.bootstrap, client_id="evt") as c:
        # READ implies DESCRIBE
        guarded_and_allowed(c, b.bootstrap, "evt-guarded", "evt-readable", "READ", T0)
        with pytest.raises(KafkaError) as exc:
            c.plan_time_window("evt-guarded", T0, T0 + 1, [0])
        assert exc.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert [r.value for r in c.read_time_range("evt-readable", T0, T0 + 1, [0],
                                                   event_time=True)] == [b"x"]
