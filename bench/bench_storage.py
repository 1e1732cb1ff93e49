"""Storage engine benchmarks: append throughput, timestamp lookup latency at 1M and
10M records for two batch shapes, startup after clean and unclean shutdown, and
opening a data dir of 1,000 partitions x 10 segments (in a subprocess, for RSS).

Lookup logs are built fast: one pre-built batch is re-stamped (baseOffset,
baseTimestamp, maxTimestamp, CRC) per copy and written with ``Log.append_as_is``
in large multi-batch writes; every record is 100 bytes and record timestamps
advance 1 ms per record.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import crc32c

from bench.harness import SCALE
from bench.report import Report, percentile
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

T0 = 1_700_000_000_000
VALUE = b"v" * 84  # with key None and the record framing: a 100-byte record


def _template(n: int) -> bytes:
    return build_batch([Record(0, T0 + i, None, VALUE, []) for i in range(n)])


def _stamp(tpl: bytes, base_offset: int, base_ts: int, n: int) -> bytes:
    b = bytearray(tpl)
    struct.pack_into(">q", b, 0, base_offset)
    struct.pack_into(">qq", b, 27, base_ts, base_ts + n - 1)
    struct.pack_into(">I", b, 17, crc32c.crc32c(memoryview(b)[21:]))
    return bytes(b)


def build_log(directory: Path, records: int, per_batch: int,
              config: LogConfig | None = None) -> Log:
    """A log of ``records`` 100-byte records in batches of ``per_batch``."""
    log = Log(directory, config or LogConfig())
    tpl = _template(per_batch)
    group = max(1, (4 << 20) // len(tpl))  # ~4 MiB per write
    off = 0
    while off < records:
        chunk = []
        for _ in range(group):
            if off >= records:
                break
            chunk.append(_stamp(tpl, off, T0 + off, per_batch))
            off += per_batch
        log.append_as_is(b"".join(chunk), now_ms=T0 + records + 10_000)
    return log


def bench_append(report: Report, scratch: Path) -> None:
    now = T0 + 10**9
    for label, per_batch, total in (("16 KiB", 160, int(96 * SCALE) << 20),
                                    ("1 MiB", 10_000, int(384 * SCALE) << 20)):
        recs = [Record(0, now - 1000 + i % 1000, None, VALUE, []) for i in range(per_batch)]
        batch = build_batch(recs)
        d = scratch / f"append-{per_batch}"
        log = Log(d, LogConfig())
        n = max(1, total // len(batch))
        t = time.perf_counter()
        for _ in range(n):
            log.append(batch, now_ms=now)
        dt = time.perf_counter() - t
        log.close()
        shutil.rmtree(d)
        mb = n * len(batch) / dt / 1e6
        report.add("storage", f"append {label} batches (CreateTime validated)", mb, "MB/s",
                   ">= 500 MB/s (1 MiB)" if per_batch == 10_000 else "",
                   f"{len(batch)} B x {n}")
        report.add("storage", f"append {label} batches", n * per_batch / dt, "records/s")


def _lookups(log: Log, targets: list[int]) -> tuple[list[float], list[float]]:
    """Wall-clock and thread-CPU microseconds per lookup (the CPU figure shows what
    the shared machine's scheduling adds to the wall-clock tail)."""
    wall, cpu = [], []
    clock = time.perf_counter_ns
    tclock = time.thread_time_ns
    for target in targets:
        t = clock()
        c = tclock()
        hit = log.offset_for_timestamp(target)
        cpu.append((tclock() - c) / 1000.0)
        wall.append((clock() - t) / 1000.0)
        assert hit is not None and hit.offset == target - T0, (target, hit)
    return wall, cpu


def bench_lookup(report: Report, scratch: Path) -> dict[int, Path]:
    keep: dict[int, Path] = {}
    for per_batch in (10, 10_000):
        p99s = {}
        sizes = (int(1_000_000 * SCALE), int(10_000_000 * SCALE))
        for records in sizes:
            d = scratch / f"lookup-{per_batch}-{records}"
            t = time.perf_counter()
            log = build_log(d, records, per_batch)
            build_s = time.perf_counter() - t
            rng = random.Random(records)
            _lookups(log, [T0 + rng.randrange(records) for _ in range(200)])  # page in indexes
            targets = [T0 + rng.randrange(records) for _ in range(3000)]
            first, first_cpu = _lookups(log, targets)
            _lookups(log, targets)  # a batch's block summary is built on its second search
            again, again_cpu = _lookups(log, targets)
            name = f"{records / 1e6:g}M records, batches of {per_batch}"
            p99s[records] = percentile(again_cpu, 99)
            report.add("storage", f"lookup p50 {name}", percentile(first, 50), "us", "",
                       f"first pass over 3000 random T; built in {build_s:.0f} s")
            report.add("storage", f"lookup p99 {name}", percentile(first, 99), "us", "",
                       f"cpu-time p99 {percentile(first_cpu, 99):.0f} us")
            report.add("storage", f"lookup p50 {name}, warm", percentile(again, 50), "us", "",
                       "third pass over the same T")
            report.add("storage", f"lookup p99 {name}, warm", percentile(again, 99), "us",
                       "<= 100 us at 10M", f"cpu-time p99 {percentile(again_cpu, 99):.0f} us")
            if per_batch >= 512:
                log.close()
                log = Log(d, LogConfig())  # reopened: no summaries yet
                t = time.perf_counter()
                while not log.build_summaries(50.0):
                    pass
                report.add("storage", f"background summaries {name}", time.perf_counter() - t,
                           "s", "", "reopened log, Log.build_summaries in 50 ms slices")
                fresh = [T0 + rng.randrange(records) for _ in range(3000)]
                lat, lat_cpu = _lookups(log, fresh)
                report.add("storage", f"lookup p50 {name}, new T after background summaries",
                           percentile(lat, 50), "us")
                report.add("storage", f"lookup p99 {name}, new T after background summaries",
                           percentile(lat, 99), "us", "<= 100 us at 10M",
                           f"cpu-time p99 {percentile(lat_cpu, 99):.0f} us")
            log.close()
            if records == sizes[-1]:
                keep[per_batch] = d  # the large logs are reused for the startup figures
            else:
                shutil.rmtree(d)
        small, big = sizes
        report.add("storage", f"lookup p99 growth 10M/1M, batches of {per_batch}",
                   p99s[big] / p99s[small], "x", "<= 1.3x", "cpu-time p99, warm pass")
    return keep


def _dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.glob("*.log"))


def bench_startup(report: Report, logs: dict[int, Path]) -> None:
    for per_batch, d in logs.items():
        gib = _dir_bytes(d) / (1 << 30)
        t = time.perf_counter()
        log = Log(d, LogConfig(), clean_shutdown=True)
        log.offset_for_timestamp(T0 + 5)
        clean_s = time.perf_counter() - t
        for seg in log.segments:
            seg.release()  # as after a SIGKILL: no trim, no final entry
        t = time.perf_counter()
        log = Log(d, LogConfig(), recovery_point=0, clean_shutdown=False)
        unclean_s = time.perf_counter() - t
        log.close()
        note = f"{gib:.2f} GiB, batches of {per_batch}"
        report.add("storage", f"startup after clean shutdown ({per_batch}/batch)", clean_s, "s", "",
                   note)
        report.add("storage", f"startup after unclean shutdown ({per_batch}/batch)", unclean_s,
                   "s", "<= 10 s per GiB", note)
        shutil.rmtree(d)


_OPEN_CHILD = """
import resource, sys, time
from storage.config import LogConfig
from storage.logdir import LogDir
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
before = rss()
t = time.perf_counter()
ld = LogDir(sys.argv[1], LogConfig())
dt = time.perf_counter() - t
n = sum(len(l.segments) for l in ld.logs().values())
print(dt, rss(), before, len(ld.logs()), n)
"""


def bench_open_many(report: Report, scratch: Path) -> None:
    root = scratch / "many"
    proto = root / "proto-0"
    cfg = LogConfig(segment_bytes=2000)
    log = Log(proto, cfg)
    tpl = _template(10)
    for i in range(10):
        log.append_as_is(_stamp(tpl, i * 10, T0 + i * 10, 10))
        if i < 9:
            log.roll()
    log.close()
    for p in range(1000):
        shutil.copytree(proto, root / f"topic{p % 50}-{p // 50}")
    shutil.rmtree(proto)
    (root / ".kafka_cleanshutdown").touch()
    out = subprocess.run([sys.executable, "-c", _OPEN_CHILD, str(root)], check=True,
                         capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout.split()
    dt, rss, base, nlogs, nsegs = float(out[0]), float(out[1]), float(out[2]), out[3], out[4]
    report.add("storage", "open data dir 1,000 partitions x 10 segments", dt, "s", "<= 5 s",
               f"{nlogs} logs, {nsegs} segments")
    report.add("storage", "RSS after opening 1,000 x 10", rss, "MiB", "<= 200 MiB",
               f"{base:.0f} MiB before opening")
    shutil.rmtree(root)


def _kafka_style_search(log: Log, target: int) -> int | None:
    """Kafka's segment choice for comparison: the first segment in offset order whose
    max >= target, found by a linear scan, then the same in-segment search."""
    for seg in log.segments:
        if seg.max_timestamp >= target:
            hit = seg.find_by_timestamp(target, log.log_start_offset, log.high_watermark)
            return hit.offset if hit is not None else None
    return None


def bench_segment_choice(report: Report, scratch: Path) -> None:
    """Binary search over the running max of segment maxima vs Kafka's linear scan."""
    nseg = max(50, int(1000 * SCALE))  # each roll fsyncs: ~15 ms apiece here
    d = scratch / "many-segments"
    log = Log(d, LogConfig(segment_bytes=2000))
    tpl = _template(10)
    off = 0
    for _ in range(nseg):
        for _ in range(2):
            log.append_as_is(_stamp(tpl, off, T0 + off, 10))
            off += 10
        log.roll()
    rng = random.Random(9)
    targets = [T0 + rng.randrange(off) for _ in range(2000)]
    for t in targets[:100]:
        got = log.offset_for_timestamp(t)
        assert got is not None and _kafka_style_search(log, t) == got.offset
    ours = [x for t in targets for x in [_time_one(lambda t=t: log.offset_for_timestamp(t))]]
    kafka = [x for t in targets for x in [_time_one(lambda t=t: _kafka_style_search(log, t))]]
    p50o, p50k = percentile(ours, 50), percentile(kafka, 50)
    report.add("storage", f"lookup p50, {len(log.segments)} segments, binary search", p50o, "us")
    report.add("storage", f"lookup p50, {len(log.segments)} segments, Kafka's linear scan",
               p50k, "us")
    report.add("storage", "segment choice: linear scan / binary search", p50k / p50o, "x", "",
               "same run, same targets")
    log.close()
    shutil.rmtree(d)


def _time_one(fn: object) -> float:
    assert callable(fn)
    t = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t) / 1000.0


def run(report: Report, scratch: str) -> None:
    s = Path(scratch)
    bench_append(report, s)
    bench_open_many(report, s)
    bench_segment_choice(report, s)
    logs = bench_lookup(report, s)
    bench_startup(report, logs)


if __name__ == "__main__":
    import tempfile

    r = Report()
    with tempfile.TemporaryDirectory(prefix="chronolog-bench-storage-") as tmp:
        run(r, tmp)
    print(r.table())
