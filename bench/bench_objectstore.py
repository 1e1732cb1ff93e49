"""The tier's S3 client measured against the alternatives, side by side on one real
S3 server (s3proxy, or SeaweedFS with CHRONOLOG_S3_SERVER=seaweedfs;
tests/helpers/s3server.py) in one run: obstore (what
storage/remote/store.py uses), boto3 and aiobotocore (bench-only dependencies).

- PUT of a 16 MiB and a 64 MiB segment file: obstore's default put of a path
  (multipart above 5 MiB, 12 parts in flight), obstore as one PUT, boto3's managed
  ``upload_file`` (multipart above 8 MiB, 10 threads), aiobotocore's one ``put_object``;
- ranged GET of 64 KiB and 1 MiB at random offsets of the 64 MiB object (what a
  Fetch or a time lookup below the local log start does), p50 latency;
- LIST of a prefix holding 1,000 keys (what a manifest-less scan or retention does).

Clients take turns in every round, so load from the other sessions on the machine
falls on all of them alike; each row's note carries the ratio to obstore. The server
shares the machine's 2 cores with the client, so absolute MB/s are a floor, not what
a real object store gives; the ratios are the figures to read.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import obstore
from obstore.store import S3Store

from bench.report import Report, percentile
from storage.remote.store import ObjectStore, open_store
from tests.helpers.s3server import S3Server, server_class

MiB = 1 << 20
PUT_SIZES = {"16 MiB": (16 * MiB, 5), "64 MiB": (64 * MiB, 3)}  # size, rounds
RANGES = {"64 KiB": (64 * 1024, 150), "1 MiB": (MiB, 40)}       # size, reads per client
LIST_KEYS, LIST_ROUNDS = 1000, 5


def run(report: Report, scratch: str) -> None:
    work = Path(scratch)
    server = server_class()(work / "s3").start()
    kind = type(server).__name__
    try:
        report.add("objectstore", f"{kind} start, to its first S3 answer",
                   server.startup_seconds, "s")
        _bench(report, server, work)
    finally:
        server.stop()


def _bench(report: Report, server: S3Server, work: Path) -> None:
    import aiobotocore.session
    import boto3
    from botocore.config import Config

    bucket = server.create_bucket()
    options = server.options(bucket, prefix="")
    store = open_store(options)
    raw = S3Store(bucket, config={  # obstore itself, for the one-PUT variant
        "endpoint": server.endpoint, "allow_http": True, "virtual_hosted_style_request": False,
        "region": server.region, "access_key_id": server.access_key,
        "secret_access_key": server.secret_key})
    # Flexible checksums off: s3proxy rejects the aws-chunked trailer boto3 now sends
    # by default (501 NotImplemented), and obstore sends no body checksum either.
    cfg = Config(request_checksum_calculation="when_required",
                 response_checksum_validation="when_required", retries={"max_attempts": 3},
                 max_pool_connections=16)
    creds = {"endpoint_url": server.endpoint, "region_name": server.region,
             "aws_access_key_id": server.access_key,
             "aws_secret_access_key": server.secret_key}
    s3 = boto3.client("s3", config=cfg, **creds)
    loop = asyncio.new_event_loop()
    aio_cm = aiobotocore.session.get_session().create_client("s3", config=cfg, **creds)
    aio = loop.run_until_complete(aio_cm.__aenter__())
    try:
        _puts(report, work, bucket, store, raw, s3, aio, loop)
        _ranges(report, bucket, store, s3, aio, loop)
        _lists(report, bucket, store, s3, aio, loop)
    finally:
        loop.run_until_complete(aio_cm.__aexit__(None, None, None))
        loop.close()


def _rounds(clients: dict[str, Callable[[int], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each client, the clients taking turns round by round."""
    times: dict[str, list[float]] = {name: [] for name in clients}
    for i in range(rounds):
        for name, call in clients.items():
            t = time.perf_counter()
            call(i)
            times[name].append(time.perf_counter() - t)
    return times


def _puts(report: Report, work: Path, bucket: str, store: ObjectStore, raw: Any, s3: Any,
          aio: Any, loop: asyncio.AbstractEventLoop) -> None:
    for label, (size, rounds) in PUT_SIZES.items():
        segment = work / f"segment-{label.replace(' ', '')}.log"
        segment.write_bytes(os.urandom(size))
        clients: dict[str, Callable[[int], object]] = {
            "obstore": lambda i, p=segment, lb=label: store.put(f"put/{lb}/obstore-{i}", p),
            "obstore, one PUT": lambda i, p=segment, lb=label: obstore.put(
                raw, f"put/{lb}/one-{i}", p, use_multipart=False),
            "boto3 upload_file": lambda i, p=segment, lb=label: s3.upload_file(
                str(p), bucket, f"put/{lb}/boto3-{i}"),
            "aiobotocore put_object": lambda i, p=segment, lb=label: loop.run_until_complete(
                aio.put_object(Bucket=bucket, Key=f"put/{lb}/aio-{i}", Body=p.read_bytes())),
        }
        times = _rounds(clients, rounds)
        base = statistics.median(times["obstore"])
        for name, t in times.items():
            mbs = size / MiB / statistics.median(t)
            report.add("objectstore", f"PUT {label} segment, {name}", mbs, "MB/s", "",
                       f"{base / statistics.median(t):.2f}x obstore's MB/s, median of {rounds}")
        # The last 64 MiB object stays for the ranged reads.
        if label == "64 MiB":
            store.put("segment.log", segment)
        segment.unlink()


def _ranges(report: Report, bucket: str, store: ObjectStore, s3: Any, aio: Any,
            loop: asyncio.AbstractEventLoop) -> None:
    size_total = store.head("segment.log").size
    rng = random.Random(7)
    for label, (size, n) in RANGES.items():
        offsets = [rng.randrange(0, size_total - size) for _ in range(n)]

        async def aio_get(start: int, size: int = size) -> bytes:
            resp = await aio.get_object(Bucket=bucket, Key="segment.log",
                                        Range=f"bytes={start}-{start + size - 1}")
            async with resp["Body"] as body:
                return bytes(await body.read())

        clients: dict[str, Callable[[int], object]] = {
            "obstore": lambda i, o=offsets, sz=size: store.get_range(
                "segment.log", o[i], o[i] + sz),
            "boto3": lambda i, o=offsets, sz=size: s3.get_object(
                Bucket=bucket, Key="segment.log",
                Range=f"bytes={o[i]}-{o[i] + sz - 1}")["Body"].read(),
            "aiobotocore": lambda i, o=offsets: loop.run_until_complete(aio_get(o[i])),
        }
        for i in range(3):  # warm every client's connection pool
            for call in clients.values():
                call(i)
        times = _rounds(clients, n)
        base = percentile(times["obstore"], 50)
        for name, t in times.items():
            p50 = percentile(t, 50)
            report.add("objectstore", f"ranged GET {label} p50, {name}", p50 * 1e3, "ms", "",
                       f"{p50 / base:.2f}x obstore's time; p99 {percentile(t, 99) * 1e3:.1f} ms")


def _lists(report: Report, bucket: str, store: ObjectStore, s3: Any, aio: Any,
           loop: asyncio.AbstractEventLoop) -> None:
    for k in range(LIST_KEYS):
        store.put(f"list/t-0/{k:020d}.log", b"x")

    async def aio_list() -> int:
        count = 0
        async for page in aio.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix="list/"):
            count += len(page.get("Contents", []))
        return count

    def boto3_list() -> int:
        return sum(len(page.get("Contents", [])) for page in
                   s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="list/"))

    counts: dict[str, int] = {}
    clients: dict[str, Callable[[int], object]] = {
        "obstore": lambda i: counts.__setitem__("obstore", len(store.list("list/"))),
        "boto3": lambda i: counts.__setitem__("boto3", boto3_list()),
        "aiobotocore": lambda i: counts.__setitem__("aiobotocore",
                                                    loop.run_until_complete(aio_list())),
    }
    times = _rounds(clients, LIST_ROUNDS)
    assert set(counts.values()) == {LIST_KEYS}, counts
    base = statistics.median(times["obstore"])
    for name, t in times.items():
        med = statistics.median(t)
        report.add("objectstore", f"LIST {LIST_KEYS} keys, {name}", med * 1e3, "ms", "",
                   f"{med / base:.2f}x obstore's time, median of {LIST_ROUNDS}")
