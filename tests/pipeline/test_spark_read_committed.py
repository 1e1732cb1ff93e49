"""Spark reads at ``kafka.isolation.level`` over logs written by real transactional producers.

confluent-kafka transactional producers interleave committed, aborted and still-open
transactions with plain appends on a real broker. The oracle is what the test produced
(every record's partition, offset from its delivery report, and its transaction's fate)
plus the timestamps of every batch in the log, markers included, read with the codec:
- read_committed: per partition the records of committed transactions and plain appends
  below the last stable offset (the first offset of the oldest open transaction, else
  the log end); a time bound resolves to the first offset whose timestamp is >= T, over
  every record including markers and aborted data, or to the LSO when that offset is at
  or past the LSO (Kafka's ListOffsets) or there is none (Spark's fallback to latest);
- read_uncommitted: every data record below the high watermark, aborted and open ones
  included, time bounds without the LSO filter.
Markers are never rows at either level.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import SyncClient, TopicPartition
from pipeline.fetcher import DataLossError, read_range
from storage.records import decode_batch, iter_batches
from tests.helpers.remote_read import LEVELS


@dataclass(frozen=True)
class Written:
    partition: int
    offset: int
    value: bytes
    fate: str  # plain, commit, abort or open


@dataclass
class Log:
    """What one mix wrote, and every record's (offset, timestamp) in the log, markers included."""

    records: list[Written]
    stamps: dict[int, list[tuple[int, int]]]
    ends: dict[int, int]

    def lso(self, p: int) -> int:
        return min((w.offset for w in self.records if w.partition == p and w.fate == "open"),
                   default=self.ends[p])

    def limit(self, p: int, level: str) -> int:
        return self.lso(p) if level == "read_committed" else self.ends[p]

    def at_time(self, p: int, t: int | None, level: str, default: int) -> int:
        """ListOffsets for time t at ``level``, with Spark's no-match fallback to latest."""
        if t is None:
            return default
        first = min((o for o, ts in self.stamps[p] if ts >= t), default=None)
        limit = self.limit(p, level)
        return limit if first is None or first >= limit else first

    def window(self, level: str, t1: int | None = None, t2: int | None = None
               ) -> list[tuple[int, int, bytes]]:
        visible = {"plain", "commit"} if level == "read_committed" else {
            "plain", "commit", "abort", "open"}
        out = []
        for p in self.ends:
            lo = self.at_time(p, t1, level, 0)
            hi = self.at_time(p, t2, level, self.limit(p, level))
            out += [(w.partition, w.offset, w.value) for w in self.records
                    if w.partition == p and lo <= w.offset < hi and w.fate in visible]
        return sorted(out)


class Mix:
    """Transactional producers (one open transaction each at most) and a plain producer."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rng: random.Random,
                 writers: int) -> None:
        self.bootstrap, self.topic, self.partitions, self.rng = bootstrap, topic, partitions, rng
        self.delivered: dict[bytes, tuple[int, int]] = {}
        self.fate: dict[bytes, str] = {}
        self.open: dict[int, list[bytes]] = {}
        self.clock = int(time.time() * 1000)
        self.seq = 0
        self.writers = [
            Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-w{i}",
                      "linger.ms": 0, "transaction.timeout.ms": 600_000})
            for i in range(writers)]
        for w in self.writers:
            w.init_transactions(15)
        self.plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})

    def _on_delivery(self, err: Any, msg: Any) -> None:
        assert err is None, err
        self.delivered[msg.value()] = (msg.partition(), msg.offset())

    def _batch(self, producer: Producer, fate: str) -> list[bytes]:
        """A few records to one partition, flushed so they form one batch in the log now."""
        p = self.rng.randrange(self.partitions)
        values = []
        for _ in range(self.rng.randint(1, 6)):
            self.seq += 1
            v = b"%s-%d" % (fate.encode(), self.seq)
            # CreateTime near the broker's clock, a little out of order.
            self.clock += self.rng.randint(0, 4)
            producer.produce(self.topic, v, partition=p, on_delivery=self._on_delivery,
                             timestamp=self.clock + self.rng.randint(-6, 6))
            values.append(v)
        producer.flush(15)
        return values

    def step(self, end_probability: float, abort_probability: float) -> None:
        i = self.rng.randrange(len(self.writers) + 1)
        if i == len(self.writers):
            for v in self._batch(self.plain, "plain"):
                self.fate[v] = "plain"
            return
        w = self.writers[i]
        if i not in self.open:
            w.begin_transaction()
            self.open[i] = []
        self.open[i] += self._batch(w, "txn")
        if self.rng.random() < end_probability:
            if self.rng.random() < abort_probability:
                w.abort_transaction(15)
                fate = "abort"
            else:
                w.commit_transaction(15)
                fate = "commit"
            for v in self.open.pop(i):
                self.fate[v] = fate

    def finish(self, leave_open: int) -> None:
        """Leave exactly ``leave_open`` transactions open (with plain appends after them) and
        commit the others."""
        for i in range(len(self.writers)):
            if len(self.open) >= leave_open:
                break
            if i not in self.open:
                self.writers[i].begin_transaction()
                self.open[i] = self._batch(self.writers[i], "txn")
        if leave_open:
            for _ in range(2):
                for v in self._batch(self.plain, "plain"):
                    self.fate[v] = "plain"
        for i in sorted(self.open)[leave_open:]:
            self.writers[i].commit_transaction(15)
            for v in self.open.pop(i):
                self.fate[v] = "commit"
        for values in self.open.values():
            for v in values:
                self.fate[v] = "open"

    def log(self) -> Log:
        records = [Written(*self.delivered[v], v, f) for v, f in self.fate.items()]
        stamps: dict[int, list[tuple[int, int]]] = {}
        ends: dict[int, int] = {}
        with SyncClient(self.bootstrap) as c:
            for p in range(self.partitions):
                tp = TopicPartition(self.topic, p)
                ends[p] = c.list_offsets({tp: -1})[tp][0]
                stamps[p] = []
                offset = 0
                while offset < ends[p]:
                    buf = c.fetch_raw(self.topic, p, offset, 1 << 20).records_bytes
                    for pos, h in iter_batches(buf):
                        stamps[p] += [(r.offset, r.timestamp) for r in decode_batch(buf, pos)
                                      if r.offset >= offset]
                        offset = max(offset, h.last_offset + 1)
        return Log(records, stamps, ends)


@pytest.fixture
def mixes() -> Iterator[list[Mix]]:
    made: list[Mix] = []
    yield made
    for m in made:  # the producers (open transactions) live until the reads are done
        m.writers.clear()
    made.clear()
    gc.collect()


def _write(bootstrap: str, topic: str, seed: int, mixes: list[Mix], *, partitions: int,
           steps: int, end_p: float, abort_p: float, leave_open: int) -> tuple[Mix, Log]:
    with SyncClient(bootstrap) as c:
        c.create_topic(topic, partitions, {})
    mix = Mix(bootstrap, topic, partitions, random.Random(seed), writers=3)
    mixes.append(mix)
    for _ in range(steps):
        mix.step(end_p, abort_p)
    mix.finish(leave_open)
    return mix, mix.log()


def _rows(spark: Any, bootstrap: str, topic: str, level: str, **options: str
          ) -> list[tuple[int, int, bytes]]:
    r = (spark.read.format("chronolog").option("bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("kafka.isolation.level", level))
    for k, v in options.items():
        r = r.option(k, v)
    return sorted((row.partition, row.offset, bytes(row.value))
                  for row in r.load().select("partition", "offset", "value").collect())


@pytest.mark.parametrize(
    ("seed", "mix"),
    [
        (1, {"partitions": 2, "steps": 45, "end_p": 0.4, "abort_p": 0.5, "leave_open": 1}),
        (2, {"partitions": 3, "steps": 40, "end_p": 0.6, "abort_p": 0.8, "leave_open": 2}),
        (3, {"partitions": 1, "steps": 30, "end_p": 0.3, "abort_p": 0.3, "leave_open": 0}),
    ],
    ids=["half-aborted-one-open", "mostly-aborted-two-open", "one-partition-all-ended"],
)
def test_batch_reads_at_each_isolation_level_equal_the_oracle(
    spark: Any, broker: Any, mixes: list[Mix], seed: int, mix: dict[str, Any]
) -> None:
    topic = f"tx{seed}"
    _m, log = _write(broker.bootstrap, topic, seed, mixes, **mix)
    fates = {w.fate for w in log.records}
    assert {"plain", "commit", "abort"} <= fates, fates  # the mix exercises every kind
    assert ("open" in fates) == (mix["leave_open"] > 0)
    for level in LEVELS:
        assert _rows(spark, broker.bootstrap, topic, level) == log.window(level), level
    # Tasks that start inside transactions (aborted ones too) still drop exactly those.
    assert _rows(spark, broker.bootstrap, topic, "read_committed",
                 maxRecordsPerPartition="4") == log.window("read_committed")
    stamps = [ts for per in log.stamps.values() for _o, ts in per]
    lo, hi = min(stamps), max(stamps)

    @settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
    @given(level=st.sampled_from(LEVELS), t1=st.integers(lo - 3, hi + 3),
           width=st.integers(0, hi - lo + 6), per_task=st.sampled_from(["", "3", "9"]))
    def windows(level: str, t1: int, width: int, per_task: str) -> None:
        opts = {"startingTimestamp": str(t1), "endingTimestamp": str(t1 + width)}
        if per_task:
            opts["maxRecordsPerPartition"] = per_task
        got = _rows(spark, broker.bootstrap, topic, level, **opts)
        assert got == log.window(level, t1, t1 + width)

    windows()


def test_a_range_past_the_last_stable_offset_is_data_loss_under_read_committed(
    broker: Any, mixes: list[Mix]
) -> None:
    mix, log = _write(broker.bootstrap, "pin", 5, mixes, partitions=1, steps=12, end_p=0.5,
                      abort_p=0.5, leave_open=1)
    lso, end = log.lso(0), log.ends[0]
    assert lso < end
    with pytest.raises(DataLossError, match=f"last stable offset is {lso}"):
        list(read_range(broker.bootstrap, "pin", 0, 0, end, fetch_max_bytes=1 << 20,
                        isolation_level=1))
    got = [v for b in read_range(broker.bootstrap, "pin", 0, 0, end, fetch_max_bytes=1 << 20,
                                 fail_on_data_loss=False, isolation_level=1)
           for v in b.column("value").to_pylist()]
    assert got == [v for _p, _o, v in log.window("read_committed")]
    # read_uncommitted reads the open transaction's records up to the high watermark.
    assert sum(b.num_rows for b in read_range(broker.bootstrap, "pin", 0, 0, end,
                                              fetch_max_bytes=1 << 20)) == len(
        log.window("read_uncommitted"))


def test_a_read_committed_stream_waits_for_an_open_transaction_then_delivers_it_once(
    spark: Any, broker: Any, mixes: list[Mix], tmp_path: Path
) -> None:
    mix, log = _write(broker.bootstrap, "live", 6, mixes, partitions=2, steps=25, end_p=0.5,
                      abort_p=0.5, leave_open=1)
    assert mix.open
    seen: list[tuple[int, int, bytes]] = []

    def collect(df: Any, _batch_id: int) -> None:
        seen.extend((r.partition, r.offset, bytes(r.value))
                    for r in df.select("partition", "offset", "value").collect())

    def run_available_now() -> None:
        q = (spark.readStream.format("chronolog").option("bootstrap.servers", broker.bootstrap)
             .option("subscribe", "live").option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed")
             .option("maxOffsetsPerTrigger", "7").load()
             .writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)

    run_available_now()
    assert sorted(seen) == log.window("read_committed")
    # The open transaction commits, more transactions end (aborted ones among them): the
    # restarted query delivers exactly what became visible, each record once.
    (i, _values), = mix.open.items()
    mix.writers[i].commit_transaction(15)
    for v in mix.open.pop(i):
        mix.fate[v] = "commit"
    for _ in range(10):
        mix.step(0.5, 0.5)
    mix.finish(0)
    after = mix.log()
    run_available_now()
    assert len(seen) == len(set(seen))
    assert sorted(seen) == after.window("read_committed")
