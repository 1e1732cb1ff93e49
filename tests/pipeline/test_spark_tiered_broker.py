"""Spark reads history that exists only in the tier: ``remoteStorage`` vs the broker.

A broker with ``remote.log.storage.system.enable`` tiers topic ``tiered`` (written by
tests/helpers/remote_read.py's transactional producers) to a ``file://`` bucket itself;
the oracle is taken while every record is still local, then ``local.retention.bytes=1``
makes the broker delete its copy of every uploaded segment. A real SparkSession then
reads windows that span the tiered part and the local tail, once with ``remoteStorage``
(the tiered part straight from the bucket) and once through the broker (which serves the
tiered part from the bucket itself): both equal the oracle.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

import storage.remote.manifest as mf
import tests.helpers.remote_read as rr
from client import SyncClient, TopicPartition
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.wait import wait_until

TIMEOUT = 30.0


def _bases(data: Path, p: int) -> list[int]:
    return sorted(int(f.stem) for f in (data / f"{rr.TOPIC}-{p}").glob("*.log"))


def _highest(bucket: Path, p: int) -> int:
    path = bucket / mf.manifest_key(rr.TOPIC, p)
    return mf.decode_partition(path.read_bytes()).highest_offset() if path.exists() else -1


@pytest.fixture(scope="module")
def only_in_tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rr.Tiered]:
    tmp = tmp_path_factory.mktemp("spark-tier")
    bucket = tmp / "bucket"
    (tmp / "data").mkdir()
    broker = BrokerProcess(tmp / "data", free_port_number(), {
        "remote.log.storage.system.enable": "true", "rsm.config.url": bucket.as_uri(),
        "remote.log.manager.task.interval.ms": "100",
        "log.retention.check.interval.ms": "100"}).start()
    try:
        bs = broker.bootstrap
        with SyncClient(bs) as c:
            c.create_topic(rr.TOPIC, rr.PARTITIONS, {"remote.storage.enable": "true",
                                               "segment.bytes": "3000", "retention.ms": "-1",
                                               "index.interval.bytes": "300"})
        t0 = int(time.time() * 1000)
        rr.write(bs, random.Random(7), t0)
        t1 = int(time.time() * 1000)
        with SyncClient(bs) as c:
            records, hw = rr.oracle(c)  # every record still local
            lso = {p: c.list_offsets({TopicPartition(rr.TOPIC, p): -1}, 1)[
                TopicPartition(rr.TOPIC, p)][0] for p in range(rr.PARTITIONS)}
        data = broker.data_dir
        # Kafka's copy rule: every sealed segment whose successor starts at or below the LSO.
        want = {p: max(b for b in _bases(data, p) if b <= lso[p]) - 1 for p in range(rr.PARTITIONS)}
        wait_until(lambda: all(_highest(bucket, p) == want[p] for p in want), TIMEOUT,
                   f"segments uploaded up to {want}")
        admin = AdminClient({"bootstrap.servers": bs})
        res = ConfigResource("TOPIC", rr.TOPIC, incremental_configs=[ConfigEntry(
            "local.retention.bytes", "1", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(TIMEOUT)
        wait_until(lambda: all(_bases(data, p)[0] == want[p] + 1 for p in want), TIMEOUT,
                   "local copies of uploaded segments deleted")
        yield rr.Tiered(bs, bucket.as_uri(), records, hw, lso, want, t0, t1)
    finally:
        broker.stop()


def test_whole_reads_of_history_only_in_the_tier_equal_the_oracle(only_in_tier: rr.Tiered) -> None:
    """In-process (the planner and tasks Spark runs): everything, at both levels."""
    t = only_in_tier
    for level in rr.LEVELS:
        got, parts = rr.read(rr.options(t, level, True))
        assert got == t.positional(level, None, None)
        assert rr.remote_reach(parts) == sum(h + 1 for h in t.highest.values())


def test_spark_reads_history_only_in_the_tier_like_the_broker_and_the_oracle(
        spark: Any, only_in_tier: rr.Tiered) -> None:
    """Through the real SparkSession, windows that span the tier and the local tail:
    positional at read_committed, event time at read_uncommitted."""
    from pipeline import register

    register(spark)
    t = only_in_tier
    t1, t2 = rr.at(t, 40), rr.at(t, 99)
    assert t1 is not None and t2 is not None
    for level, event in (("read_committed", False), ("read_uncommitted", True)):
        extra = {"startingTimestamp": str(t1), "endingTimestamp": str(t2)}
        if event:
            extra["eventTime"] = "true"
        want = (t.event_time if event else t.positional)(level, t1, t2)
        assert {r[1] <= t.highest[r[0]] for r in want} == {True, False}, "spans both"
        got = {}
        for remote in (True, False):
            r = spark.read.format("chronolog")
            for k, v in rr.options(t, level, remote, **extra).items():
                r = r.option(k, v)
            got[remote] = sorted(rr.table_rows(r.load().toArrow()))
        assert got[True] == got[False] == want, (level, event)
