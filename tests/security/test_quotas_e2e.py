"""Client quotas end to end (KIP-219): a real broker subprocess, quotas set with
AlterClientQuotas, a confluent-kafka producer and consumer pushed past their byte-rate
quotas. The broker answers with throttle_time_ms > 0 (librdkafka reports it through
``throttle_cb``) and mutes the connection, so the achieved rate converges on the quota."""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from client.aio import Client
from client.quotas import alter_quotas, describe_quotas

QUOTA = 1_000_000  # bytes per second
RECORD = 1000
# Kafka measures a rate over at least (quota.window.num - 1) x quota.window.size.seconds
# (10 s by default), so a new client may send a whole window's worth of bytes at once
# before the first throttle; the quota holds on average over spans of several windows.
# That first window's burst is left out: the rate is measured over the SPAN after it.
SPAN = 10.0
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
SKIP = 2.0  # quota.window.num x quota.window.size.seconds


def set_quota(bootstrap: str, entity: dict, values: dict, remove: tuple = ()) -> list:
    async def go() -> list:
        c = await Client.connect(bootstrap)
        try:
            await alter_quotas(c, entity, values, remove)
            return await describe_quotas(c)
        finally:
            await c.close()
    return asyncio.run(go())


def steady_rate(times: list[float], what: str, throttles: list[float]) -> float:
    """Bytes per second of the 1000-byte records whose times fall in the SPAN after the
    first window; the client must also have been told it was throttled."""
    window = [t for t in times if times[0] + SKIP <= t < times[0] + SKIP + SPAN]
    rate = len(window) * RECORD / SPAN
    print(f"{what} {rate:.0f} B/s, quota {QUOTA}, largest throttle {max(throttles, default=0)} s")
    assert max(throttles, default=0) > 0
    return rate


def test_quotas_are_stored_described_and_kept_across_restart(broker_factory):
    b = broker_factory()
    set_quota(b.bootstrap, {"client-id": "slow"}, {"producer_byte_rate": 1024})
    set_quota(b.bootstrap, {"user": None, "client-id": None}, {"request_percentage": 50.5})
    b.stop()
    b.start()
    got = set_quota(b.bootstrap, {"client-id": "slow"}, {"consumer_byte_rate": 2048})
    assert sorted(got, key=repr) == sorted([
        ({"client-id": "slow"}, {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}),
        ({"user": None, "client-id": None}, {"request_percentage": 50.5})], key=repr)
    got = set_quota(b.bootstrap, {"client-id": "slow"}, {}, ("producer_byte_rate",
                                                             "consumer_byte_rate"))
    assert got == [({"user": None, "client-id": None}, {"request_percentage": 50.5})]


def test_producer_over_its_byte_rate_is_slowed_to_the_quota(broker_factory):
    b = broker_factory(WINDOWS)
    set_quota(b.bootstrap, {"client-id": "bulk"}, {"producer_byte_rate": QUOTA})
    throttles: list[int] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "bulk", "linger.ms": 5,
                  "batch.size": 65536, "acks": 1, "queue.buffering.max.kbytes": 512,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    delivered: list[float] = []

    def on_delivery(err, msg):
        if err is None:
            delivered.append(time.monotonic())

    payload = b"x" * RECORD
    start = time.monotonic()
    while time.monotonic() - start < SKIP + SPAN + 1.0:
        try:
            p.produce("quota-topic", payload, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.purge(in_queue=True)  # what is still queued was never sent: not part of the rate
    p.flush(30)
    rate = steady_rate(delivered, "produced", throttles)
    assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA}"


def test_consumer_over_its_fetch_quota_is_slowed_and_told(broker_factory):
    b = broker_factory(WINDOWS)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
    for _ in range(int(SKIP + SPAN + 4) * QUOTA // RECORD):  # more than SPAN at the quota
        p.produce("fetch-topic", b"y" * RECORD)
        p.poll(0)
    p.flush(60)
    set_quota(b.bootstrap, {"client-id": "reader"}, {"consumer_byte_rate": QUOTA})
    throttles: list[int] = []
    c = Consumer({"bootstrap.servers": b.bootstrap, "client.id": "reader", "group.id": "q",
                  "max.partition.fetch.bytes": 65536,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    c.assign([TopicPartition("fetch-topic", 0, 0)])
    got: list[float] = []
    start = time.monotonic()
    try:
        while time.monotonic() - start < SKIP + SPAN + 1.0:
            for m in c.consume(500, 0.2):
                if not m.error():
                    got.append(time.monotonic())
    finally:
        c.close()
    rate = steady_rate(got, "consumed", throttles)
    # Capped at the quota. A throttled Fetch is answered empty (Kafka's rule), which costs
    # librdkafka a round trip each time, so it settles below the quota (measured 0.64-0.84).
    assert 0.5 * QUOTA <= rate <= 1.1 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA}"


def test_a_user_quota_applies_to_the_anonymous_principal(broker_factory):
    """PLAINTEXT connections are User:ANONYMOUS: a quota on user ANONYMOUS (which wins
    over a client-id default) throttles them whatever their client id."""
    b = broker_factory()
    set_quota(b.bootstrap, {"user": "ANONYMOUS"}, {"producer_byte_rate": 20_000})
    set_quota(b.bootstrap, {"client-id": None}, {"producer_byte_rate": 1e12})
    throttles: list[float] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "anyone", "linger.ms": 5,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    for _ in range(400):  # 400 kB against 20 kB/s over a >= 10 s window
        p.produce("anon", b"z" * RECORD)
        p.poll(0)
    p.flush(30)
    deadline = time.monotonic() + 10
    while not throttles and time.monotonic() < deadline:
        p.poll(0.1)
    assert max(throttles, default=0) > 0
