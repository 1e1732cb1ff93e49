"""Streaming reads, writes and the ready-made jobs, through a real Spark session and broker."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from client.partitioner import partition_for_key


def _ms(col: Any) -> list[int]:
    """Epoch ms of a Parquet timestamp column, whatever unit Spark wrote (INT96 reads as ns)."""
    per_ms = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[col.type.unit]
    return [int(v // per_ms) for v in col.cast(pa.int64()).to_pylist()]


def test_stream_sees_each_record_once_and_resumes_from_its_checkpoint(
    spark: Any, broker: Any, logtool: Any, tmp_path: Path
) -> None:
    logtool.create("live", 2)
    now = int(time.time() * 1000)
    # Records before the starting timestamp must never be seen.
    logtool.produce("live", 0, [(now - 60_000, b"old", b"old", [])])
    logtool.produce("live", 1, [(now - 60_000, b"old", b"old", [])])
    start = now - 30_000
    checkpoint = str(tmp_path / "ckpt")
    produced: list[bytes] = []
    seen: list[tuple[int, list[bytes]]] = []

    def produce_rounds(first: int, rounds: int) -> None:
        for r in range(rounds):
            for p in (0, 1):
                vals = [b"%d-%d-%d" % (first + r, p, i) for i in range(20)]
                logtool.produce("live", p, [(now + r, None, v, []) for v in vals])
                produced.extend(vals)
            time.sleep(0.3)

    def collect(df: Any, batch_id: int) -> None:
        seen.append((batch_id, [r.value for r in df.select("value").collect()]))

    def start_query(**trigger: Any) -> Any:
        stream = (
            spark.readStream.format("chronolog")
            .option("bootstrap.servers", broker.bootstrap)
            .option("subscribe", "live")
            .option("startingTimestamp", str(start))
            .option("maxOffsetsPerTrigger", "40")
            .load()
        )
        return (
            stream.writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint).trigger(**trigger).start()
        )

    q = start_query(processingTime="100 milliseconds")
    producer = threading.Thread(target=produce_rounds, args=(0, 3))
    producer.start()
    producer.join()
    q.processAllAvailable()
    q.stop()
    first = [v for _b, vs in seen for v in vs]
    assert sorted(first) == sorted(produced)  # each once, none of the old ones
    sizes = [p["numInputRows"] for p in q.recentProgress]
    assert max(sizes) <= 40 and sum(sizes) == len(produced)
    assert len([s for s in sizes if s]) >= 3

    before, batches_before = len(produced), len(seen)
    produce_rounds(100, 1)
    q2 = start_query(availableNow=True)
    q2.awaitTermination(120)
    second = [v for _b, vs in seen[batches_before:] for v in vs]
    assert sorted(second) == sorted(produced[before:])
    # Micro-batch ids continue from the checkpoint instead of starting over.
    assert min(b for b, _vs in seen[batches_before:]) > max(b for b, _vs in seen[:batches_before])


def test_a_dataframe_written_then_read_back_is_identical(
    spark: Any, broker: Any, logtool: Any, helpers: Any
) -> None:
    logtool.create("src", 3)
    logtool.create("dst", 3)
    logtool.random_log("src", 3, random.Random(3), t0=int(time.time() * 1000) - 60_000,
                       batches=20)
    src = spark.read.format("chronolog").option("bootstrap.servers", broker.bootstrap).option(
        "subscribe", "src").load()
    # The read DataFrame is written back unchanged (offset/timestampType are ignored).
    src.write.format("chronolog").mode("append").option("bootstrap.servers", broker.bootstrap) \
        .option("topic", "dst").save()
    dst = spark.read.format("chronolog").option("bootstrap.servers", broker.bootstrap).option(
        "subscribe", "dst").load()
    want = helpers.rows(src)
    got = helpers.rows(dst)
    # Spark writes partitions in parallel, so compare each partition's records in offset order.
    assert [(r.partition, r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (r.partition, r.offset, r.timestamp, r.key, r.value, r.headers) for r in want]


def test_keyed_rows_land_on_murmur2_partitions_and_string_columns_are_utf8(
    spark: Any, broker: Any, logtool: Any, helpers: Any
) -> None:
    logtool.create("keyed", 4)
    rows = [(f"user-{i}", f"event {i} ü", i * 1000) for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string, ms long").selectExpr(
        "key", "value", "timestamp_millis(ms) as timestamp",
        "array(named_struct('key', 'n', 'value', cast(key as binary))) as headers")
    df.write.format("chronolog").mode("append").option("bootstrap.servers", broker.bootstrap) \
        .option("topic", "keyed").save()
    back = helpers.rows(spark.read.format("chronolog").option(
        "bootstrap.servers", broker.bootstrap).option("subscribe", "keyed").load())
    assert len(back) == 200
    for r in back:
        assert r.key is not None
        i = int(r.key.decode().split("-")[1])
        assert r.partition == partition_for_key(r.key, 4)
        assert r.value == f"event {i} ü".encode()
        assert r.timestamp == i * 1000
        assert r.headers == (("n", r.key),)


def test_writing_without_a_value_column_or_topic_fails_clearly(spark: Any, broker: Any) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="value"):
        df.write.format("chronolog").mode("append").option(
            "bootstrap.servers", broker.bootstrap).option("topic", "x").save()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="topic"):
        df.write.format("chronolog").mode("append").option(
            "bootstrap.servers", broker.bootstrap).save()


def test_export_cli_parquet_equals_the_window_and_rollup_counts_it(
    spark: Any, broker: Any, logtool: Any, helpers: Any, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from client.cli import main
    from pipeline import jobs

    logtool.create("exp", 2)
    t0 = (int(time.time() * 1000) - 3_600_000) // 60_000 * 60_000
    logtool.random_log("exp", 2, random.Random(5), t0=t0, batches=15, spread_ms=180_000)
    log = logtool.oracle("exp")
    t1, t2 = t0 + 20_000, t0 + 150_000
    out = tmp_path / "export"
    code = main(["pipeline", "export", "--topic", "exp", "--from", str(t1), "--to", str(t2),
                 "--out", str(out), "--bootstrap-server", broker.bootstrap, "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert str(out) in printed
    want = helpers.window(log, t1, t2)
    table = pq.read_table(str(out)).sort_by([("partition", "ascending"), ("offset", "ascending")])
    rows = table.to_pylist()
    assert [(r["partition"], r["offset"], r["key"], r["value"],
             tuple((h["key"], h["value"]) for h in r["headers"])) for r in rows] == [
        (r.partition, r.offset, r.key, r.value, r.headers) for r in want]
    assert _ms(table.column("timestamp")) == [r.timestamp for r in want]

    result = jobs.rollup(spark, broker.bootstrap, "exp", t1, t2, "1m", str(tmp_path / "rollup"),
                         show_progress=False)
    roll_table = pq.read_table(str(tmp_path / "rollup"))
    roll = roll_table.to_pylist()
    starts = _ms(roll_table.column("window_start"))
    expect: dict[tuple[int, int], list[int]] = {}
    for r in want:
        k = (r.timestamp // 60_000 * 60_000, r.partition)
        size = len(r.key or b"") + len(r.value or b"") + sum(
            len(hk.encode()) + len(hv or b"") for hk, hv in r.headers)
        e = expect.setdefault(k, [0, 0])
        e[0] += 1
        e[1] += size
    got = {(starts[i], r["partition"]): [r["records"], r["bytes"]] for i, r in enumerate(roll)}
    assert got == expect
    assert result.records_in_window == len(want)


def test_csv_export_carries_binary_as_base64_and_headers_as_json(
    spark: Any, broker: Any, logtool: Any, helpers: Any, tmp_path: Path
) -> None:
    import base64
    import csv
    import json

    from pipeline import jobs

    logtool.create("csv", 1)
    t0 = int(time.time() * 1000) - 60_000
    logtool.produce("csv", 0, [(t0 + i, b"k%d" % i if i % 2 else None, bytes([i, 0, 255]),
                                [("h", b"\x01")] if i % 3 == 0 else []) for i in range(12)])
    result = jobs.export(spark, broker.bootstrap, "csv", t0 + 2, t0 + 9, str(tmp_path / "c"),
                         fmt="csv", show_progress=False)
    assert result.rows == 7
    files = sorted((tmp_path / "c").glob("part-*.csv"))
    rows = [r for f in files for r in csv.DictReader(f.open())]
    rows.sort(key=lambda r: int(r["offset"]))
    assert [int(r["offset"]) for r in rows] == list(range(2, 9))
    for r in rows:
        i = int(r["offset"])
        assert base64.b64decode(r["value_base64"]) == bytes([i, 0, 255])
        key = base64.b64decode(r["key_base64"]) if r["key_base64"] else None
        assert key == (b"k%d" % i if i % 2 else None)
        headers = json.loads(r["headers_json"])
        assert [(h["key"], base64.b64decode(h["value"])) for h in headers] == (
            [("h", b"\x01")] if i % 3 == 0 else [])


def test_a_stream_copies_one_topic_into_another_record_for_record(
    spark: Any, broker: Any, logtool: Any, helpers: Any, tmp_path: Path
) -> None:
    logtool.create("in", 2)
    logtool.create("out", 2)
    logtool.random_log("in", 2, random.Random(9), t0=int(time.time() * 1000) - 60_000,
                       batches=10)
    q = (
        spark.readStream.format("chronolog").option("bootstrap.servers", broker.bootstrap)
        .option("subscribe", "in").option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "150").load()
        .writeStream.format("chronolog").option("bootstrap.servers", broker.bootstrap)
        .option("topic", "out").option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True).start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    src = logtool.oracle("in")
    dst = logtool.oracle("out")
    for p in (0, 1):
        assert [(r.timestamp, r.key, r.value, r.headers) for r in dst[p]] == [
            (r.timestamp, r.key, r.value, r.headers) for r in src[p]]


def test_columnar_writes_honour_partition_and_timestamp_columns_and_null_keys(
    spark: Any, broker: Any, logtool: Any, helpers: Any
) -> None:
    logtool.create("cols", 3)
    rows = [
        (None if i % 5 == 0 else f"k{i}", f"v{i}".encode(), (i % 3) if i % 4 == 0 else None,
         None if i % 7 == 0 else 1_700_000_000_000 + i)
        for i in range(300)
    ]
    df = spark.createDataFrame(rows, "key string, value binary, partition int, ms long")
    df = df.selectExpr("key", "value", "partition", "ms as timestamp")
    before = int(time.time() * 1000)
    df.write.format("chronolog").mode("append").option("bootstrap.servers", broker.bootstrap) \
        .option("topic", "cols").save()
    back = helpers.rows(spark.read.format("chronolog").option(
        "bootstrap.servers", broker.bootstrap).option("subscribe", "cols").load())
    assert sorted(r.value for r in back) == sorted(v for _k, v, _p, _t in rows)
    by_value = {v: (k, p, t) for k, v, p, t in rows}
    for r in back:
        key, part, ts = by_value[r.value]
        assert r.key == (None if key is None else key.encode())
        if part is not None:
            assert r.partition == part
        elif key is not None:
            assert r.partition == partition_for_key(key.encode(), 3)
        if ts is not None:
            assert r.timestamp == ts
        else:
            assert before <= r.timestamp <= int(time.time() * 1000)
        assert r.headers == ()


def test_json_export_writes_one_object_per_record_with_base64_binary(
    spark: Any, broker: Any, logtool: Any, tmp_path: Path
) -> None:
    import base64
    import json

    from pipeline import jobs

    logtool.create("js-out", 1)
    t0 = int(time.time() * 1000) - 60_000
    logtool.produce("js-out", 0, [(t0 + i, b"k%d" % i, bytes([i, 1]), [("h", None)])
                                  for i in range(6)])
    result = jobs.export(spark, broker.bootstrap, "js-out", t0 + 1, t0 + 5,
                         str(tmp_path / "j"), fmt="json", show_progress=False)
    assert result.rows == 4
    docs = [json.loads(line) for f in sorted((tmp_path / "j").glob("part-*.json"))
            for line in f.read_text().splitlines()]
    docs.sort(key=lambda d: d["offset"])
    assert [d["offset"] for d in docs] == [1, 2, 3, 4]
    for d in docs:
        i = d["offset"]
        assert base64.b64decode(d["key"]) == b"k%d" % i
        assert base64.b64decode(d["value"]) == bytes([i, 1])
        assert d["headers"] == [{"key": "h"}]
