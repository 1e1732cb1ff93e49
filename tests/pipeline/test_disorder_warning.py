"""The planner's disorder warning for positional windows, without Spark: its text against
a brute-force count of the produced order, and its silence when the broker cannot say."""

from __future__ import annotations

import random
from typing import Any

from client import ProducerRecord, SyncClient
from pipeline.disorder import disorder_warning
from tests.helpers.acls import STANDARD_AUTHORIZER, allow_on_topic

T0 = 1_700_000_000_000


def _late(stamps: list[int]) -> tuple[int, int]:
    run, late, worst = -1, 0, 0
    for t in stamps:
        if t < run:
            late, worst = late + 1, max(worst, run - t)
        run = max(run, t)
    return late, worst


def test_the_warning_counts_each_late_partition_and_names_event_time(broker: Any) -> None:
    rng = random.Random(1)
    stamps = {0: [T0 + rng.randint(0, 3_600_000) for _ in range(200)],  # shuffled
              1: [T0 + i for i in range(50)],  # in order: not named
              2: [T0 + 5000, T0 + 4000, T0 + 6000, T0]}  # two late, the worst 6 s
    with SyncClient(broker.bootstrap) as c:
        c.create_topic("late", 3)
        for p, ts in stamps.items():
            c.produce("late", [ProducerRecord(value=b"x", timestamp=t) for t in ts], partition=p)
        text = disorder_warning(c, {"late": [0, 1, 2]})
        assert text is not None
        assert '.option("eventTime", "true")' in text
        for p in (0, 2):
            late, worst = _late(stamps[p])
            assert f"late-{p}: {late:,} of {len(stamps[p]):,} records arrived late" in text
            assert f"({worst} ms)" in text
        assert "late-1" not in text
        assert "late-2: 2 of 4 records arrived late, up to 6.0 s (6000 ms)" in text
        assert disorder_warning(c, {"late": [1]}) is None  # in order: nothing to say


def test_a_broker_that_cannot_say_gives_no_warning_and_no_error(broker_factory: Any) -> None:
    b = broker_factory(STANDARD_AUTHORIZER)
    with SyncClient(b.bootstrap) as c:
        c.create_topic("guarded", 1)
        c.produce("guarded", [ProducerRecord(value=b"x", timestamp=t) for t in (T0 + 1, T0)],
                  partition=0)
        allow_on_topic(b.bootstrap, "guarded", "READ", "User:someone-else")
        # The broker refuses to describe the topic to us: no way to know, so no warning.
        assert disorder_warning(c, {"guarded": [0]}) is None
