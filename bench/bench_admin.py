"""Admin operations on a running broker: what an online change costs.

- IncrementalAlterConfigs round trip (a topic's retention.ms, persisted with an fsynced
  rename of the registry and pushed to every partition log), p50 / p99;
- ``delete-records --before-time`` on a 1M-record partition of 8 MiB segments: each call
  is a ListOffsets by timestamp plus a DeleteRecords that moves the log start,
  deletes the segments wholly below it and checkpoints; ten calls each cut 10 %.
"""

from __future__ import annotations

import asyncio
import statistics
import struct
import time
from pathlib import Path

import crc32c

from bench.harness import SCALE, start_broker, stop_broker
from bench.report import Report
from client import admin
from client.aio import Client
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

N_RECORDS = int(1_000_000 * SCALE)
N_ALTERS = 500
T0 = 1_700_000_000_000
SECTION = "admin"


def write_topic(data: Path, topic: str, records: int, per_batch: int = 1000) -> int:
    """``records`` 100-byte records, timestamps T0 + offset, in 8 MiB segments; returns
    the number of segments."""
    tpl = bytearray(build_batch([Record(0, T0 + i, None, b"x" * 100, []) for i in range(per_batch)]))
    log = Log(data / f"{topic}-0", LogConfig(retention_ms=-1, segment_bytes=8 << 20))
    for off in range(0, records, per_batch):
        struct.pack_into(">q", tpl, 0, off)
        struct.pack_into(">qq", tpl, 27, T0 + off, T0 + off + per_batch - 1)
        struct.pack_into(">I", tpl, 17, crc32c.crc32c(memoryview(tpl)[21:]))
        log.append_as_is(bytes(tpl), now_ms=T0 + records)
    n = len(log.segments)
    log.close()
    return n


async def alter_round_trips(bootstrap: str, topic: str) -> list[float]:
    out = []
    async with await Client.connect(bootstrap) as c:
        for i in range(N_ALTERS):
            started = time.perf_counter()
            await admin.alter_topic_configs(c, topic, {"retention.ms": str(3_600_000 + i)})
            out.append(time.perf_counter() - started)
    return out


async def delete_by_time(bootstrap: str, topic: str) -> list[float]:
    out = []
    async with await Client.connect(bootstrap) as c:
        for k in range(1, 11):
            t = T0 + N_RECORDS * k // 10
            started = time.perf_counter()
            offsets = await admin.offsets_before_time(c, topic, t, [0])
            await admin.delete_records(c, topic, offsets)
            out.append(time.perf_counter() - started)
    return out


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    segments = write_topic(data, "adm", N_RECORDS)
    proc, port = start_broker(root, data, {"log.retention.ms": "-1"}, timeout=120)
    bootstrap = f"127.0.0.1:{port}"
    try:
        alters = asyncio.run(alter_round_trips(bootstrap, "adm"))
        report.add(SECTION, "IncrementalAlterConfigs round trip p50 (persisted, applied)",
                   statistics.median(alters) * 1e6, "µs", note=f"{N_ALTERS} calls, one client")
        report.add(SECTION, "IncrementalAlterConfigs round trip p99",
                   statistics.quantiles(alters, n=100)[98] * 1e6, "µs")
        cuts = asyncio.run(delete_by_time(bootstrap, "adm"))
        report.add(SECTION, "delete-records --before-time, per call p50",
                   statistics.median(cuts) * 1e3, "ms",
                   note=f"{N_RECORDS / 1e6:g}M records in {segments} segments of 8 MiB, "
                        "10 cuts of 10 %: ListOffsets by time + DeleteRecords + checkpoint")
        report.add(SECTION, "delete-records --before-time, slowest call",
                   max(cuts) * 1e3, "ms")
    finally:
        stop_broker(proc, 60)
