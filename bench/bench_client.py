"""The bundled client against a real broker subprocess, side by side with confluent-kafka.

Measures, in one run on the same broker: produce throughput (our batching
Producer, our one-call ``produce`` of pre-grouped records, confluent-kafka with
linger 5 ms), consume throughput (our ``consume_chunks`` vs a confluent-kafka
consumer), and ``offsets_for_times`` latency from our client next to the floor
of a no-op request (ApiVersions) on the same connection.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from bench.harness import start_broker, stop_broker
from bench.report import Report, percentile

N = int(os.environ.get("CHRONOLOG_BENCH_CLIENT_RECORDS", "200000"))
VALUE = b"x" * 100
BASE_TS = time.time_ns() // 1_000_000 - 3_600_000  # recent: old data would meet retention.ms
LOOKUPS = 2000


async def _ours(report: Report, bootstrap: str) -> dict[str, float]:
    from client import Client, Producer, ProducerRecord
    from client.aio import API_VERSIONS

    c = await Client.connect(bootstrap)
    try:
        await c.create_topic("bench-producer")
        await c.create_topic("bench-bulk")
        t = time.perf_counter()
        async with Producer(c, linger_ms=5, batch_bytes=1 << 20) as p:
            for i in range(N):
                await p.send("bench-producer", ProducerRecord(value=VALUE, timestamp=BASE_TS + i),
                             partition=0)
        produce_rate = N / (time.perf_counter() - t)
        report.add("client", "Producer.send (linger 5 ms), 100 B", produce_rate, "records/s")
        rates = {"produce": produce_rate}

        t = time.perf_counter()
        chunk = 10_000
        for start in range(0, N, chunk):
            await c.produce("bench-bulk", [ProducerRecord(value=VALUE, timestamp=BASE_TS + i)
                                           for i in range(start, min(N, start + chunk))],
                            partition=0)
        report.add("client", "Client.produce (10k per call), 100 B", N / (time.perf_counter() - t),
                   "records/s")

        t = time.perf_counter()
        n = 0
        async for recs in c.consume_chunks("bench-producer", 0, 0, None, follow=False):
            n += len(recs)
        rates["consume"] = n / (time.perf_counter() - t)
        report.add("client", "consume_chunks, decoded Records", rates["consume"],
                   "records/s", note=f"{n} records")

        conn = await c._any_conn()
        floor = []
        for _ in range(LOOKUPS):
            t0 = time.perf_counter()
            await conn.request(API_VERSIONS, c.api_version(API_VERSIONS), {})
            floor.append((time.perf_counter() - t0) * 1e6)
        lat = []
        t = time.perf_counter()
        for i in range(LOOKUPS):
            ts = BASE_TS + (i * 7919) % N
            t0 = time.perf_counter()
            await c.offsets_for_times("bench-producer", ts, [0])
            lat.append((time.perf_counter() - t0) * 1e6)
        rate = LOOKUPS / (time.perf_counter() - t)
        p50f = percentile(floor, 50)
        report.add("client", "no-op ApiVersions p50 (floor)", p50f, "µs")
        report.add("client", "offsets_for_times p50", percentile(lat, 50), "µs",
                   note=f"{percentile(lat, 50) - p50f:.0f} µs above the floor")
        report.add("client", "offsets_for_times p99", percentile(lat, 99), "µs")
        report.add("client", "offsets_for_times, one client", rate, "lookups/s")
        t = time.perf_counter()
        for start in range(0, LOOKUPS, 100):
            await asyncio.gather(*(
                c.offsets_for_times("bench-producer", BASE_TS + (i * 7919) % N, [0])
                for i in range(start, start + 100)
            ))
        report.add("client", "offsets_for_times, 100 pipelined on one connection",
                   LOOKUPS / (time.perf_counter() - t), "lookups/s")
    finally:
        await c.close()
    return rates


def _confluent(report: Report, bootstrap: str) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000})
    t = time.perf_counter()
    for i in range(N):
        while True:
            try:
                p.produce("bench-producer", VALUE, partition=0, timestamp=BASE_TS + i)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(60)
    rates = {"produce": N / (time.perf_counter() - t)}
    report.add("client", "confluent-kafka produce (linger 5 ms), 100 B",
               rates["produce"], "records/s", note="same broker, same run")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    c.assign([TopicPartition("bench-producer", 0, 0)])
    t = time.perf_counter()
    n = 0
    while n < N:
        msgs = c.consume(10_000, 5)
        if not msgs:
            break
        n += len(msgs)
    rates["consume"] = n / (time.perf_counter() - t)
    report.add("client", "confluent-kafka consume", rates["consume"], "records/s")
    c.close()
    return rates


def run(report: Report, scratch: str) -> None:
    proc, port = start_broker(Path(scratch), Path(scratch) / "data")
    bootstrap = f"127.0.0.1:{port}"
    try:
        try:
            import uvloop

            ours = uvloop.run(_ours(report, bootstrap))
        except ImportError:
            ours = asyncio.run(_ours(report, bootstrap))
        theirs = _confluent(report, bootstrap)
        for what in ("produce", "consume"):
            report.add("client", f"{what}: ours / confluent-kafka", ours[what] / theirs[what],
                       "ratio", note="same broker, same run")
    finally:
        stop_broker(proc, 30)
