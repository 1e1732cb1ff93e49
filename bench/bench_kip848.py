"""KIP-848 groups: how long server-side assignment takes to settle, and what a heartbeat costs.

Rebalance: three confluent-kafka consumers with ``group.protocol=consumer``
(librdkafka threads in this process) subscribe to a 12-partition topic at once.
Measured: from the last ``subscribe()`` until the members' own rebalance callbacks
say the three of them own all 12 partitions, disjointly. There is no initial delay
in KIP-848; what bounds it is revoke-before-assign: the first member is given all
12 partitions and hears only at its next heartbeat that it should give some up;
librdkafka acknowledges the revocation at once and the waiting members pick the
partitions up on their next heartbeat, so it takes about one
``group.consumer.heartbeat.interval.ms`` (at most two). Run once with Kafka's
5000 ms and once with 500 ms, side by side.

Heartbeat: one raw connection, one member, N sequential ConsumerGroupHeartbeat v1
round trips that change nothing (the steady state of every member), next to
ApiVersions round trips on the same connection in the same run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.bench_groups import _Conn, _create_topic, _poll_until
from bench.harness import start_broker, stop_broker
from bench.report import Report, percentile
from protocol.api import decode_response

PARTITIONS = 12
HEARTBEATS = 3000


def _call(c: _Conn, key: int, version: int, body: dict[str, Any]) -> Any:
    return decode_response(key, version, c.round_trip(c.frame(key, version, body)))[1]


def _settle(report: Report, port: int, interval_ms: int) -> None:
    from confluent_kafka import Consumer

    topic = f"kip848-{interval_ms}"
    _create_topic(port, topic, PARTITIONS)
    owned: list[set[int]] = [set(), set(), set()]

    def callbacks(k: int) -> dict[str, Any]:
        def on_assign(_c: Any, parts: Any) -> None:
            owned[k] |= {tp.partition for tp in parts}

        def on_revoke(_c: Any, parts: Any) -> None:
            owned[k] -= {tp.partition for tp in parts}

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    consumers = [Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": topic,
                           "group.protocol": "consumer"}) for _ in range(3)]
    for k, c in enumerate(consumers):
        c.subscribe([topic], **callbacks(k))
    last = time.perf_counter()
    done = _poll_until(
        consumers,
        lambda: sorted(p for o in owned for p in o) == list(range(PARTITIONS)) and all(owned),
        "never settled", owned)
    report.add("kip848", f"3 members join -> 12 partitions owned (heartbeat {interval_ms} ms)",
               (done - last) * 1000, "ms", note="about 1 heartbeat interval (revoke before assign)")


def _heartbeats(report: Report, port: int) -> None:
    _create_topic(port, "kip848-hb", PARTITIONS)
    c = _Conn(port)
    join = _call(c, 68, 1, {"group_id": "bench-hb", "member_id": "bench-member-0000000000", "member_epoch": 0,
                          "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["kip848-hb"],
                          "topic_partitions": []})
    owned = [{"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in join.assignment.topic_partitions]
    beat = {"group_id": "bench-hb", "member_id": "bench-member-0000000000", "member_epoch": join.member_epoch,
            "topic_partitions": owned}
    noop = {"client_software_name": "bench", "client_software_version": "1"}
    lat: list[float] = []
    floor: list[float] = []
    for i in range(HEARTBEATS + 200):
        t0 = time.perf_counter()
        resp = _call(c, 68, 1, beat)
        t1 = time.perf_counter()
        _call(c, 18, 3, noop)
        t2 = time.perf_counter()
        if i >= 200:
            lat.append((t1 - t0) * 1e6)
            floor.append((t2 - t1) * 1e6)
    assert resp.error_code == 0 and resp.assignment is None
    c.sock.close()
    p50 = percentile(lat, 50)
    report.add("kip848", "ConsumerGroupHeartbeat round trip p50 (steady state)", p50, "µs",
               note=f"{HEARTBEATS} sequential, owning 12 partitions")
    report.add("kip848", "ConsumerGroupHeartbeat round trip p99 (steady state)", percentile(lat, 99), "µs")
    report.add("kip848", "no-op round trip p50 (same run)", percentile(floor, 50), "µs",
               note=f"heartbeat/no-op = {p50 / percentile(floor, 50):.1f}x")
    report.add("kip848", "no-op round trip p99 (same run)", percentile(floor, 99), "µs")


def run(report: Report, scratch: str) -> None:
    base = Path(scratch)
    for interval_ms in (5000, 500):
        overrides = {"group.consumer.heartbeat.interval.ms": str(interval_ms),
                     "group.consumer.min.heartbeat.interval.ms": str(min(interval_ms, 5000))}
        proc, port = start_broker(base, base / f"data-{interval_ms}", overrides)
        try:
            _settle(report, port, interval_ms)
            if interval_ms == 500:
                _heartbeats(report, port)
        finally:
            stop_broker(proc)
