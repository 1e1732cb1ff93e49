"""The bundled client against a real broker subprocess, side by side with confluent-kafka.

Measures, in one run on the same broker: produce throughput (our batching
Producer, our one-call ``produce`` of ProducerRecords, ``produce_arrow`` of an
Arrow table, confluent-kafka with linger 5 ms), consume throughput (our
``consume_chunks`` and ``consume_arrow`` vs a confluent-kafka consumer),
``chronolog produce --file`` of a 1M-line file, and ``offsets_for_times``
latency from our client next to the floor of a no-op request (ApiVersions) on
the same connection and to a client with idle polling off (``idle_poll_us=0``).

``Client.produce`` and confluent-kafka's per-record produce, the pair with a
ratio target, are each measured PRODUCE_ROUNDS (3) times, alternating ours and
theirs, each round a fresh client: the rows give the medians and the ranges, and
the ratio is the median of the per-round ratios (each round's pair ran next to
each other). One run of each swung the ratio 0.63-1.67 on the shared 2 cores.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import start_broker, stop_broker
from bench.report import Report, percentile

N = int(os.environ.get("CHRONOLOG_BENCH_CLIENT_RECORDS", "200000"))
VALUE = b"x" * 100
BASE_TS = time.time_ns() // 1_000_000 - 3_600_000  # recent: old data would meet retention.ms
LOOKUPS = 2000
LOOKUP_BLOCKS = 10
ARROW_ROWS = int(os.environ.get("CHRONOLOG_BENCH_ARROW_ROWS", "1000000"))
CLI_LINES = int(os.environ.get("CHRONOLOG_BENCH_CLI_LINES", "1000000"))
PRODUCE_ROUNDS = 3


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
        rates = {"Producer.send": produce_rate}

        chunk = 10_000
        await c.create_topic("bench-columns")
        t = time.perf_counter()
        for start in range(0, N, chunk):
            stop = min(N, start + chunk)
            await c.produce_columns("bench-columns", [VALUE] * (stop - start), None,
                                    list(range(BASE_TS + start, BASE_TS + stop)), partition=0)
        rates["produce_columns"] = N / (time.perf_counter() - t)
        report.add("client", "Client.produce_columns (10k-value lists per call), 100 B",
                   rates["produce_columns"], "records/s",
                   note="lists of values and timestamps made inside the timed loop")

        import numpy as np
        import pyarrow as pa

        await c.create_topic("bench-arrow")
        table = pa.table({
            "value": pa.Array.from_buffers(pa.binary(), ARROW_ROWS, [
                None, pa.py_buffer(np.arange(ARROW_ROWS + 1, dtype=np.int32) * len(VALUE)),
                pa.py_buffer(VALUE * ARROW_ROWS)]),
            "timestamp": pa.array(BASE_TS + np.arange(ARROW_ROWS, dtype=np.int64)),
            "partition": pa.array(np.zeros(ARROW_ROWS, dtype=np.int32)),
        })
        t = time.perf_counter()
        await c.produce_arrow("bench-arrow", table)
        rates["produce_arrow"] = ARROW_ROWS / (time.perf_counter() - t)
        report.add("client", f"produce_arrow ({ARROW_ROWS:,} x 100 B, one table)",
                   rates["produce_arrow"], "records/s", target=">= 3,000,000",
                   note="5 requests in flight, 1 MB batches")

        t = time.perf_counter()
        n = 0
        async for recs in c.consume_chunks("bench-producer", 0, 0, None, follow=False):
            n += len(recs)
        rates["consume_chunks"] = n / (time.perf_counter() - t)
        report.add("client", "consume_chunks, decoded Records", rates["consume_chunks"],
                   "records/s", note=f"{n} records")
        t = time.perf_counter()
        n = 0
        async for b in c.consume_arrow("bench-producer", 0, 0, None, follow=False):
            n += b.num_rows
        rates["consume_arrow"] = n / (time.perf_counter() - t)
        report.add("client", "consume_arrow, Arrow batches", rates["consume_arrow"],
                   "records/s", note=f"{n} records")

        conn = await c._any_conn()
        floor = []
        for _ in range(LOOKUPS):
            t0 = time.perf_counter()
            await conn.request(API_VERSIONS, c.api_version(API_VERSIONS), {})
            floor.append((time.perf_counter() - t0) * 1e6)
        # The same lookups from a client with idle polling off, in blocks taking turns
        # with this one's (a block each, the order flipping): each block runs as one
        # client alone would, and both see the same load.
        quiet = await Client.connect(bootstrap, idle_poll_us=0)
        lat: dict[Any, list[float]] = {c: [], quiet: []}
        spent = 0.0
        block = LOOKUPS // LOOKUP_BLOCKS
        try:
            for b in range(LOOKUP_BLOCKS):
                for who in ((c, quiet) if b % 2 else (quiet, c)):
                    t = time.perf_counter()
                    for i in range(b * block, (b + 1) * block):
                        ts = BASE_TS + (i * 7919) % N
                        t0 = time.perf_counter()
                        await who.offsets_for_times("bench-producer", ts, [0])
                        lat[who].append((time.perf_counter() - t0) * 1e6)
                    if who is c:
                        spent += time.perf_counter() - t
        finally:
            await quiet.close()
        p50f = percentile(floor, 50)
        p50, p50_quiet = percentile(lat[c], 50), percentile(lat[quiet], 50)
        report.add("client", "no-op ApiVersions p50 (floor)", p50f, "µs")
        report.add("client", "offsets_for_times p50", p50, "µs",
                   note=f"{p50 - p50f:.0f} µs above the floor")
        report.add("client", "offsets_for_times p99", percentile(lat[c], 99), "µs")
        report.add("client", "offsets_for_times p50, idle_poll_us=0", p50_quiet, "µs",
                   note=f"{p50_quiet / p50:.2f}x the p50 with idle polling (200 µs, the "
                   f"default), blocks taking turns; p99 {percentile(lat[quiet], 99):.0f} µs")
        report.add("client", "offsets_for_times, one client", LOOKUPS / spent, "lookups/s")
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


async def _client_produce(bootstrap: str) -> float:
    """One round of ``Client.produce`` of N ProducerRecords, 10k per call; records/s."""
    from client import Client, ProducerRecord
    from protocol.errors import ErrorCode, KafkaError

    c = await Client.connect(bootstrap)
    try:
        try:
            await c.create_topic("bench-bulk")
        except KafkaError as e:  # made by an earlier round
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        await c.latest("bench-bulk", [0])  # metadata and the leader's connection, untimed
        chunk = 10_000
        t = time.perf_counter()
        for start in range(0, N, chunk):
            await c.produce("bench-bulk", [ProducerRecord(value=VALUE, timestamp=BASE_TS + i)
                                           for i in range(start, min(N, start + chunk))],
                            partition=0)
        return N / (time.perf_counter() - t)
    finally:
        await c.close()


def _confluent_produce(bootstrap: str) -> float:
    """One round of confluent-kafka's per-record ``produce`` of N records (linger 5 ms),
    flush included; records/s."""
    from confluent_kafka import Producer

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
    return N / (time.perf_counter() - t)


def _produce_rounds(report: Report, bootstrap: str, run_async: Any) -> float:
    """PRODUCE_ROUNDS alternating rounds of ours and confluent-kafka's per-record produce;
    returns theirs (the median), the base of the other produce ratios."""
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(PRODUCE_ROUNDS):
        ours.append(run_async(_client_produce(bootstrap)))
        theirs.append(_confluent_produce(bootstrap))
    spread = f"median of {PRODUCE_ROUNDS} rounds alternating with the other, range "
    report.add("client", "Client.produce (10k ProducerRecords per call), 100 B",
               statistics.median(ours), "records/s", target=">= 1,000,000",
               note=spread + f"{min(ours):,.0f}-{max(ours):,.0f}; records made inside the "
               "timed loop, as the confluent row does")
    report.add("client", "confluent-kafka produce (linger 5 ms), 100 B",
               statistics.median(theirs), "records/s",
               note=spread + f"{min(theirs):,.0f}-{max(theirs):,.0f}; same broker, same run")
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    report.add("client", "produce: Client.produce / confluent-kafka", statistics.median(ratios),
               "ratio", target=">= 1.0",
               note=f"median of the {PRODUCE_ROUNDS} rounds' ratios, range "
               f"{min(ratios):.2f}-{max(ratios):.2f}")
    return statistics.median(theirs)


def _confluent(report: Report, bootstrap: str) -> dict[str, float]:
    from confluent_kafka import Consumer, TopicPartition

    rates: dict[str, float] = {}
    # fetch.queue.backoff.ms 0: librdkafka otherwise stops fetching for 1 s whenever its
    # queue passes queued.min.messages, which caps any broker at ~160-180k records/s here
    # and made the consume ratios below about 7x too kind to us (16 against 2.3).
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted", "fetch.queue.backoff.ms": 0})
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


def _cli(report: Report, bootstrap: str, scratch: str) -> None:
    """``chronolog produce --file`` of CLI_LINES 100-byte lines (wall time, process start-up
    included)."""
    from client import SyncClient

    path = Path(scratch) / "lines.txt"
    line = b"x" * 99 + b"\n"
    with open(path, "wb") as f:
        for i in range(0, CLI_LINES, 100_000):
            f.write(line * min(100_000, CLI_LINES - i))
    with SyncClient(bootstrap) as c:
        c.create_topic("bench-cli")
    exe = str(Path(sys.executable).parent / "chronolog")
    t = time.perf_counter()
    subprocess.run([exe, "produce", "bench-cli", "--file", str(path), "--no-progress",
                    "--bootstrap-server", bootstrap], check=True, capture_output=True)
    rate = CLI_LINES / (time.perf_counter() - t)
    report.add("client", f"chronolog produce --file ({CLI_LINES:,} lines of 100 B)", rate,
               "lines/s", target=">= 500,000", note="wall time incl. process start-up")


def run(report: Report, scratch: str) -> None:
    proc, port = start_broker(Path(scratch), Path(scratch) / "data")
    bootstrap = f"127.0.0.1:{port}"
    try:
        try:
            import uvloop

            run_async: Any = uvloop.run
        except ImportError:
            run_async = asyncio.run
        ours = run_async(_ours(report, bootstrap))
        their_produce = _produce_rounds(report, bootstrap, run_async)
        theirs = _confluent(report, bootstrap)
        for name in ("Producer.send", "produce_columns", "produce_arrow"):
            report.add("client", f"produce: {name} / confluent-kafka",
                       ours[name] / their_produce, "ratio",
                       note="same broker, same run; theirs: the median of its rounds")
        for name in ("consume_chunks", "consume_arrow"):
            report.add("client", f"consume: {name} / confluent-kafka",
                       ours[name] / theirs["consume"], "ratio",
                       target=">= 1.0" if name == "consume_arrow" else "",
                       note="same broker, same run")
        _cli(report, bootstrap, scratch)
    finally:
        stop_broker(proc, 30)
