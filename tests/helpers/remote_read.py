"""The log, oracle and in-process reads shared by the tests of Spark's ``remoteStorage``.

``write`` fills topic ``tiered`` with real transactional producers (committed and aborted
transactions, plain appends, CreateTime near the broker's clock and partly late);
partition 0 ends with an aborted transaction that spans segments, partition 1 with a
transaction left open. ``oracle`` decodes every batch the broker holds with the codec
and decides each transactional batch's fate from the next marker of its producer (none:
open); ``Tiered`` answers what each read must return:
- read_uncommitted: every data record below the high watermark;
- read_committed: plain and committed records below the last stable offset;
- positional bounds: the first offset whose timestamp is >= T over every record, markers
  and aborted data included, or the level's latest offset when that is none or at/after
  it (Kafka's ListOffsets, Spark's fallback);
- event time: the visible records with T1 <= timestamp < T2.
``read`` plans and reads in-process with the real DataSourceReader (``partitions()``,
then ``read()`` of each: the code Spark runs, without Spark's scheduling).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from hypothesis import strategies as st

from client import SyncClient, TopicPartition
from pipeline.options import parse_read_options
from pipeline.source import ChronologBatchReader, RemoteSegmentPartition
from storage.records import (
    ABORT_MARKER,
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    control_type,
    decode_batch,
    iter_batches,
)

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
            out += [row(r) for r in self.records
                    if r.partition == p and lo <= r.offset < hi and self.visible(r, level)]
        return sorted(out)

    def event_time(self, level: str, t1: int | None, t2: int | None) -> list[tuple[Any, ...]]:
        lo, hi = t1 if t1 is not None else -(1 << 62), t2 if t2 is not None else 1 << 62
        return sorted(row(r) for r in self.records
                      if self.visible(r, level) and lo <= r.timestamp < hi)


def row(r: Rec) -> tuple[Any, ...]:
    return (r.partition, r.offset, r.timestamp, r.key, r.value)


def write(bootstrap: str, rng: random.Random, t0: int) -> None:
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


def oracle(client: SyncClient) -> tuple[list[Rec], dict[int, int]]:
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


def options(t: Tiered, level: str, remote: bool, **extra: str) -> dict[str, str]:
    opts = {"bootstrap.servers": t.bootstrap, "subscribe": TOPIC,
            "kafka.isolation.level": level, **extra}
    if remote:
        opts["remoteStorage"] = t.bucket
    return opts


def read(opts: dict[str, str]) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """Plan and read in-process with the real DataSourceReader: (rows, its partitions)."""
    reader = ChronologBatchReader(parse_read_options(opts, streaming=False))
    parts = list(reader.partitions())
    rows: list[tuple[Any, ...]] = []
    for part in parts:
        for b in reader.read(part):
            rows += table_rows(pa.Table.from_batches([b]))
    return sorted(rows), parts


def table_rows(table: pa.Table) -> Iterator[tuple[Any, ...]]:
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    for i, r in enumerate(table.select(["partition", "offset", "key", "value"]).to_pylist()):
        yield (r["partition"], r["offset"], ts[i] // 1000, r["key"], r["value"])


def remote_reach(parts: list[Any]) -> int:
    """How many planned offsets the read takes from the bucket."""
    return sum(p.task.records for p in parts if isinstance(p, RemoteSegmentPartition))


times = st.one_of(st.none(), st.integers(-2, 102))
"""A time bound as a percentage of the writing's duration (None: no bound)."""


def at(t: Tiered, percent: int | None) -> int | None:
    return None if percent is None else t.t0 + (t.t1 - t.t0) * percent // 100


