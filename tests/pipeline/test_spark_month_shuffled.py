"""A realistic event-time read: a year of events whose months arrive shuffled and whose
days arrive partly late (``bench.datasets.month_shuffled``), loaded through the bundled
client as a producer would send it, read by Spark over a one-day, a three-day and a
one-week window.

With ``eventTime`` the rows equal a brute-force filter of what was produced, each
partition in offset order, and the tasks fetch a small part of the topic; the
positional read of the same window (Kafka's offsetsForTimes meaning) differs, and its
planner logs the one WARNING that names ``.option("eventTime", "true")`` with each
partition's late count and largest lateness (counted here from the produced order).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from bench.datasets import SAMPLE_WINDOWS, day_ms, month_shuffled
from client import ProducerRecord, SyncClient
from pipeline.options import parse_read_options
from pipeline.source import event_time_partitions
from tests.helpers.broker import free_port_number

N = 20_000
PARTS = 2
TOPIC = "flights"


WINDOWS = {name: (day_ms(a), day_ms(b)) for name, (a, b) in SAMPLE_WINDOWS.items()}


# docs/pipeline.md quotes these: (records in the window, positional rows, of which in it).
DOC_FIGURES = {"one day": (53, 0, 0), "three days at year end": (181, 6821, 181),
               "one week": (433, 433, 425)}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory, broker_process_class: Any
           ) -> Iterator[tuple[Any, dict[int, list[tuple[int, int]]]]]:
    """The broker and, per partition, (offset, timestamp) of every record in arrival order."""
    data = tmp_path_factory.mktemp("month-shuffled") / "data"
    data.mkdir()
    b = broker_process_class(data, free_port_number(), {}).start()
    stamps = [int(t) for t in month_shuffled(N)]
    produced: dict[int, list[tuple[int, int]]] = {}
    with SyncClient(b.bootstrap) as c:
        # Old event times: no time retention; segments small enough that windows span some;
        # 4 KiB batches, the offset index's interval (a zone-map block is whole batches).
        c.create_topic(TOPIC, PARTS, {"retention.ms": "-1", "segment.bytes": str(256 * 1024)})
        for p in range(PARTS):
            mine = stamps[p::PARTS]  # round robin, each partition in arrival order
            offs = c.produce(TOPIC, [ProducerRecord(key=b"f%d" % i, value=b"flight %d" % i,
                                                    timestamp=t) for i, t in enumerate(mine)],
                             partition=p, max_batch_bytes=4096)
            produced[p] = list(zip(offs, mine, strict=True))
    yield b, produced
    b.stop()


def _read(spark: Any, bootstrap: str, t1: int, t2: int, *, event_time: bool
          ) -> list[tuple[int, int, int]]:
    r = (spark.read.format("chronolog").option("bootstrap.servers", bootstrap)
         .option("subscribe", TOPIC).option("startingTimestamp", str(t1))
         .option("endingTimestamp", str(t2)))
    if event_time:
        r = r.option("eventTime", "true")
    table = r.load().select("partition", "offset", "timestamp").toArrow()
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    return [(p, o, t // 1000) for p, o, t in zip(table.column("partition").to_pylist(),
                                                  table.column("offset").to_pylist(), ts,
                                                  strict=True)]


def _oracle(produced: dict[int, list[tuple[int, int]]], t1: int, t2: int
            ) -> list[tuple[int, int, int]]:
    return [(p, o, t) for p in sorted(produced) for o, t in produced[p] if t1 <= t < t2]


def _late(stamps: list[tuple[int, int]]) -> tuple[int, int]:
    """(late records, max lateness) by brute force: below the running max before them."""
    run, late, worst = -1, 0, 0
    for _, t in stamps:
        if t < run:
            late += 1
            worst = max(worst, run - t)
        run = max(run, t)
    return late, worst


def _warnings(spark: Any) -> list[str]:
    from pyspark.sql import functions as F

    rows = (spark.tvf.python_worker_logs().where(F.col("logger") == "pipeline.disorder")
            .where(F.col("msg").contains(f"{TOPIC}-0")).select("level", "msg").collect())
    assert all(r.level == "WARNING" for r in rows)
    return [r.msg for r in rows]


@pytest.mark.parametrize("window", list(WINDOWS))
def test_event_time_windows_are_exact_and_positional_ones_warn(
    spark: Any, loaded: tuple[Any, dict[int, list[tuple[int, int]]]], window: str
) -> None:
    broker, produced = loaded
    t1, t2 = WINDOWS[window]
    want = _oracle(produced, t1, t2)
    assert len(want) > 30  # the window has records to find

    got = _read(spark, broker.bootstrap, t1, t2, event_time=True)
    assert got == want  # rows, and each partition in offset order (tasks in partition order)

    opts = parse_read_options({"bootstrap.servers": broker.bootstrap, "subscribe": TOPIC,
                               "eventtime": "true", "startingtimestamp": str(t1),
                               "endingtimestamp": str(t2)}, streaming=False)
    with SyncClient(broker.bootstrap) as c:
        planned = sum(t.bytes for t in event_time_partitions(c, opts))
    topic_bytes = sum(f.stat().st_size for f in Path(broker.data_dir).glob(f"{TOPIC}-*/*.log"))
    # A block is skipped when its [min, max] misses the window; blocks where one month's
    # arrivals end and another's begin span months, so a plan is a superset (the
    # simulated blocks of these windows: 2 to 11 of 67 per partition).
    assert planned <= 0.25 * topic_bytes, (planned, topic_bytes)

    spark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
    try:
        before = len(_warnings(spark))
        positional = _read(spark, broker.bootstrap, t1, t2, event_time=False)
        _read(spark, broker.bootstrap, t1, t2, event_time=True)  # no warning for this one
        new = _warnings(spark)[before:]
    finally:
        spark.conf.unset("spark.sql.pyspark.worker.logging.enabled")
    assert sorted(positional) != want
    inside = sum(t1 <= t < t2 for _, _, t in positional)
    assert (len(want), len(positional), inside) == DOC_FIGURES[window]
    assert len(new) == 1, new
    (msg,) = new
    assert '.option("eventTime", "true")' in msg
    for p in range(PARTS):
        late, worst = _late(produced[p])
        assert late > 0
        assert f"{TOPIC}-{p}: {late:,} of {len(produced[p]):,} records arrived late" in msg
        assert f"({worst} ms)" in msg


def test_a_positional_window_over_in_order_data_does_not_warn(
    spark: Any, loaded: tuple[Any, dict[int, list[tuple[int, int]]]]
) -> None:
    from pyspark.sql import functions as F

    broker, _ = loaded
    with SyncClient(broker.bootstrap) as c:
        c.create_topic("in-order", 1, {"retention.ms": "-1"})
        c.produce("in-order", [ProducerRecord(value=b"%d" % i, timestamp=1_700_000_000_000 + i)
                               for i in range(100)], partition=0)
    spark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
    try:
        rows = (spark.read.format("chronolog").option("bootstrap.servers", broker.bootstrap)
                .option("subscribe", "in-order").option("startingTimestamp", "1700000000010")
                .option("endingTimestamp", "1700000000020").load().collect())
        logged = (spark.tvf.python_worker_logs().where(F.col("msg").contains("in-order-0"))
                  .count())
    finally:
        spark.conf.unset("spark.sql.pyspark.worker.logging.enabled")
    assert len(rows) == 10
    assert logged == 0
