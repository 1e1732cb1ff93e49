"""Durability costs, side by side in one run.

- Durable produce: one broker, two topics, one of them with ``flush.messages=1``
  (fsync before acknowledging, by group commit); confluent-kafka, acks=all, 100 B
  records, the two topics in alternating rounds; the ratio durable / plain.
- Recovery after kill -9: 10 partitions written with the storage layer (setup, not
  measured) and no clean-shutdown marker or recovery point, so the broker must
  check every batch (CRC) and rebuild every index, as after a crash where nothing
  had been flushed; the time from start to the first answered Metadata request.

``CHRONOLOG_BENCH_SCALE`` (< 1) shrinks the sizes for a quick dry run.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.bench_broker import write_big_topic
from bench.harness import SCALE, start_broker, stop_broker
from bench.report import Report

N_ROUND = int(200_000 * SCALE)
ROUNDS = 2
PARTITION_BYTES = int(100_000_000 * SCALE)
SECTION = "reliability"


def _produce_rate(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    p.list_topics(topic, timeout=30)
    value = b"x" * 100
    started = time.perf_counter()
    for i in range(n):
        try:
            p.produce(topic, value)
        except BufferError:
            p.poll(0.001)
            p.produce(topic, value)
        if i & 0xFFFF == 0:
            p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - started
    assert left == 0, f"{left} records not delivered"
    return n / elapsed


def bench_durable_produce(report: Report, scratch: Path) -> None:
    from client import SyncClient

    proc, port = start_broker(scratch, scratch / "data-produce")
    bootstrap = f"127.0.0.1:{port}"
    try:
        with SyncClient(bootstrap) as c:
            c.create_topic("plain", 3)
            c.create_topic("durable", 3, {"flush.messages": "1"})
        rates: dict[str, list[float]] = {"plain": [], "durable": []}
        for _ in range(ROUNDS):
            for topic in rates:
                rates[topic].append(_produce_rate(bootstrap, topic, N_ROUND))
    finally:
        stop_broker(proc)
    plain, durable = (max(rates[t]) for t in ("plain", "durable"))
    report.add(SECTION, "produce 100 B, confluent-kafka acks=all, no flush", plain, "rec/s",
               note=f"best of {ROUNDS} rounds of {N_ROUND:,}")
    report.add(SECTION, "same with flush.messages=1 (fsync before ack, group commit)", durable,
               "rec/s", note=f"best of {ROUNDS} rounds, alternating with the row above")
    report.add(SECTION, "durable / plain produce", durable / plain, "x", ">= 0.5")


def bench_recovery(report: Report, scratch: Path) -> None:
    from client import SyncClient

    data = scratch / "data-recovery"
    data.mkdir()
    records = PARTITION_BYTES // 109  # ~109 B per 100 B record on disk, batches of 1,000
    started = time.perf_counter()
    for p in range(10):
        write_big_topic(data, f"crashed{p}", records)
    print(f"  (setup: wrote 10 x {records:,} records in {time.perf_counter() - started:.1f} s)",
          flush=True)
    size = sum(f.stat().st_size for f in data.rglob("*.log"))

    def metadata() -> None:
        with SyncClient(bootstrap_of[0], request_timeout=1.0) as c:
            c.list_topics()

    bootstrap_of = [""]
    from bench.harness import free_port

    port = free_port()
    bootstrap_of[0] = f"127.0.0.1:{port}"
    started = time.perf_counter()
    proc, _ = start_broker(scratch, data, port=port, timeout=120, ready=metadata)
    elapsed = time.perf_counter() - started
    stop_broker(proc)
    report.add(SECTION, f"serving again after kill -9, 10 partitions x {size / 10 / 1e6:.0f} MB",
               elapsed, "s", "<= 5",
               note="nothing flushed: every batch CRC-checked, every index rebuilt")


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    bench_durable_produce(report, root)
    bench_recovery(report, root)
