"""Ready-made Spark jobs over a time window: ``export`` and ``rollup``.

Both read the window ``[from, to)`` with ``format("chronolog")`` (so they run
unchanged on a cluster: executors fetch from the broker themselves, and the
output goes wherever ``out`` points for the executors, e.g. a shared file
system or object store) and write with Spark's own writers. The window is
positional by default (Spark's Kafka meaning); ``event_time=True`` makes it the
records with from <= timestamp < to (docs/pipeline.md, "Event time").

- ``export`` writes the window's records. Parquet keeps every column as read;
  JSON writes binary columns as base64 (Spark's JSON rule); CSV cannot hold
  binary or nested columns, so key and value become base64 strings and headers
  a JSON string; CSV files have a header row and RFC 4180 quoting.
- ``rollup`` writes per interval (``every``), topic and partition: the record
  count, the key+value+header bytes, and the first/last offset of the interval.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

__all__ = ["JobResult", "read_window", "export", "rollup", "parse_interval", "FORMATS"]

FORMATS = ("parquet", "json", "csv")

_INTERVAL = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_SPARK_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


@dataclass(frozen=True)
class JobResult:
    """Where the output went and how much of it there is."""

    path: str
    rows: int
    records_in_window: int
    seconds: float


def parse_interval(text: str) -> str:
    """``1m`` / ``30s`` / ``2h`` → Spark's ``"1 minutes"``; raises ValueError otherwise."""
    m = _INTERVAL.match(text)
    if not m or int(m.group(1)) <= 0:
        raise ValueError(f"interval {text!r} must look like 500ms, 30s, 1m, 2h or 1d")
    return f"{int(m.group(1))} {_SPARK_UNITS[m.group(2)]}"


def read_window(
    spark: Any,
    bootstrap: str,
    topic: str,
    start_ms: int,
    end_ms: int,
    *,
    min_partitions: int | None = None,
    event_time: bool = False,
) -> Any:
    """The records of ``topic`` with offsets from the first at-or-after ``start_ms`` to the
    first at-or-after ``end_ms`` (exclusive), per partition: Spark's Kafka time semantics;
    with ``event_time`` the records with ``start_ms <= timestamp < end_ms``."""
    if end_ms < start_ms:
        raise ValueError(f"--to ({end_ms}) is before --from ({start_ms})")
    reader = (
        spark.read.format("chronolog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingTimestamp", str(start_ms))
        .option("endingTimestamp", str(end_ms))
    )
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    if event_time:
        reader = reader.option("eventTime", "true")
    return reader.load()


@contextmanager
def progress(spark: Any, label: str, enabled: bool = True) -> Iterator[None]:
    """Show Spark task progress on stderr while the block runs (a tqdm bar per job)."""
    if not enabled:
        yield
        return
    from tqdm import tqdm

    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()

    def poll() -> None:
        # Tasks of every stage seen so far; a stage that left the active list is done.
        stages: dict[int, tuple[int, int]] = {}
        last = (-1, -1)
        bar = tqdm(total=0, desc=label, unit="task", file=sys.stderr, leave=False)
        try:
            while not stop.wait(0.25):
                active = set(tracker.getActiveStageIds())
                for sid in active:
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        stages[sid] = (info.numTasks, info.numCompletedTasks)
                for sid, (n, _done) in stages.items():
                    if sid not in active:
                        stages[sid] = (n, n)
                now = (sum(n for n, _ in stages.values()), sum(d for _, d in stages.values()))
                if now != last and now[0]:
                    bar.total, bar.n = now
                    bar.refresh()
                    last = now
        finally:
            bar.close()

    t = threading.Thread(target=poll, name="chronolog-progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def _writer(df: Any, fmt: str, overwrite: bool) -> Any:
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    w = df.write.mode("overwrite" if overwrite else "errorifexists").format(fmt)
    if fmt == "csv":
        # RFC 4180 CSV: a header row, quotes doubled (Spark's default escapes with a backslash,
        # which Python's csv module, pandas and spreadsheets misread).
        w = w.option("header", "true").option("escape", '"')
    return w


class JobOptions(TypedDict, total=False):
    """The keywords :func:`export` and :func:`rollup` share: ``fmt`` (one of FORMATS,
    "parquet"), ``min_partitions`` (None: Spark's split), ``overwrite`` (False),
    ``show_progress`` (True), ``event_time`` (False: the positional window)."""

    fmt: str
    min_partitions: int | None
    overwrite: bool
    show_progress: bool
    event_time: bool


def export(
    spark: Any, bootstrap: str, topic: str, start_ms: int, end_ms: int, out: str,
    **options: Unpack[JobOptions],
) -> JobResult:
    """Write the window's records to ``out`` (a directory of ``fmt`` files)."""
    from pyspark.sql import functions as F

    def columns(df: Any, fmt: str) -> Any:
        if fmt != "csv":
            return df
        return df.select(
            F.base64("key").alias("key_base64"),
            F.base64("value").alias("value_base64"),
            "topic",
            "partition",
            "offset",
            "timestamp",
            "timestampType",
            F.to_json("headers").alias("headers_json"),
        )

    return _write_job(spark, bootstrap, topic, start_ms, end_ms, out, "export", columns,
                      lambda _df, rows: rows, **options)


def rollup(
    spark: Any, bootstrap: str, topic: str, start_ms: int, end_ms: int, every: str, out: str,
    **options: Unpack[JobOptions],
) -> JobResult:
    """Write per-interval record counts and bytes per partition of the window to ``out``."""
    from pyspark.sql import functions as F

    interval = parse_interval(every)
    header_bytes = F.aggregate(
        F.coalesce("headers", F.array().cast("array<struct<key:string,value:binary>>")),
        F.lit(0).cast("long"),
        lambda acc, h: acc
        + F.coalesce(F.octet_length(h["key"]), F.lit(0))
        + F.coalesce(F.octet_length(h["value"]), F.lit(0)),
    )
    size = (
        F.coalesce(F.octet_length("key"), F.lit(0))
        + F.coalesce(F.octet_length("value"), F.lit(0))
        + header_bytes
    )

    def intervals(df: Any, _fmt: str) -> Any:
        return (
            df.select(F.window("timestamp", interval).alias("w"), "topic", "partition", "offset",
                      size.alias("size"))
            .groupBy("w", "topic", "partition")
            .agg(
                F.count(F.lit(1)).alias("records"),
                F.sum("size").alias("bytes"),
                F.min("offset").alias("first_offset"),
                F.max("offset").alias("last_offset"),
            )
            .select(
                F.col("w.start").alias("window_start"),
                F.col("w.end").alias("window_end"),
                "topic",
                "partition",
                "records",
                "bytes",
                "first_offset",
                "last_offset",
            )
            .orderBy("window_start", "partition")
        )

    def records(result: Any, _rows: int) -> int:
        return int(result.agg(F.sum("records")).first()[0] or 0)

    return _write_job(spark, bootstrap, topic, start_ms, end_ms, out, "rollup", intervals,
                      records, **options)


def _write_job(
    spark: Any, bootstrap: str, topic: str, start_ms: int, end_ms: int, out: str, label: str,
    shape: Callable[[Any, str], Any], records: Callable[[Any, int], int], *,
    fmt: str = "parquet", min_partitions: int | None = None, overwrite: bool = False,
    show_progress: bool = True, event_time: bool = False,
) -> JobResult:
    """Read the window, ``shape`` it (given ``fmt``), and write it while cached; ``records``
    counts the window's records from the cached result and its row count."""
    t0 = time.monotonic()
    df = shape(read_window(spark, bootstrap, topic, start_ms, end_ms,
                           min_partitions=min_partitions, event_time=event_time), fmt)
    with progress(spark, f"{label} {topic}", show_progress):
        df.cache()
        rows = df.count()
        in_window = records(df, rows)
        _writer(df, fmt, overwrite).save(out)
        df.unpersist()
    return JobResult(out, rows, in_window, time.monotonic() - t0)
