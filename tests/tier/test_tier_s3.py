"""The broker's remote tier on a real S3 server (s3proxy, tests/helpers/s3server.py):
the same path as the ``file://`` tests, through ``rsm.config.url=s3://...`` and the
``rsm.config.s3.*`` settings. History that exists only in the bucket reads back through
confluent-kafka, time lookups equal a scan of the produced records, and a read replica
on another port serves the same records from the same bucket.
"""

from __future__ import annotations

import random
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.helpers.s3server import S3Bucket
from tests.helpers.wait import wait_until
from tests.tier.test_tier_broker import (
    INTERVAL,
    T0,
    TIMEOUT,
    bases,
    consume_confluent,
    create_tiered_topic,
    drop_local_copies,
    list_offsets,
    oracle_time,
    produce,
    records,
    start,
)


def test_history_only_in_an_s3_bucket_reads_back_and_a_replica_serves_it(
        s3_bucket: S3Bucket, tmp_path: Path) -> None:
    rsm = {f"rsm.config.{k}": v for k, v in s3_bucket.options.items()}
    leader = start(tmp_path, "leader", {"remote.log.storage.system.enable": "true", **rsm,
                                        **INTERVAL})
    replica = None
    try:
        topic = "s3hist"
        create_tiered_topic(leader, topic)
        recs = produce(leader.bootstrap, topic, records(200, seed=11))
        wait_until(lambda: list_offsets(leader.port, topic, -5, 9)[1]
                   == bases(leader.data_dir, topic)[-1] - 1, TIMEOUT, "sealed segments in S3")
        drop_local_copies(leader, topic)
        assert bases(leader.data_dir, topic)[0] > 150
        assert consume_confluent(leader.bootstrap, topic, len(recs)) == recs
        rng = random.Random(3)
        c = Consumer({"bootstrap.servers": leader.bootstrap, "group.id": "s3-lookup"})
        try:
            for t in [T0 - 1, *(rng.randrange(T0, T0 + 200_000) for _ in range(10))]:
                [tp] = c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=TIMEOUT)
                assert tp.offset == oracle_time(recs, t)[0], t
        finally:
            c.close()
        replica = start(tmp_path, "replica", {**rsm, **INTERVAL},
                        ["--read-replica", s3_bucket.url])
        end = list_offsets(replica.port, topic, -1, 9)[1]
        assert end == list_offsets(leader.port, topic, -5, 9)[1] + 1
        assert consume_confluent(replica.bootstrap, topic, end) == [r for r in recs if r.offset < end]
        # The secret given as rsm.config.s3.secret.access.key is never logged.
        assert s3_bucket.options["s3.secret.access.key"] not in replica.log() + leader.log()
    finally:
        if replica is not None:
            replica.stop()
        leader.stop()
