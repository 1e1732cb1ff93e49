"""Kafka's own DumpLogSegments reads Chronolog's segment files: the disk format is Kafka's.

A real client (librdkafka) produces to Chronolog: out-of-order CreateTime
timestamps, every codec, idempotent and transactional batches (one transaction
aborted), a LogAppendTime topic, and segments small enough that each partition
rolls several times; the broker is killed (SIGKILL) and recovers between the two
topics. After a clean shutdown Kafka's tool dumps every ``.log``,
``.index``, ``.timeindex`` and ``.txnindex``, verifies the indexes against the log,
and runs the same sanity check Kafka uses on index files. Its output is compared
with what was produced (delivery reports) and with the batches Chronolog serves
(its own client's Fetch), never with hard-coded numbers.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from client.sync import SyncClient
from storage.records import BatchHeader, iter_batches
from tests.conftest import BrokerProcess, free_port_number
from tests.ecosystem import dumplog
from tests.ecosystem.kafka_peer import DUMP_LOG, tool

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {name: i for i, name in enumerate(CODECS)}
# An hour and more in the past: inside Kafka 4's message.timestamp.after.max.ms.
BASE_TS = int(time.time() * 1000) - 3_600_000
TOPICS = {
    "dump-create": {"segment.bytes": "1000", "index.interval.bytes": "100"},
    "dump-append": {"segment.bytes": "1000", "index.interval.bytes": "100",
                    "message.timestamp.type": "LogAppendTime"},
}


@dataclass(frozen=True)
class Sent:
    offset: int
    timestamp: int
    key: str
    value: str


@dataclass
class Dumped:
    produced: dict[str, list[Sent]]
    served: dict[str, list[tuple[int, BatchHeader]]]  # (offset-ordered) batches via Fetch
    aborted: list[tuple[int, int, int]]  # (producer id, first offset, marker offset)
    partition_dirs: dict[str, Path]
    deep: str
    verify: str
    sanity: str


def _produce(bootstrap: str, topic: str, rnd: random.Random, out: list[Sent],
             aborted: list[tuple[int, int, int]], transactions: bool) -> None:
    n = 0

    def record(p: Producer, value_tag: str) -> None:
        nonlocal n
        key, value = f"k{n}", f"{value_tag}-{n}-" + "x" * rnd.randrange(0, 40)
        ts = BASE_TS + rnd.randrange(0, 100_000)  # out of order within and across batches

        def delivered(err: object, msg: object) -> None:
            assert err is None, err
            out.append(Sent(msg.offset(), msg.timestamp()[1], key, value))  # type: ignore[attr-defined]

        p.produce(topic, key=key, value=value, timestamp=ts, on_delivery=delivered)
        n += 1

    for codec in CODECS:
        # Every other producer is idempotent: batches with producer ids and sequences.
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                      "linger.ms": 200, "enable.idempotence": codec in ("gzip", "lz4")})
        for _ in range(3):
            for _ in range(rnd.randrange(3, 9)):
                record(p, codec)
            assert p.flush(15) == 0
    if not transactions:
        return
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"dump-{topic}",
                  "compression.type": "lz4", "linger.ms": 50})
    p.init_transactions(15)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        before = len(out)
        for _ in range(5):
            record(p, outcome)
        assert p.flush(15) == 0
        if outcome == "commit":
            p.commit_transaction(15)
        else:
            first = min(s.offset for s in out[before:])
            aborted.append((-1, first, max(s.offset for s in out[before:]) + 1))
            p.abort_transaction(15)


def _served_batches(client: SyncClient, topic: str) -> list[tuple[int, BatchHeader]]:
    """Every batch of partition 0 as Chronolog's Fetch serves it (offset, header)."""
    out: list[tuple[int, BatchHeader]] = []
    offset = 0
    while True:
        res = client.fetch_raw(topic, 0, offset)
        batches = [(pos, h) for pos, h in iter_batches(res.records_bytes)
                   if h.last_offset >= offset]
        if not batches:
            return out
        out += [(h.base_offset, h) for _, h in batches]
        offset = batches[-1][1].next_offset


def _dump(*args: str) -> str:
    proc = tool(DUMP_LOG, *args)
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def dumped(module_tmp: Path, kafka_classpath: str) -> Iterator[Dumped]:
    data = module_tmp / "data"
    data.mkdir()
    broker = BrokerProcess(data, free_port_number())
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics(
                [NewTopic(t, 1, 1, config=c) for t, c in TOPICS.items()]).values():
            f.result(15)
        rnd = random.Random(27)
        produced: dict[str, list[Sent]] = {t: [] for t in TOPICS}
        aborted: list[tuple[int, int, int]] = []
        for topic in TOPICS:
            _produce(broker.bootstrap, topic, rnd, produced[topic], aborted,
                     transactions=topic == "dump-create")
            if topic == "dump-create":
                # A crash between the topics: the restart recovers dump-create's
                # segments and rebuilds their indexes, which the dump then checks too.
                broker.kill()
                broker.start()
        with SyncClient.connect(broker.bootstrap) as client:
            served = {t: _served_batches(client, t) for t in TOPICS}
    finally:
        code = broker.stop()
    assert code == 0, f"Chronolog did not shut down cleanly (exit {code}):\n{broker.log()}"
    # The aborted transaction's producer id, from the batches Chronolog served.
    aborted = [(next(h.producer_id for _, h in served["dump-create"]
                     if h.base_offset <= first <= h.last_offset), first, marker)
               for _, first, marker in aborted]
    dirs = {t: data / f"{t}-0" for t in TOPICS}
    files = sorted(str(p) for d in dirs.values() for p in d.iterdir()
                   if p.suffix in (".log", ".index", ".timeindex", ".txnindex"))
    listed = ",".join(files)
    yield Dumped(
        produced=produced, served=served, aborted=aborted, partition_dirs=dirs,
        deep=_dump("--files", listed, "--deep-iteration", "--print-data-log"),
        verify=_dump("--files", listed, "--verify-index-only"),
        sanity=_dump("--files", listed, "--index-sanity-check"),
    )


def test_each_partition_has_sealed_segments_and_an_active_one(dumped: Dumped) -> None:
    for topic, d in dumped.partition_dirs.items():
        logs = sorted(d.glob("*.log"))
        assert len(logs) >= 3, f"{topic}: only {len(logs)} segments; the test needs rolls"
        for log in logs:
            assert log.with_suffix(".index").exists() and log.with_suffix(".timeindex").exists()


def test_dump_reports_no_broken_rule(dumped: Dumped) -> None:
    for name, output in (("deep", dumped.deep), ("verify", dumped.verify),
                         ("sanity", dumped.sanity)):
        assert dumplog.errors(output) == [], f"DumpLogSegments ({name}) found:\n{output}"


def test_every_index_file_passes_kafkas_sanity_check(dumped: Dumped) -> None:
    indexes = [p for d in dumped.partition_dirs.values() for p in d.iterdir()
               if p.suffix in (".index", ".timeindex")]
    for p in indexes:
        assert f"{p} passed sanity check." in dumped.sanity, dumped.sanity


def test_dumped_records_equal_what_was_produced(dumped: Dumped) -> None:
    files = dumplog.parse(dumped.deep)
    for topic, d in dumped.partition_dirs.items():
        records = [r for f in sorted(d.glob("*.log")) for r in files[str(f)].records]
        data = [r for r in records if "endTxnMarker" not in r]
        got = [(int(r["offset"]), int(r.get("CreateTime") or r["LogAppendTime"]), r["key"],
                r["payload"]) for r in data]
        want = [(s.offset, s.timestamp, s.key, s.value)
                for s in sorted(dumped.produced[topic], key=lambda s: s.offset)]
        assert want and got == want
        kind = "LogAppendTime" if topic == "dump-append" else "CreateTime"
        assert all(kind in r for r in data)


def test_dumped_batches_equal_what_chronolog_serves(dumped: Dumped) -> None:
    files = dumplog.parse(dumped.deep)
    for topic, d in dumped.partition_dirs.items():
        got, want = [], []
        for log in sorted(d.glob("*.log")):
            position = 0
            base = int(log.stem)
            for b in files[str(log)].batches:
                got.append({k: b[k] for k in (
                    "baseOffset", "lastOffset", "count", "baseSequence", "producerId",
                    "producerEpoch", "isTransactional", "isControl", "position", "size",
                    "compresscodec", "isvalid")} | {"maxTimestamp": b.get("CreateTime")
                                                     or b.get("LogAppendTime")})
            for offset, h in dumped.served[topic]:
                if offset < base or any(int(o.stem) > base and offset >= int(o.stem)
                                        for o in d.glob("*.log")):
                    continue
                want.append({
                    "baseOffset": str(h.base_offset), "lastOffset": str(h.last_offset),
                    "count": str(h.records_count), "baseSequence": str(h.base_sequence),
                    "producerId": str(h.producer_id), "producerEpoch": str(h.producer_epoch),
                    "isTransactional": str(h.is_transactional).lower(),
                    "isControl": str(h.is_control).lower(), "position": str(position),
                    "size": str(h.size), "compresscodec": CODECS[h.compression],
                    "isvalid": "true", "maxTimestamp": str(h.max_timestamp)})
                position += h.size
        assert want and got == want


def test_each_time_index_ends_with_its_segments_max(dumped: Dumped) -> None:
    """Kafka's rule: a sealed (and a cleanly closed active) segment's last time-index
    entry is its max timestamp at the last offset of the first batch that reached it."""
    files = dumplog.parse(dumped.deep)
    for d in dumped.partition_dirs.values():
        for log in sorted(d.glob("*.log")):
            batches = files[str(log)].batches
            ts = [int(b.get("CreateTime") or b["LogAppendTime"]) for b in batches]
            top = max(ts)
            first = next(b for b, t in zip(batches, ts, strict=True) if t == top)
            entries = files[str(log.with_suffix(".timeindex"))].entries
            assert entries, f"{log.with_suffix('.timeindex')} is empty"
            assert (int(entries[-1]["timestamp"]), int(entries[-1]["offset"])) == (
                top, int(first["lastOffset"]))


def test_aborted_transaction_is_in_the_txnindex_and_marked(dumped: Dumped) -> None:
    files = dumplog.parse(dumped.deep)
    d = dumped.partition_dirs["dump-create"]
    listed = [(int(e["producerId"]), int(e["firstOffset"]), int(e["lastOffset"]))
              for p in sorted(d.glob("*.txnindex")) for e in files[str(p)].entries]
    assert listed == dumped.aborted
    markers = {int(r["offset"]): r["endTxnMarker"] for f in sorted(d.glob("*.log"))
               for r in files[str(f)].records if "endTxnMarker" in r}
    assert sorted(markers.values()) == ["ABORT", "COMMIT", "COMMIT"]
    assert [markers[m] for _, _, m in dumped.aborted] == ["ABORT"]
