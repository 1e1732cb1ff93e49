"""Batch reads through a real Spark session from a real broker, against the codec oracle."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.fetcher import DataLossError, FetchStats, read_range


def _read(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    r = spark.read.format("chronolog").option("bootstrap.servers", bootstrap).option(
        "subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_random_time_windows_return_exactly_the_oracles_records(
    spark: Any, broker: Any, logtool: Any, helpers: Any
) -> None:
    rng = random.Random(4)
    t0 = int(time.time() * 1000) - 86_400_000
    logtool.create("ct", 3)
    logtool.random_log("ct", 3, rng, t0=t0, batches=25)
    logtool.create("lat", 2, {"message.timestamp.type": "LogAppendTime"})
    for _ in range(8):
        logtool.random_log("lat", 2, rng, t0=t0, batches=1)
        time.sleep(0.02)
    logs = {"ct": logtool.oracle("ct"), "lat": logtool.oracle("lat")}
    assert all(r.timestamp_type == 1 for rows in logs["lat"].values() for r in rows)
    bounds = {
        t: (min(r.timestamp for rows in log.values() for r in rows),
            max(r.timestamp for rows in log.values() for r in rows))
        for t, log in logs.items()
    }

    @settings(max_examples=7, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        topic = data.draw(st.sampled_from(["ct", "lat"]))
        lo, hi = bounds[topic]
        t1 = data.draw(st.integers(lo - 50, hi + 50))
        t2 = data.draw(st.integers(t1, hi + 50))
        df = _read(spark, broker.bootstrap, topic, startingTimestamp=str(t1),
                   endingTimestamp=str(t2))
        assert helpers.rows(df) == helpers.window(logs[topic], t1, t2)

    check()


def test_min_partitions_split_the_read_and_every_record_comes_once(
    spark: Any, broker: Any, logtool: Any, helpers: Any
) -> None:
    rng = random.Random(7)
    logtool.create("split", 2)
    logtool.random_log("split", 2, rng, t0=int(time.time() * 1000) - 3_600_000, batches=30)
    log = logtool.oracle("split")
    df = _read(spark, broker.bootstrap, "split", minPartitions="9")
    assert df.rdd.getNumPartitions() >= 8
    assert helpers.rows(df) == helpers.window(log, None, None)
    capped = _read(spark, broker.bootstrap, "split", maxRecordsPerPartition="37")
    total = sum(len(v) for v in log.values())
    assert capped.rdd.getNumPartitions() >= total // 37
    assert helpers.rows(capped) == helpers.window(log, None, None)


def test_explicit_offsets_json_and_by_timestamp_json_per_partition(
    spark: Any, broker: Any, logtool: Any, helpers: Any
) -> None:
    rng = random.Random(11)
    logtool.create("js", 2)
    t0 = int(time.time() * 1000) - 3_600_000
    logtool.random_log("js", 2, rng, t0=t0, batches=12)
    log = logtool.oracle("js")
    df = _read(spark, broker.bootstrap, "js", startingOffsets='{"js": {"0": 3, "1": -2}}',
               endingOffsets='{"js": {"0": -1, "1": 5}}')
    want = [r for r in log[0] if r.offset >= 3] + [r for r in log[1] if r.offset < 5]
    assert helpers.rows(df) == want
    t_mid = t0 + 5_000
    df = _read(spark, broker.bootstrap, "js",
               startingOffsetsByTimestamp=f'{{"js": {{"0": {t_mid}, "1": {t0}}}}}')
    w0 = helpers.window({0: log[0]}, t_mid, None)
    w1 = helpers.window({1: log[1]}, t0, None)
    assert helpers.rows(df) == w0 + w1


def test_a_task_fetches_little_more_than_its_range(broker: Any, logtool: Any) -> None:
    logtool.create("bytes", 1)
    t0 = int(time.time() * 1000) - 3_600_000
    sizes = []
    for b in range(40):
        recs = [(t0 + b * 100 + i, None, bytes(100), []) for i in range(100)]
        logtool.produce("bytes", 0, recs)
    buf = logtool.client.fetch_raw("bytes", 0, 0, 1 << 24).records_bytes
    from storage.records import iter_batches

    sizes = [h.size for _pos, h in iter_batches(buf)]
    # Offsets 1000..3000 lie in batches 10..29: those 20 batches are the window's bytes.
    in_window = sum(sizes[10:30])
    stats = FetchStats()
    got = sum(b.num_rows for b in read_range(broker.bootstrap, "bytes", 0, 1000, 3000,
                                             fetch_max_bytes=1 << 20, stats=stats))
    assert got == 2000
    assert stats.bytes_fetched / in_window <= 1.1, (stats.bytes_fetched, in_window)


def test_empty_window_and_window_after_the_last_record_are_empty(
    spark: Any, broker: Any, logtool: Any
) -> None:
    logtool.create("few", 1)
    t0 = int(time.time() * 1000) - 3_600_000
    logtool.produce("few", 0, [(t0, b"a", b"1", []), (t0 + 10, b"b", b"2", [])])
    assert _read(spark, broker.bootstrap, "few", startingTimestamp=str(t0 + 1),
                 endingTimestamp=str(t0 + 5)).count() == 0
    assert _read(spark, broker.bootstrap, "few", startingTimestamp=str(t0 + 11)).count() == 0
    assert _read(spark, broker.bootstrap, "few", startingTimestamp=str(t0 + 1)).count() == 1


def test_a_range_past_the_end_of_the_log_fails_loudly_unless_data_loss_is_allowed(
    broker: Any, logtool: Any
) -> None:
    logtool.create("short", 1)
    t0 = int(time.time() * 1000) - 60_000
    logtool.produce("short", 0, [(t0 + i, None, b"%d" % i, []) for i in range(10)])
    with pytest.raises(DataLossError, match="log ends at 10"):
        list(read_range(broker.bootstrap, "short", 0, 0, 50, fetch_max_bytes=1 << 20))
    rows = list(read_range(broker.bootstrap, "short", 0, 0, 50, fetch_max_bytes=1 << 20,
                           fail_on_data_loss=False))
    assert sum(b.num_rows for b in rows) == 10
    with pytest.raises(DataLossError, match="past the end of the log"):
        list(read_range(broker.bootstrap, "short", 0, 20, 50, fetch_max_bytes=1 << 20))
    assert list(read_range(broker.bootstrap, "short", 0, 20, 50, fetch_max_bytes=1 << 20,
                           fail_on_data_loss=False)) == []


def test_a_user_schema_is_refused_with_a_clear_message(spark: Any, broker: Any) -> None:
    reader = spark.read.format("chronolog").schema("value string").option(
        "bootstrap.servers", broker.bootstrap).option("subscribe", "x")
    with pytest.raises(Exception, match="fixed schema"):
        reader.load().collect()
