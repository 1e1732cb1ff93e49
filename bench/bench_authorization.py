"""Authorization and quotas on the request path: what they cost, side by side in one run.

Three brokers over the same 100k-record topic, one raw-socket client each, one request
in flight: no authorizer (the default), the StandardAuthorizer with a few ACLs deciding
every request (no super user), and no authorizer but a client quota that never throttles
(so every request is accounted). Per broker: ListOffsets-by-time and Produce (acks=1,
one 10-record batch) p50, each paired with an ApiVersions no-op on the same connection
so the gap to that floor is the operation's own cost on this shared machine.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from bench.bench_admin import T0, write_topic
from bench.bench_broker import API_VERSIONS_BODY, RawClient, _list_offsets_body
from bench.harness import start_broker, stop_broker
from bench.report import Report, percentile
from client.acls import Acl, create_acls
from client.aio import Client
from client.quotas import alter_quotas
from storage.records import Record, build_batch

SECTION = "authorization"
N_RECORDS = 100_000
N_CALLS = 3000
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


async def _setup(bootstrap: str, kind: str) -> None:
    async with await Client.connect(bootstrap) as c:
        if kind == "acls":
            # While no ACL exists allow.everyone lets us add them; ALTER on the cluster
            # keeps it that way. The topic is reached through a PREFIXED ACL among others.
            await create_acls(c, [
                Acl("CLUSTER", "kafka-cluster", "LITERAL", "User:ANONYMOUS", "*", "ALL", "ALLOW"),
                Acl("TOPIC", "ad", "PREFIXED", "User:ANONYMOUS", "*", "ALL", "ALLOW"),
                Acl("TOPIC", "adm-secret", "LITERAL", "User:*", "*", "READ", "DENY"),
                Acl("TOPIC", "*", "LITERAL", "User:bob", "*", "WRITE", "ALLOW"),
                Acl("GROUP", "g", "PREFIXED", "User:ANONYMOUS", "*", "READ", "ALLOW"),
                Acl("TOPIC", "other", "LITERAL", "User:alice", "10.0.0.1", "ALL", "ALLOW"),
            ])
        elif kind == "quota":
            await alter_quotas(c, {"client-id": "bench"}, {"producer_byte_rate": 1e12,
                                                           "request_percentage": 1e6})


def _produce_body(topic: str, batch: bytes) -> dict[str, Any]:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


def _paired(c: RawClient, key: int, version: int, bodies: list[Any]) -> tuple[float, float]:
    """(p50 of the call, p50 of an ApiVersions no-op made right before each)."""
    clock = time.perf_counter_ns
    floor, lat = [], []
    for body in bodies:
        t0 = clock()
        c.call(18, 3, API_VERSIONS_BODY)
        t1 = clock()
        c.call(key, version, body)
        floor.append((t1 - t0) / 1000.0)
        lat.append((clock() - t1) / 1000.0)
    return percentile(lat, 50), percentile(floor, 50)


def run(report: Report, scratch: str) -> None:
    rng = random.Random(11)
    batch = build_batch([Record(i, int(time.time() * 1000), None, b"v" * 100, [])
                         for i in range(10)])
    setups = (("off", "no authorizer", {}),
              ("acls", "StandardAuthorizer, 6 ACLs", {"authorizer.class.name": AUTHORIZER,
                                                      "allow.everyone.if.no.acl.found": "true"}),
              ("quota", "no authorizer, quotas accounted", {}))
    for kind, label, overrides in setups:
        root = Path(scratch) / kind
        data = root / "data"
        data.mkdir(parents=True)
        write_topic(data, "adm", N_RECORDS)
        proc, port = start_broker(root, data, {"log.retention.ms": "-1", **overrides}, timeout=120)
        try:
            asyncio.run(_setup(f"127.0.0.1:{port}", kind))
            c = RawClient(port)
            targets = [T0 + rng.randrange(N_RECORDS) for _ in range(N_CALLS)]
            for t in targets[:300]:  # warm up
                got = c.call(2, 7, _list_offsets_body("adm", t)).topics[0].partitions[0]
                assert got.error_code == 0 and got.offset == t - T0, got
            p50, floor = _paired(c, 2, 7, [_list_offsets_body("adm", t) for t in targets])
            report.add(SECTION, f"ListOffsets by time p50, {label}", p50, "µs",
                       note=f"{p50 - floor:+.1f} µs vs ApiVersions measured alternately")
            bodies = [_produce_body("adm", batch) for _ in range(N_CALLS // 3)]
            assert c.call(0, 8, bodies[0]).responses[0].partition_responses[0].error_code == 0
            p50, floor = _paired(c, 0, 8, bodies)
            report.add(SECTION, f"Produce acks=1 p50, {label}", p50, "µs",
                       note=f"{p50 - floor:+.1f} µs vs ApiVersions; 10 records of 100 B")
        finally:
            stop_broker(proc, 60)
