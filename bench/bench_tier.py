"""The remote tier measured twice, side by side in one run, on a real S3 server
(s3proxy; SeaweedFS with CHRONOLOG_S3_SERVER=seaweedfs) and on file://.

At the storage level (storage/remote/tier.py over ObjectStore):
- upload: ``RemoteTier.copy`` of every sealed segment of a ~100 MB log (16 MiB
  segments, 100-byte records), MB/s of segment bytes;
- time lookups (``Log.offset_for_timestamp``, uniformly random T, every answer checked)
  on the same records: local (before tiering), then remote once the local copies are
  gone: cold (a fresh tier, empty index and chunk caches for every lookup: manifest,
  indexes and a 1 MiB chunk all fetched) and warm (indexes and chunks cached), p50/p99;
- a sequential read of the remote records (``Log.read``, 1 MiB at a time) with an
  empty chunk cache, then again from the cache, MB/s;
- disk: local bytes vs the partition's total.

At the broker level (``python -m broker`` on 127.0.0.1, confluent-kafka, raw ListOffsets):
- produce throughput, tiering off vs on (remote.storage.enable=true, 8 MiB segments,
  local.retention.bytes=0, the remote-log-manager every 200 ms and the retention check
  every 500 ms: segments upload and leave the local disk while
  the producer runs; both brokers idle and the previous round's uploads done before
  each), three alternating rounds each,
  the ratio of the best of each, with how many segments were uploaded by the last ack;
- time lookups p50/p99 by ListOffsets on the same records: local (the tiering-off
  broker) vs remote cold (first lookup of each target after a restart with the index
  and chunk caches emptied) and warm (the same targets again); answers checked equal;
- disk: the tiered partition's local bytes (segments plus chunk and index caches) vs
  its total.

The Spark read straight from the bucket is pipeline/'s and not measured here.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

from bench.bench_broker import RawClient, _list_offsets_body, produce_stamped, wait_until_idle
from bench.bench_storage import SCALE, T0, build_log
from bench.harness import start_broker, stop_broker
from bench.report import Report, percentile
from storage.config import LogConfig
from storage.log import Log
from storage.records import iter_batches
from storage.remote.store import ObjectStore, open_store
from tests.helpers.s3server import server_class

RECORDS = int(1_000_000 * SCALE)
PER_BATCH = 100
SEGMENT = 16 << 20
COLD, WARM = 20, 400


def run(report: Report, scratch: str) -> None:
    try:
        import storage.remote.tier  # noqa: F401
    except ImportError as e:
        raise RuntimeError(f"bench tier needs storage/remote/tier.py (tiercore): {e}") from e
    work = Path(scratch)
    server = server_class()(work / "s3").start()
    try:
        bucket = server.create_bucket()
        backends: dict[str, ObjectStore] = {
            "file://": ObjectStore(f"file://{work / 'bucket'}"),
            type(server).__name__: open_store(server.options(bucket)),
        }
        for name, store in backends.items():
            _bench(report, work / name.strip(":/"), name, store)
        rsm = {"file://": {"rsm.config.url": f"file://{work / 'broker-bucket'}"},
               type(server).__name__: {f"rsm.config.{k}": v for k, v in
                                       server.options(server.create_bucket()).items()}}
        for name, overrides in rsm.items():
            _broker_bench(report, work / ("broker-" + name.strip(":/")), name, overrides)
    finally:
        server.stop()


def _lookups(log: Log, targets: list[int]) -> list[float]:
    out = []
    for target in targets:
        t = time.perf_counter()
        hit = log.offset_for_timestamp(target)
        out.append(time.perf_counter() - t)
        assert hit is not None and hit.offset == target - T0, (target, hit)
    return out


def _bench(report: Report, d: Path, name: str, store: ObjectStore) -> None:
    from storage.remote.chunk_cache import RemoteChunkCache
    from storage.remote.index_cache import RemoteIndexCache
    from storage.remote.tier import RemoteTier

    config = LogConfig(segment_bytes=SEGMENT, remote_storage_enable=True,
                       local_retention_bytes=0)
    log = build_log(d / "log", RECORDS, PER_BATCH, config)
    log.roll()
    rng = random.Random(26)
    sealed = sum(max(s.size, 0) for s in log.segments[:-1])
    local = _lookups(log, [T0 + rng.randrange(RECORDS) for _ in range(WARM)])
    local_p50 = percentile(local, 50)

    cache_dir, chunk_dir = d / "index-cache", d / "chunk-cache"
    tier = RemoteTier(log, store, "bench", 0, cache=RemoteIndexCache(cache_dir),
                      chunks=RemoteChunkCache(chunk_dir))
    t = time.perf_counter()
    copied = tier.copy(log.log_end_offset)
    upload_s = time.perf_counter() - t
    report.add("tier", f"upload, {name}", sealed / (1 << 20) / upload_s, "MB/s", "",
               f"{copied} segments of {SEGMENT >> 20} MiB, {sealed / 1e6:.0f} MB")
    log.delete_old_segments(T0 + RECORDS + 10_000)
    local_bytes = log.size_in_bytes()
    assert log.segments[0].base_offset >= tier.highest_offset, "local copies not dropped"

    cold = []
    for _ in range(COLD):
        shutil.rmtree(cache_dir, ignore_errors=True)
        shutil.rmtree(chunk_dir, ignore_errors=True)
        target = T0 + rng.randrange(tier.highest_offset)
        t = time.perf_counter()
        tier = RemoteTier(log, store, "bench", 0, cache=RemoteIndexCache(cache_dir),
                          chunks=RemoteChunkCache(chunk_dir))
        hit = log.offset_for_timestamp(target)
        cold.append(time.perf_counter() - t)
        assert hit is not None and hit.offset == target - T0
    targets = [T0 + rng.randrange(tier.highest_offset) for _ in range(WARM)]
    _lookups(log, targets)
    warm = _lookups(log, targets)
    for label, samples in (("cold", cold), ("warm", warm)):
        p50 = percentile(samples, 50)
        report.add("tier", f"remote lookup p50 {label}, {name}", p50 * 1e6, "us",
                   "warm <= 2x local" if label == "warm" else "",
                   f"{p50 / local_p50:.1f}x local p50 ({local_p50 * 1e6:.0f} us); "
                   f"p99 {percentile(samples, 99) * 1e6:.0f} us")

    assert tier.chunks is not None
    tier.chunks.drop("")
    for label in ("cold", "warm"):
        fetched = tier.chunks.bytes_fetched
        t = time.perf_counter()
        offset, read = 0, 0
        while offset <= tier.highest_offset:
            chunk = log.read(offset, 1 << 20)
            assert chunk, offset
            read += len(chunk)
            offset = _next_offset(chunk)
        read_s = time.perf_counter() - t
        report.add("tier", f"sequential remote read {label}, {name}",
                   read / (1 << 20) / read_s, "MB/s", "",
                   f"{read / 1e6:.0f} MB in 1 MiB reads; "
                   f"{(tier.chunks.bytes_fetched - fetched) / 1e6:.0f} MB fetched")
    tier.chunks.close()
    report.add("tier", f"disk local / total, {name}", 100 * local_bytes /
               (local_bytes + tier.size_bytes()), "%", "",
               f"{local_bytes / 1e6:.1f} MB local, {tier.size_bytes() / 1e6:.0f} MB remote")
    log.close()


def _next_offset(chunk: bytes) -> int:
    """The offset after the last whole batch in ``chunk``."""
    headers = [header for _, header in iter_batches(chunk)]
    assert headers
    return headers[-1].last_offset + 1


BROKER_RECORDS = int(2_000_000 * SCALE)
BROKER_SEGMENT = 8 << 20
LOOKUPS = 300
ROUNDS = 3


def _produce(bootstrap: str, topic: str, n: int) -> float:
    """records/s of n 100-byte records, timestamps T0 + offset (confluent-kafka, acks=1,
    linger 5 ms, as bench broker's produce row)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                  "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    p.list_topics(topic, timeout=30)
    started = time.perf_counter()
    left = produce_stamped(p, topic, range(T0, T0 + n))
    assert left == 0, f"{left} records not delivered"
    return n / (time.perf_counter() - started)


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(60)


def _list_offset(c: RawClient, topic: str, ts: int) -> int:
    return int(c.call(2, 9, _list_offsets_body(topic, ts)).topics[0].partitions[0].offset)


def _timed_lookups(port: int, topic: str, targets: list[int]) -> tuple[list[float], list[int]]:
    c = RawClient(port)
    lat, answers = [], []
    try:
        for t in targets:
            t0 = time.perf_counter()
            answers.append(_list_offset(c, topic, t))
            lat.append(time.perf_counter() - t0)
    finally:
        c.close()
    return lat, answers


def _wait_tiered(port: int, topic: str) -> int:
    """Wait until the topic's copied segments are gone locally (its history is remote):
    its local log start (ListOffsets -4) past 3/4 of the records; returns it."""
    c = RawClient(port)
    try:
        deadline = time.monotonic() + 300
        while (start := _list_offset(c, topic, -4)) < BROKER_RECORDS * 3 // 4:
            assert time.monotonic() < deadline, f"{topic}: uploads did not finish in 300 s"
            time.sleep(0.2)
        return start
    finally:
        c.close()


def _broker_bench(report: Report, d: Path, name: str, rsm: dict[str, str]) -> None:
    """Produce with tiering off and on, lookups local vs remote, disk (module docstring)."""
    on_cfg = {"remote.log.storage.system.enable": "true",
              "remote.log.manager.task.interval.ms": "200",
              "log.retention.check.interval.ms": "500", **rsm}
    topic_cfg = {"retention.ms": "-1", "segment.bytes": str(BROKER_SEGMENT)}
    tier_cfg = {**topic_cfg, "remote.storage.enable": "true", "local.retention.bytes": "0"}
    store = open_store({k.removeprefix("rsm.config."): v for k, v in rsm.items()})
    off, off_port = start_broker(d, d / "off", log_name="off.log")
    on, on_port = start_broker(d, d / "on", on_cfg, log_name="on.log")
    try:
        rates: dict[str, list[float]] = {"off": [], "on": []}
        uploaded = []
        for r in range(ROUNDS):
            for label, port, cfg in (("off", off_port, topic_cfg), ("on", on_port, tier_cfg)):
                bootstrap = f"127.0.0.1:{port}"
                _create(bootstrap, f"t{r}", cfg)
                for proc in (off, on):  # the previous round's uploads are done
                    wait_until_idle(proc.pid)
                rates[label].append(_produce(bootstrap, f"t{r}", BROKER_RECORDS))
                if label == "on":
                    uploaded.append(sum(1 for o in store.list(f"topics/t{r}/")
                                        if o.key.endswith(".log")))
                    # Its uploads (I/O-bound: the broker looks idle meanwhile) finish
                    # before anything else is measured.
                    _wait_tiered(on_port, f"t{r}")
        best_off, best_on = max(rates["off"]), max(rates["on"])
        report.add("tier", f"broker produce, tiering on / off, {name}", best_on / best_off,
                   "ratio", ">= 0.9",
                   f"best of {ROUNDS}: {best_on:,.0f} vs {best_off:,.0f} rec/s "
                   f"(on {', '.join(f'{x:,.0f}' for x in rates['on'])}; "
                   f"off {', '.join(f'{x:,.0f}' for x in rates['off'])}); "
                   f"{BROKER_RECORDS:,} x 100 B in {BROKER_SEGMENT >> 20} MiB segments, "
                   f"{'/'.join(map(str, uploaded))} of them uploaded when the last was acked")
        local_start = _wait_tiered(on_port, "t0")
        stop_broker(on)
        for cache in ("remote-log-chunk-cache", "remote-log-index-cache"):
            shutil.rmtree(d / "on" / cache, ignore_errors=True)
        on, on_port = start_broker(d, d / "on", on_cfg, log_name="on.log")
        wait_until_idle(on.pid)
        rng = random.Random(2626)
        # Cold: one target per 30,000 records (3.3 MB), at least 15,000 records (1.6 MB)
        # from the next: each in a chunk no earlier lookup fetched.
        spread = [T0 + k + rng.randrange(15_000) for k in range(0, local_start - 15_000, 30_000)]
        targets = [T0 + rng.randrange(local_start) for _ in range(LOOKUPS)]
        _timed_lookups(off_port, "t0", targets)  # warm the local broker's pages
        local, want = _timed_lookups(off_port, "t0", targets)
        cold, got_cold = _timed_lookups(on_port, "t0", spread)
        _timed_lookups(on_port, "t0", targets)
        warm, got_warm = _timed_lookups(on_port, "t0", targets)
        assert want == [t - T0 for t in targets] and got_warm == want
        assert got_cold == [t - T0 for t in spread]
        lp50, lp99 = percentile(local, 50), percentile(local, 99)
        report.add("tier", f"broker ListOffsets p50 local, {name}", lp50 * 1e6, "us", "",
                   f"p99 {lp99 * 1e6:.0f} us; {LOOKUPS} random T, one request in flight")
        for label, samples in (("cold", cold), ("warm", warm)):
            p50, p99 = percentile(samples, 50), percentile(samples, 99)
            report.add("tier", f"broker ListOffsets p50 remote {label}, {name}", p50 * 1e6,
                       "us", "<= 2x local" if label == "warm" else "",
                       f"{p50 / lp50:.2f}x local p50; p99 {p99 * 1e6:.0f} us "
                       f"({p99 / lp99:.2f}x local p99); " + (
                           f"{len(samples)} T, each in a chunk not yet fetched, after a "
                           "restart with empty caches" if label == "cold" else
                           f"the {LOOKUPS} T of the local row, cached"))
        part = d / "on" / "t0-0"
        local_bytes = sum(f.stat().st_size for f in part.iterdir())
        caches = sum(f.stat().st_size for cache in ("remote-log-chunk-cache",
                                                    "remote-log-index-cache")
                     for f in (d / "on" / cache).iterdir())
        total = sum(f.stat().st_size for f in (d / "off" / "t0-0").iterdir()
                    if f.suffix == ".log")
        report.add("tier", f"broker disk local / total, {name}", 100 * local_bytes / total,
                   "%", "", f"t0: {local_bytes / 1e6:.1f} MB of partition files of "
                   f"{total / 1e6:.0f} MB of records; the chunk and index caches hold "
                   f"{caches / 1e6:.1f} MB more after {LOOKUPS} random lookups "
                   "(remote.log.chunk.cache.total.size.bytes bounds them)")
    finally:
        stop_broker(on)
        stop_broker(off)
