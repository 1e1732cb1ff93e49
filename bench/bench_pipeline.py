"""Spark reads of a time window from a real broker, beside the Arrow ceiling of a Python source.

One run, same Spark session, same 2 tasks, same rows:
- ``chronolog``: ``spark.read.format("chronolog")`` of a 1M × 100 B window
  (``startingTimestamp``/``endingTimestamp``) written to the ``noop`` sink;
- ``ceiling``: a Python data source that only yields pre-built Arrow batches of
  the same schema, shape and batch size (no broker, no decoding) to ``noop`` —
  the fastest any Python data source can hand rows to Spark here;
- their ratio (target >= 0.6);
- bytes fetched from the broker by the window's read tasks / bytes of the
  record batches that hold the window (target <= 1.1), counted by running the
  tasks' own ``read()`` path with fetch statistics;
- the decoder alone (fetched bytes → Arrow rows), in-process;
- ``df.write.format("chronolog")`` of as many keyed 100 B rows as the window
  holds (1M), and its rate over the read rate of the same number of rows.

``CHRONOLOG_BENCH_PIPELINE_RECORDS`` scales the window (default 1,000,000).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from bench.harness import start_broker, stop_broker
from bench.report import Report

RECORDS = int(os.environ.get("CHRONOLOG_BENCH_PIPELINE_RECORDS", "1000000"))
PARTITIONS = 2
PER_BATCH = 2000
VALUE = 100
OUTSIDE = 20_000
"""Records before and after the window in each partition (the window must be a real cut)."""

SECTION = "pipeline"


def _fill(bootstrap: str, t0: int) -> tuple[int, int]:
    """Produce the log; returns the window [start, end) in ms (offsets are by time)."""
    from client import SyncClient
    from storage.records import Record, build_batch, compute_crc

    per_partition = RECORDS // PARTITIONS + 2 * OUTSIDE
    template = bytearray(build_batch(
        [Record(0, i, b"key-%04d" % (i % 10000), bytes(VALUE), []) for i in range(PER_BATCH)]
    ))
    with SyncClient(bootstrap) as c:
        c.create_topic("window", PARTITIONS, {"segment.bytes": str(256 * 1024 * 1024)})
        for p in range(PARTITIONS):
            for b in range(0, per_partition, PER_BATCH):
                # Same records, new timestamps: base = t0 + b, deltas 0..PER_BATCH-1.
                struct.pack_into(">qq", template, 27, t0 + b, t0 + b + PER_BATCH - 1)
                struct.pack_into(">I", template, 17, compute_crc(template, 0, len(template)))
                c.produce_batch("window", p, bytes(template), acks=1)
    # The window starts mid-batch, 1000 records into the log's outside part.
    start = t0 + OUTSIDE - 1000
    return start, start + RECORDS // PARTITIONS


class _CeilingPartition(InputPartition):
    def __init__(self, index: int, rows: int, batch_rows: int) -> None:
        super().__init__(index)
        self.rows = rows
        self.batch_rows = batch_rows


class _CeilingReader(DataSourceReader):
    def __init__(self, rows: int, batch_rows: int) -> None:
        self.rows = rows
        self.batch_rows = batch_rows

    def partitions(self) -> Sequence[InputPartition]:
        per = self.rows // PARTITIONS
        return [_CeilingPartition(i, per, self.batch_rows) for i in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _CeilingPartition)
        batch = _arrow_batch(partition.batch_rows, int(partition.value))
        left = partition.rows
        while left > 0:
            n = min(left, batch.num_rows)
            yield batch if n == batch.num_rows else batch.slice(0, n)
            left -= n


class CeilingDataSource(DataSource):
    """Yields pre-built Arrow batches shaped like chronolog's rows: the transfer ceiling."""

    @classmethod
    def name(cls) -> str:
        return "chronolog_ceiling"

    def schema(self) -> StructType:
        from pipeline.schema import SPARK_SCHEMA

        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _CeilingReader(int(self.options["rows"]), int(self.options["batch_rows"]))


def _arrow_batch(n: int, partition: int) -> pa.RecordBatch:
    import numpy as np

    from pipeline.schema import ARROW_SCHEMA, HEADER_STRUCT, HEADERS_TYPE, TIMESTAMP_TYPE

    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"key-%04d" % (i % 10000) for i in range(n)], type=pa.binary()),
            pa.array([bytes(VALUE)] * n, type=pa.binary()),
            pa.array(["window"] * n, type=pa.string()),
            pa.array(np.full(n, partition, dtype=np.int32)),
            pa.array(np.arange(n, dtype=np.int64)),
            pa.array(np.arange(n, dtype=np.int64) * 1000, type=TIMESTAMP_TYPE),
            pa.array(np.zeros(n, dtype=np.int32)),
            pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)),
                                     pa.array([], type=HEADER_STRUCT), type=HEADERS_TYPE),
        ],
        schema=ARROW_SCHEMA,
    )


def _timed_noop(df: Any, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        best = min(best, time.perf_counter() - t)
    return best


def _bytes_ratio(bootstrap: str, start_ms: int, end_ms: int) -> tuple[float, int, int]:
    """(fetched / window-batch bytes, fetched, window bytes) running the tasks' read() path."""
    from client import SyncClient
    from pipeline.fetcher import FetchStats, read_range
    from pipeline.offsets import resolve_ranges
    from pipeline.options import parse_read_options
    from storage.records import iter_batches

    opts = parse_read_options(
        {"bootstrap.servers": bootstrap, "subscribe": "window",
         "startingtimestamp": str(start_ms), "endingtimestamp": str(end_ms)},
        streaming=False,
    )
    fetched = 0
    window_bytes = 0
    with SyncClient(bootstrap) as c:
        ranges = resolve_ranges(c, opts)
        for r in ranges:
            offset = 0
            while True:
                buf = c.fetch_raw("window", r.partition, offset, 8 << 20).records_bytes
                last = offset
                for _pos, h in iter_batches(buf):
                    if h.last_offset >= r.start and h.base_offset < r.end:
                        window_bytes += h.size
                    last = h.last_offset + 1
                if last == offset or last >= r.end:
                    break
                offset = last
    for r in ranges:
        stats = FetchStats()
        for _ in read_range(bootstrap, r.topic, r.partition, r.start, r.end,
                            fetch_max_bytes=opts.fetch_max_bytes, stats=stats):
            pass
        fetched += stats.bytes_fetched
    return fetched / window_bytes, fetched, window_bytes


def _decoder_only(bootstrap: str, start_ms: int) -> tuple[float, int]:
    """Rows/s of decode_fetch alone over eight 4 MiB fetches of the window."""
    from client import SyncClient, TopicPartition
    from pipeline.decode import decode_fetch
    from storage.records import iter_batches

    tp = TopicPartition("window", 0)
    bufs: list[tuple[int, bytes]] = []
    with SyncClient(bootstrap) as c:
        o = c.list_offsets({tp: start_ms})[tp][0]
        for _ in range(8):
            buf = c.fetch_raw("window", 0, o, 4 << 20).records_bytes
            bufs.append((o, buf))
            for _pos, h in iter_batches(buf):
                o = h.last_offset + 1
    t = time.perf_counter()
    rows = 0
    for o, buf in bufs:
        d = decode_fetch(buf, "window", 0, o, 1 << 62)
        rows += d.batch.num_rows if d.batch is not None else 0
    return rows / (time.perf_counter() - t), rows


WRITE_ROWS = max(10_000, RECORDS)


def _write(spark: Any, bootstrap: str) -> float:
    """Rows/s of ``df.write.format("chronolog")`` for keyed 100 B rows, best of 2 after a
    small warm-up write (as the read is timed best of 2 after warming the workers)."""
    from client import SyncClient

    with SyncClient(bootstrap) as c:
        c.create_topic("written", PARTITIONS, {})
    df = spark.range(0, WRITE_ROWS, numPartitions=2).selectExpr(
        "cast(id as string) as key", f"unhex(repeat('00', {VALUE})) as value"
    ).cache()
    df.count()

    def write(frame: Any) -> float:
        t = time.perf_counter()
        (frame.write.format("chronolog").mode("append").option("bootstrap.servers", bootstrap)
         .option("topic", "written").save())
        return time.perf_counter() - t

    write(df.limit(10_000))
    best = min(write(df) for _ in range(2))
    df.unpersist()
    return WRITE_ROWS / best


def run(report: Report, scratch: str) -> None:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1])]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    proc, port = start_broker(Path(scratch), Path(scratch) / "data")
    bootstrap = f"127.0.0.1:{port}"
    spark = None
    try:
        t0 = int(time.time() * 1000) - 7 * 86_400_000
        t = time.perf_counter()
        start_ms, end_ms = _fill(bootstrap, t0)
        print(f"  (filled {RECORDS + 4 * OUTSIDE:,} records in {time.perf_counter() - t:.1f} s)",
              flush=True)

        from pipeline.session import spark_session

        spark = spark_session(app_name="chronolog-bench")
        spark.dataSource.register(CeilingDataSource)
        ours = (
            spark.read.format("chronolog").option("bootstrap.servers", bootstrap)
            .option("subscribe", "window").option("startingTimestamp", str(start_ms))
            .option("endingTimestamp", str(end_ms)).load()
        )
        n = ours.count()
        if n != RECORDS:
            raise RuntimeError(f"the window holds {n} records, expected {RECORDS}")
        batch_rows = 30_000  # about what one 4 MiB fetch decodes to
        ceiling = (
            spark.read.format("chronolog_ceiling").option("rows", str(RECORDS))
            .option("batch_rows", str(batch_rows)).load()
        )
        ceiling.write.format("noop").mode("overwrite").save()  # warm the workers
        t_ceiling = _timed_noop(ceiling, 2)
        t_ours = _timed_noop(ours, 2)
        report.add(SECTION, f"read {RECORDS:,} x {VALUE} B window -> noop", RECORDS / t_ours,
                   "rows/s", note="spark local[2], 2 tasks, best of 2")
        report.add(SECTION, "Arrow ceiling (pre-built batches) -> noop", RECORDS / t_ceiling,
                   "rows/s", note="same session and run")
        report.add(SECTION, "chronolog / ceiling", t_ceiling / t_ours, "ratio", target=">= 0.6")
        ratio, fetched, window = _bytes_ratio(bootstrap, start_ms, end_ms)
        report.add(SECTION, "bytes fetched / bytes of window batches", ratio, "ratio",
                   target="<= 1.1", note=f"{fetched:,} / {window:,} B")
        rate, rows = _decoder_only(bootstrap, start_ms)
        report.add(SECTION, "decoder alone (fetched bytes -> Arrow)", rate, "rows/s",
                   note=f"{rows:,} rows in-process")
        written = _write(spark, bootstrap)
        report.add(SECTION, f"write {WRITE_ROWS:,} x {VALUE} B rows (df.write)", written,
                   "rows/s", target=">= 1,000,000",
                   note="2 tasks, acks=all, murmur2 of string keys, best of 2 after a warm-up")
        report.add(SECTION, "write rate / read rate", written / (RECORDS / t_ours), "ratio",
                   target=">= 0.75", note="same session and run")
    finally:
        if spark is not None:
            spark.stop()
        stop_broker(proc, 30)
