"""One process of the soak: N confluent-kafka producers, N consumers, or the lookups.

``python -m bench.soak_worker produce|consume|lookup BOOTSTRAP TOPIC PARTITIONS N RATE STOPFILE``.
Every second it prints one JSON line: records acknowledged (or consumed) since the
last line, and for producers the produce latencies of that second (send to
acknowledgement, ms) as p50/p99/max. Producers send RATE records/s each, 100 B
values stamped with the send time; consumers read every partition from the end.
The lookup role asks for the offsets of a random time of the last minute, one
request after the other on one connection of the bundled asyncio client, and prints
every latency of that second (µs) and the failures. It stops when STOPFILE exists.

Producers and consumers run under SCHED_IDLE: they stand in for client machines,
and on the 2 cores they share with the broker they must not decide its latency (the
broker and the lookups keep the default policy). At nice 10 instead, a woken broker
still waited behind them often enough to cost 35-45 % of the lookup p99 in A/B runs
(1.84/1.97 ms against 1.27/1.05 ms on a loaded machine). The soak's table shows that
they still produce and consume at the full rate, so the load is unchanged.
For the same reason the lookup client does not idle-poll (``idle_poll_us=0``): polling,
it never leaves its core idle while it waits, and in a 2-minute A/B the SCHED_IDLE
consumers fell from ~200k to 11-22k records/s and producers from 10k to 4.6-9.5k, while
the lookups doubled to 5-7.5k/s.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def produce(bootstrap: str, topic: str, n: int, rate: int, stop: str) -> None:
    from confluent_kafka import Producer

    producers = [Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                           "log_level": 2}) for _ in range(n)]
    lat: list[float] = []
    acked = [0]

    def done(err: object, msg: object, sent: float) -> None:
        if err is None:
            acked[0] += 1
            lat.append((time.perf_counter() - sent) * 1000)

    value = b"s" * 100
    tick = started = time.monotonic()
    sent_each = 0
    while not os.path.exists(stop):
        step = time.monotonic()
        # Every producer sends what its rate owes since the start (about 100 steps a
        # second), so a step that came late catches up instead of lowering the load;
        # at most a second's worth at once.
        due = min(rate, int((step - started) * rate) - sent_each)
        sent_each += due
        for p in producers:
            for _ in range(due):
                sent = time.perf_counter()
                try:
                    p.produce(topic, value, timestamp=int(time.time() * 1000),
                              on_delivery=functools.partial(done, sent=sent))
                except BufferError:
                    break
            p.poll(0)
        if time.monotonic() - tick >= 1.0:
            tick = time.monotonic()
            print(json.dumps({"acked": acked[0], "p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99),
                              "max": max(lat, default=0.0)}), flush=True)
            acked[0] = 0
            lat.clear()
        time.sleep(max(0.0, 0.01 - (time.monotonic() - step)))
    for p in producers:
        p.flush(10)


def consume(bootstrap: str, topic: str, partitions: int, n: int, stop: str) -> None:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumers = []
    for i in range(n):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-{os.getpid()}-{i}",
                      "enable.auto.commit": False, "log_level": 2,
                      "fetch.queue.backoff.ms": 0, "auto.offset.reset": "latest"})
        c.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
        consumers.append(c)
    got = 0
    tick = time.monotonic()
    while not os.path.exists(stop):
        for c in consumers:
            msgs = c.consume(500, 0.01)
            got += sum(1 for m in msgs if m.error() is None)
        if time.monotonic() - tick >= 1.0:
            tick = time.monotonic()
            print(json.dumps({"consumed": got}), flush=True)
            got = 0
    for c in consumers:
        c.close()


def lookup(bootstrap: str, topic: str, partitions: int, stop: str) -> None:
    import asyncio
    import random

    from client import Client

    async def run() -> None:
        rng = random.Random(1)
        parts = list(range(partitions))
        lat: list[int] = []
        errors: list[str] = []
        tick = time.monotonic()
        async with await Client.connect(bootstrap, idle_poll_us=0) as c:
            while not os.path.exists(stop):
                t = int(time.time() * 1000) - rng.randint(0, 60_000)
                started = time.perf_counter()
                try:
                    await c.offsets_for_times(topic, t, parts)
                except Exception as exc:  # reported: the soak counts every failed lookup
                    errors.append(repr(exc))
                else:
                    lat.append(round((time.perf_counter() - started) * 1e6))
                if time.monotonic() - tick >= 1.0:
                    tick = time.monotonic()
                    print(json.dumps({"lat_us": lat, "errors": errors}), flush=True)
                    lat, errors = [], []

    asyncio.run(run())


def main(argv: list[str]) -> None:
    role, bootstrap, topic, partitions, n, rate, stop = argv
    if role == "lookup":
        lookup(bootstrap, topic, int(partitions), stop)
        return
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    if role == "produce":
        produce(bootstrap, topic, int(n), int(rate), stop)
    else:
        consume(bootstrap, topic, int(partitions), int(n), stop)


if __name__ == "__main__":
    main(sys.argv[1:])
