"""The same produce sequence written by Chronolog and by Apache Kafka: the same files.

One seeded sequence of pre-built batches (out-of-order CreateTime, every codec, 3 to 9
records each) goes, one Produce request per batch, to a topic with
``index.interval.bytes=100`` on each broker; after
a clean shutdown Kafka's DumpLogSegments prints both partitions' ``.log``, ``.index``
and ``.timeindex``. Batches (positions, sizes, offsets, codecs, max timestamps, CRCs),
records and every index entry must be the same. (A real client's batching is not
deterministic, so the batches are built here, byte-identical for both brokers;
test_dump_log_segments.py covers what librdkafka itself writes.)
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from client.sync import SyncClient
from protocol.errors import ErrorCode, KafkaError
from storage.records import Record, build_batch
from tests.conftest import BrokerProcess, free_port_number
from tests.ecosystem import dumplog
from tests.ecosystem.kafka_peer import DUMP_LOG, KafkaNode, tool
from tests.ecosystem.test_dump_log_segments import BASE_TS

pytestmark = pytest.mark.ecosystem_full

TOPIC = "side"
CONFIGS = {"index.interval.bytes": "100"}
SEED = 806  # KAFKA-806: Kafka indexes per batch, and so must Chronolog


def _batches() -> list[bytes]:
    rnd = random.Random(SEED)
    out = []
    for i in range(15):
        records = [Record(0, BASE_TS + rnd.randrange(0, 100_000), f"k{i}-{j}".encode(),
                          f"v{i}-{j}-".encode() + b"x" * rnd.randrange(0, 40))
                   for j in range(rnd.randrange(3, 10))]
        out.append(build_batch(records, compression=i % 5))
    return out


def _write(bootstrap: str) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config=CONFIGS)]).values():
        f.result(15)
    offsets = []
    with SyncClient.connect(bootstrap) as client:
        for batch in _batches():
            deadline = time.monotonic() + 15
            while True:
                try:
                    offsets.append(client.produce_batch(TOPIC, 0, batch, acks=-1))
                    break
                except KafkaError as e:  # Kafka, until the new topic's leader is known
                    if e.code != ErrorCode.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
    return offsets


def _dump(partition_dir: Path) -> dict[str, dumplog.DumpedFile]:
    files = sorted(p for p in partition_dir.iterdir()
                   if p.suffix in (".log", ".index", ".timeindex"))
    out = tool(DUMP_LOG, "--files", ",".join(map(str, files)), "--deep-iteration",
               "--print-data-log").stdout
    assert dumplog.errors(out) == [], out
    return {Path(k).name: v for k, v in dumplog.parse(out).items()}


@pytest.fixture(scope="module")
def both(module_tmp: Path, kafka_node: KafkaNode) -> Iterator[tuple[dict, dict]]:
    data = module_tmp / "chronolog"
    data.mkdir()
    chronolog = BrokerProcess(data, free_port_number()).start()
    try:
        ours_sent = _write(chronolog.bootstrap)
    finally:
        assert chronolog.stop() == 0, chronolog.log()
    theirs_sent = _write(kafka_node.bootstrap)
    kafka_node.stop()  # a clean shutdown, as for Chronolog: final time-index entry, trimmed files
    ours, theirs = _dump(data / f"{TOPIC}-0"), _dump(kafka_node.data_dir / f"{TOPIC}-0")
    assert ours_sent == theirs_sent
    yield ours, theirs


def test_same_segment_files(both: tuple[dict, dict]) -> None:
    ours, theirs = both
    assert sorted(ours) == sorted(theirs)


def test_same_batches_and_records(both: tuple[dict, dict]) -> None:
    ours, theirs = both
    for name in (n for n in ours if n.endswith(".log")):
        assert len(ours[name].batches) == len(_batches())
        assert ours[name].batches == theirs[name].batches  # positions, sizes, CRCs included
        assert ours[name].records == theirs[name].records


def test_same_offset_and_time_index_entries(both: tuple[dict, dict]) -> None:
    ours, theirs = both
    for name in (n for n in ours if n.endswith((".index", ".timeindex"))):
        assert ours[name].entries, name
        assert ours[name].entries == theirs[name].entries, name
