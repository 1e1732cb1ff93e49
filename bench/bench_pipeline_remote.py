"""A Spark read of tiered records straight from the bucket vs through the broker (#26).

One broker, one topic of 2 partitions (16 MiB segments, N x 100 B records in 2000-record
batches); its sealed segments are uploaded to a file:// bucket with the tier's uploader
(``storage.remote.tier.RemoteTier.copy``, from a copy of the partition directories, the
broker keeping its local copy), and to a bucket of the tests' S3 server (s3proxy,
tests/helpers/s3server.py, on 127.0.0.1). Then the same Spark read of every record,
written to the ``noop`` sink, twice each, best of 2:
- ``remoteStorage`` (file:// and s3://): the tiered part from the bucket, the active
  segments' tail from the broker;
- through the broker (no option).
Reported: rows/s of each, and the broker's CPU seconds during each (``/proc``), which is
what reading from the bucket takes off the broker.

``CHRONOLOG_BENCH_REMOTE_RECORDS`` sets N (default 2,000,000; the issue's figure is
10,000,000, about 1.2 GB of log and as much in the bucket).
"""

from __future__ import annotations

import os
import shutil
import struct
import time
from pathlib import Path
from typing import Any

from bench.harness import cpu_seconds, start_broker, stop_broker
from bench.report import Report

RECORDS = int(os.environ.get("CHRONOLOG_BENCH_REMOTE_RECORDS", "2000000"))
PARTITIONS = 2
PER_BATCH = 2000
VALUE = 100
TOPIC = "tiered"
SECTION = "pipeline_remote"


def _fill(bootstrap: str, t0: int) -> None:
    from client import SyncClient
    from storage.records import Record, build_batch, compute_crc

    template = bytearray(build_batch(
        [Record(0, i, b"key-%04d" % (i % 10000), bytes(VALUE), []) for i in range(PER_BATCH)]))
    with SyncClient(bootstrap) as c:
        c.create_topic(TOPIC, PARTITIONS, {"segment.bytes": str(16 * 1024 * 1024),
                                           "retention.ms": "-1"})
        for p in range(PARTITIONS):
            for b in range(0, RECORDS // PARTITIONS, PER_BATCH):
                struct.pack_into(">qq", template, 27, t0 + b, t0 + b + PER_BATCH - 1)
                struct.pack_into(">I", template, 17, compute_crc(template, 0, len(template)))
                c.produce_batch(TOPIC, p, bytes(template), acks=1)


def _upload(data: Path, scratch: Path, store: Any, bootstrap: str) -> int:
    """Upload every partition's sealed segments; returns the records now in the tier."""
    from client import SyncClient, TopicPartition
    from storage.config import LogConfig
    from storage.log import Log
    from storage.remote.tier import RemoteTier

    tiered = 0
    with SyncClient(bootstrap) as c:
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            lso = c.list_offsets({tp: -1}, 1)[tp][0]
            copy = scratch / "copy" / f"{TOPIC}-{p}"
            shutil.copytree(data / f"{TOPIC}-{p}", copy)
            log = Log.open(copy, LogConfig(), clean_shutdown=False)
            try:
                tier = RemoteTier(log, store, TOPIC, p, attach=False)
                tier.copy(lso)
                tiered += tier.highest_offset + 1
            finally:
                log.close()
            shutil.rmtree(copy)
    return tiered


def _timed(df: Any, pid: int) -> tuple[float, float]:
    """Best wall time of 2 noop writes, and the broker CPU seconds of that run."""
    best, cpu = float("inf"), 0.0
    for _ in range(2):
        c0, t = cpu_seconds(pid), time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        wall = time.perf_counter() - t
        if wall < best:
            best, cpu = wall, cpu_seconds(pid) - c0
    return best, cpu


def run(report: Report, scratch: str) -> None:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1])]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    root = Path(scratch)
    from storage.remote.store import ObjectStore, open_store
    from tests.helpers.s3server import server_class

    proc, port = start_broker(root, root / "data")
    bootstrap = f"127.0.0.1:{port}"
    bucket = (root / "bucket").as_uri()
    s3 = server_class()(root / "s3").start()
    spark = None
    try:
        s3_options = s3.options(s3.create_bucket())
        t = time.perf_counter()
        _fill(bootstrap, int(time.time() * 1000) - 86_400_000)
        tiered = _upload(root / "data", root, ObjectStore(bucket), bootstrap)
        print(f"  (filled {RECORDS:,} records, {tiered:,} of them tiered, in "
              f"{time.perf_counter() - t:.1f} s)", flush=True)
        t = time.perf_counter()
        _upload(root / "data", root, open_store(s3_options), bootstrap)
        print(f"  (uploaded them to {type(s3).__name__} in {time.perf_counter() - t:.1f} s)",
              flush=True)

        from pipeline import register
        from pipeline.session import spark_session

        spark = spark_session(app_name="chronolog-bench-remote")
        register(spark)

        remote_options = {
            "file": {"remoteStorage": bucket},
            "s3": {"remoteStorage" if k == "url" else f"remoteStorage.{k}": v
                   for k, v in s3_options.items()},
            "broker": {},
        }

        def read(how: str) -> Any:
            r = (spark.read.format("chronolog").option("bootstrap.servers", bootstrap)
                 .option("subscribe", TOPIC))
            for k, v in remote_options[how].items():
                r = r.option(k, v)
            return r.load()

        for how in remote_options:
            n = read(how).count()
            if n != RECORDS:
                raise RuntimeError(f"read {n} records via {how}, expected {RECORDS}")
        t_remote, cpu_remote = _timed(read("file"), proc.pid)
        t_s3, cpu_s3 = _timed(read("s3"), proc.pid)
        t_broker, cpu_broker = _timed(read("broker"), proc.pid)
        note = f"{tiered:,} of {RECORDS:,} records tiered; spark local[2], best of 2"
        report.add(SECTION, f"read {RECORDS:,} x {VALUE} B from the bucket (remoteStorage)",
                   RECORDS / t_remote, "rows/s", note=note)
        report.add(SECTION, f"read {RECORDS:,} x {VALUE} B from S3 (remoteStorage, "
                   f"{type(s3).__name__} on 127.0.0.1)", RECORDS / t_s3, "rows/s",
                   note=f"broker CPU {cpu_s3:.2f} s")
        report.add(SECTION, f"read {RECORDS:,} x {VALUE} B through the broker",
                   RECORDS / t_broker, "rows/s", note="same session and run")
        report.add(SECTION, "broker CPU during the bucket read", cpu_remote, "s",
                   note="planning, ListOffsets, and the untiered tail")
        report.add(SECTION, "broker CPU during the broker read", cpu_broker, "s")
    finally:
        if spark is not None:
            spark.stop()
        s3.stop()
        stop_broker(proc, 30)
