"""``remoteStorage``: reads of tiered segments straight from a bucket equal reads through
the broker, and a brute-force oracle over the log's bytes.

One broker holds a topic written by real transactional producers (committed and aborted
transactions, plain appends, out-of-order CreateTime) in small segments; partition 0
ends with an aborted transaction whose data the tier gets but whose ABORT marker it does
not, partition 1 with a transaction still open (plain appends after it);
its sealed segments below the last stable offset are uploaded to a file:// bucket
(tests/helpers/tier_upload.py) while the broker keeps its local copy. The oracle decodes
every batch the broker holds with the codec and decides each transactional batch's fate
from the next marker of its producer (none: open):
- read_uncommitted: every data record below the high watermark;
- read_committed: plain and committed records below the last stable offset;
- positional bounds: the first offset whose timestamp is >= T over every record, markers
  and aborted data included, or the level's latest offset when that is none or at/after
  it (Kafka's ListOffsets, Spark's fallback);
- event time: the visible records with T1 <= timestamp < T2.

The planner and the task reader run here in-process (``partitions()`` then ``read()`` of
the real DataSourceReader: the code Spark runs, without Spark's scheduling), for many
hypothesis examples; ``test_spark_*`` runs a few windows through the real SparkSession.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from hypothesis import given, settings
from hypothesis import strategies as st

from client import SyncClient, TopicPartition
from pipeline.options import parse_read_options
from pipeline.remote import RemoteStats, Tier, open_store, read_task
from pipeline.source import ChronologBatchReader, RemoteSegmentPartition
from storage.records import (
    ABORT_MARKER,
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    control_type,
    decode_batch,
    iter_batches,
)
from storage.remote.store import ObjectStore
from tests.helpers.broker import BrokerProcess
from tests.helpers.tier_upload import upload_sealed

TOPIC = "tiered"
PARTITIONS = 2
LEVELS = ("read_uncommitted", "read_committed")


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    data: bool  # False for a marker
    fate: str  # plain, commit, abort, open (markers: marker)


@dataclass
class Tiered:
    bootstrap: str
    bucket: str
    records: list[Rec]
    hw: dict[int, int]
    lso: dict[int, int]
    highest: dict[int, int]  # highest uploaded offset per partition
    t0: int
    t1: int

    def limit(self, p: int, level: str) -> int:
        return self.lso[p] if level == "read_committed" else self.hw[p]

    def visible(self, r: Rec, level: str) -> bool:
        if not r.data or r.offset >= self.limit(r.partition, level):
            return False
        return level == "read_uncommitted" or r.fate in ("plain", "commit")

    def at_time(self, p: int, t: int | None, level: str, default: int) -> int:
        if t is None:
            return default
        limit = self.limit(p, level)
        first = min((r.offset for r in self.records if r.partition == p and r.timestamp >= t),
                    default=None)
        return limit if first is None or first >= limit else first

    def positional(self, level: str, t1: int | None, t2: int | None) -> list[tuple[Any, ...]]:
        out = []
        for p in range(PARTITIONS):
            lo = self.at_time(p, t1, level, 0)
            hi = self.at_time(p, t2, level, self.limit(p, level))
            out += [_row(r) for r in self.records
                    if r.partition == p and lo <= r.offset < hi and self.visible(r, level)]
        return sorted(out)

    def event_time(self, level: str, t1: int | None, t2: int | None) -> list[tuple[Any, ...]]:
        lo, hi = t1 if t1 is not None else -(1 << 62), t2 if t2 is not None else 1 << 62
        return sorted(_row(r) for r in self.records
                      if self.visible(r, level) and lo <= r.timestamp < hi)


def _row(r: Rec) -> tuple[Any, ...]:
    return (r.partition, r.offset, r.timestamp, r.key, r.value)


def _write(bootstrap: str, rng: random.Random, t0: int) -> None:
    """Transactional writers (commit or abort, spanning segments) and a plain producer,
    CreateTime mostly rising and partly late (module docstring for the partitions' ends)."""
    writers = [Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tier-w{i}",
                         "linger.ms": 0, "transaction.timeout.ms": 600_000}) for i in range(3)]
    for w in writers:
        w.init_transactions(15)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    open_: set[int] = set()
    seq = 0

    def batch(producer: Producer, p: int | None = None) -> None:
        nonlocal seq
        p = rng.randrange(PARTITIONS) if p is None else p
        for _ in range(rng.randint(1, 6)):
            seq += 1
            key = None if rng.random() < 0.2 else b"k%d" % rng.randrange(50)
            # Near the broker's clock, which stamps the markers (so time bounds fall
            # between markers as in a live log), a little out of order; 5 % very late.
            now = int(time.time() * 1000)
            ts = now - rng.randrange(300)
            if rng.random() < 0.05:
                ts = t0 + rng.randrange(max(now - t0, 0) + 1)
            producer.produce(TOPIC, b"v%d-" % seq + rng.randbytes(rng.randint(0, 60)),
                             key=key, partition=p, timestamp=ts)
        producer.flush(15)

    for _ in range(260):
        i = rng.randrange(len(writers) + 1)
        if i == len(writers):
            batch(plain)
            continue
        if i not in open_:
            writers[i].begin_transaction()
            open_.add(i)
        batch(writers[i])
        if rng.random() < 0.35:
            if rng.random() < 0.4:
                writers[i].abort_transaction(15)
            else:
                writers[i].commit_transaction(15)
            open_.discard(i)
    for i in sorted(open_):
        writers[i].commit_transaction(15)
    # Partition 0: an aborted transaction whose data lands in segments the tier gets and
    # whose ABORT marker stays in the active segment (not uploaded).
    writers[0].begin_transaction()
    batch(writers[0], 0)
    for _ in range(16):
        batch(plain, 0)
    writers[0].abort_transaction(15)
    # Partition 1: a transaction left open, plain appends after it.
    writers[1].begin_transaction()
    batch(writers[1], 1)
    for _ in range(8):
        batch(plain, 1)


def _oracle(client: SyncClient) -> tuple[list[Rec], dict[int, int]]:
    out: list[Rec] = []
    hw: dict[int, int] = {}
    for p in range(PARTITIONS):
        tp = TopicPartition(TOPIC, p)
        hw[p] = client.list_offsets({tp: -1})[tp][0]
        raw: list[tuple[int, Any, bytes]] = []  # (pos, header, buf) of every batch
        offset = 0
        while offset < hw[p]:
            buf = client.fetch_raw(TOPIC, p, offset, 1 << 20).records_bytes
            for pos, h in iter_batches(buf):
                if h.base_offset >= offset:
                    raw.append((pos, h, buf))
                offset = max(offset, h.next_offset)
        for i, (pos, h, buf) in enumerate(raw):
            control = bool(h.attributes & CONTROL_MASK)
            if control:
                fate = "marker"
            elif h.attributes & TRANSACTIONAL_MASK:
                nxt = next(((q, g, b) for q, g, b in raw[i + 1:]
                            if g.attributes & CONTROL_MASK and g.producer_id == h.producer_id),
                           None)
                fate = "open" if nxt is None else (
                    "abort" if control_type(nxt[2], nxt[0]) == ABORT_MARKER else "commit")
            else:
                fate = "plain"
            for r in decode_batch(buf, pos):
                out.append(Rec(p, r.offset, r.timestamp, r.key, r.value, not control, fate))
    return out, hw


@pytest.fixture(scope="module")
def tiered(module_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Tiered:
    bs = module_broker.bootstrap
    with SyncClient(bs) as c:
        c.create_topic(TOPIC, PARTITIONS, {"segment.bytes": "3000", "retention.ms": "-1",
                                           "index.interval.bytes": "300"})
    t0 = int(time.time() * 1000)
    _write(bs, random.Random(26), t0)
    t1 = int(time.time() * 1000)
    bucket = tmp_path_factory.mktemp("bucket")
    store = ObjectStore(bucket.as_uri())
    with SyncClient(bs) as c:
        records, hw = _oracle(c)
        lso = {p: c.list_offsets({TopicPartition(TOPIC, p): -1}, 1)[TopicPartition(TOPIC, p)][0]
               for p in range(PARTITIONS)}
    highest = {p: upload_sealed(module_broker.data_dir, store, TOPIC, p, below=lso[p],
                                interval=300) for p in range(PARTITIONS)}
    assert lso[1] < hw[1], "a transaction was left open"
    straddling = [r for r in records if r.partition == 0 and r.fate == "abort"
                  and r.offset <= highest[0]
                  and not any(m.partition == 0 and not m.data and m.offset <= highest[0]
                              and m.offset > r.offset for m in records)]
    assert straddling, "an aborted transaction's data is in the tier, its marker is not"
    assert all(0 < highest[p] < hw[p] - 1 for p in highest), (highest, lso, hw)
    return Tiered(bs, bucket.as_uri(), records, hw, lso, highest, t0, t1)


def _options(t: Tiered, level: str, remote: bool, **extra: str) -> dict[str, str]:
    opts = {"bootstrap.servers": t.bootstrap, "subscribe": TOPIC,
            "kafka.isolation.level": level, **extra}
    if remote:
        opts["remoteStorage"] = t.bucket
    return opts


def _read(opts: dict[str, str]) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """Plan and read in-process with the real DataSourceReader: (rows, its partitions)."""
    reader = ChronologBatchReader(parse_read_options(opts, streaming=False))
    parts = list(reader.partitions())
    rows: list[tuple[Any, ...]] = []
    for part in parts:
        for b in reader.read(part):
            rows += _rows(pa.Table.from_batches([b]))
    return sorted(rows), parts


def _rows(table: pa.Table) -> Iterator[tuple[Any, ...]]:
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    for i, r in enumerate(table.select(["partition", "offset", "key", "value"]).to_pylist()):
        yield (r["partition"], r["offset"], ts[i] // 1000, r["key"], r["value"])


def _remote_reach(parts: list[Any]) -> int:
    """How many planned offsets the read takes from the bucket."""
    return sum(p.task.records for p in parts if isinstance(p, RemoteSegmentPartition))


times = st.one_of(st.none(), st.integers(-2, 102))
"""A time bound as a percentage of the writing's duration (None: no bound)."""


def _at(t: Tiered, percent: int | None) -> int | None:
    return None if percent is None else t.t0 + (t.t1 - t.t0) * percent // 100


@settings(max_examples=40)
@given(level=st.sampled_from(LEVELS), a=times, b=times, event=st.booleans())
def test_time_windows_from_the_bucket_equal_the_broker_and_the_oracle(
        tiered: Tiered, level: str, a: int | None, b: int | None, event: bool) -> None:
    t1, t2 = _at(tiered, a), _at(tiered, b)
    if event and t1 is None and t2 is None:
        t1 = tiered.t0
    if t1 is not None and t2 is not None and t2 < t1:
        t1, t2 = t2, t1
    extra = {"eventTime": "true"} if event else {}
    if t1 is not None:
        extra["startingTimestamp"] = str(t1)
    if t2 is not None:
        extra["endingTimestamp"] = str(t2)
    want = tiered.event_time(level, t1, t2) if event else tiered.positional(level, t1, t2)
    remote, parts = _read(_options(tiered, level, True, **extra))
    broker, _ = _read(_options(tiered, level, False, **extra))
    assert broker == want
    assert remote == want


@settings(max_examples=25)
@given(level=st.sampled_from(LEVELS), data=st.data())
def test_offset_ranges_across_the_remote_local_boundary(tiered: Tiered, level: str,
                                                        data: st.DataObject) -> None:
    starts, ends = {}, {}
    for p in range(PARTITIONS):
        limit = tiered.limit(p, level)
        s = data.draw(st.integers(0, limit), label=f"start-{p}")
        starts[str(p)] = s
        ends[str(p)] = data.draw(st.integers(s, limit), label=f"end-{p}")
    import json

    extra = {"startingOffsets": json.dumps({TOPIC: starts}),
             "endingOffsets": json.dumps({TOPIC: ends}),
             "maxRecordsPerPartition": str(data.draw(st.integers(5, 400), label="cap"))}
    want = sorted(_row(r) for r in tiered.records if tiered.visible(r, level)
                  and starts[str(r.partition)] <= r.offset < ends[str(r.partition)])
    remote, parts = _read(_options(tiered, level, True, **extra))
    assert remote == want
    covered = sum(max(0, min(ends[str(p)], tiered.highest[p] + 1) - starts[str(p)])
                  for p in range(PARTITIONS))
    assert _remote_reach(parts) == covered


def test_a_whole_read_takes_everything_up_to_the_highest_uploaded_offset_from_the_bucket(
        tiered: Tiered) -> None:
    for level in LEVELS:
        remote, parts = _read(_options(tiered, level, True))
        assert remote == tiered.positional(level, None, None)
        assert _remote_reach(parts) == sum(h + 1 for h in tiered.highest.values())


def test_event_time_skips_segments_and_blocks_outside_the_window(tiered: Tiered) -> None:
    """A narrow window reads a fraction of the tier's bytes, and exactly its rows."""
    t1, t2 = _at(tiered, 30), _at(tiered, 32)
    assert t1 is not None and t2 is not None
    opts = _options(tiered, "read_committed", True, eventTime="true",
                    startingTimestamp=str(t1), endingTimestamp=str(t2))
    reader = ChronologBatchReader(parse_read_options(opts, streaming=False))
    stats = RemoteStats()
    rows = []
    for part in reader.partitions():
        if isinstance(part, RemoteSegmentPartition):
            for b in read_task(reader.opts.remote, part.task, chunk_bytes=1 << 20, stats=stats):
                rows += _rows(pa.Table.from_batches([b]))
    tier = Tier(open_store(reader.opts.remote))
    total = sum(s.size_bytes for p in range(PARTITIONS)
                for s in tier.partition(TOPIC, p).segments)
    want = [r for r in tiered.event_time("read_committed", t1, t2)
            if r[1] <= tiered.highest[r[0]]]
    assert sorted(rows) == want and want
    assert stats.bytes_read < total / 2, (stats.bytes_read, total)


def test_spark_reads_from_the_bucket_equal_the_broker_and_the_oracle(
        spark: Any, tiered: Tiered) -> None:
    """Through the real SparkSession, two windows that span the remote/local boundary (the
    in-process tests above vary the rest): positional at read_committed, event time at
    read_uncommitted."""
    from pipeline import register

    register(spark)
    t1, t2 = _at(tiered, 60), _at(tiered, 99)
    assert t1 is not None and t2 is not None
    for level, event in (("read_committed", False), ("read_uncommitted", True)):
        extra = {"startingTimestamp": str(t1), "endingTimestamp": str(t2)}
        if event:
            extra["eventTime"] = "true"
        want = (tiered.event_time if event else tiered.positional)(level, t1, t2)
        assert {r[1] <= tiered.highest[r[0]] for r in want} == {True, False}, "spans both"
        got = {}
        for remote in (True, False):
            r = spark.read.format("chronolog")
            for k, v in _options(tiered, level, remote, **extra).items():
                r = r.option(k, v)
            got[remote] = sorted(_rows(r.load().toArrow()))
        assert got[True] == got[False] == want, (level, event)


def test_reads_from_a_real_s3_server_with_the_rsm_style_options(
        tiered: Tiered, module_broker: BrokerProcess, s3_bucket: Any) -> None:
    """The same partitions uploaded to s3proxy (tests/helpers/s3server.py), read with
    ``remoteStorage=s3://...`` and ``remoteStorage.s3.*`` credentials: the oracle's rows,
    the tiered part from the bucket."""
    store = ObjectStore(s3_bucket.url, s3_bucket.options)
    highest = {p: upload_sealed(module_broker.data_dir, store, TOPIC, p, below=tiered.lso[p],
                                interval=300) for p in range(PARTITIONS)}
    assert highest == tiered.highest
    s3 = {f"remoteStorage.{k}" if k != "url" else "remoteStorage": v
          for k, v in s3_bucket.options.items()}
    for level, event, (a, b) in (("read_committed", False, (10, 90)),
                                 ("read_uncommitted", True, (20, 95)),
                                 ("read_committed", True, (None, None))):
        t1, t2 = _at(tiered, a), _at(tiered, b)
        extra = {"eventTime": "true", "startingTimestamp": str(t1 or tiered.t0)} if event else {}
        if not event and t1 is not None:
            extra["startingTimestamp"] = str(t1)
        if t2 is not None:
            extra["endingTimestamp"] = str(t2)
        opts = {**_options(tiered, level, False, **extra), **s3}
        rows, parts = _read(opts)
        want = (tiered.event_time(level, t1 or tiered.t0, t2) if event
                else tiered.positional(level, t1, t2))
        assert rows == want, (level, event)
        assert _remote_reach(parts) > 0
