"""Spark's own Kafka connector (spark-sql-kafka-0-10, ``format("kafka")``) against Chronolog.

The connector is the one a PySpark user's existing Kafka job loads: fetched from Maven
Central (tools/kafka-ref/spark-kafka/pom.xml) and put on the one test session's
``spark.jars`` (tests/conftest.py). Its driver plans with Kafka's AdminClient
(ListOffsets by timestamp at the read's isolation level), its executors fetch with
KafkaConsumer ``assign``/``seek``/``poll``, and its sink writes with an idempotent
KafkaProducer: all kafka-clients 3.9, none of it ours.

The log is written by real clients (confluent-kafka): plain batches with out-of-order
CreateTimes, null keys and values and headers over three partitions, a committed and an
aborted transaction between them. The oracle is what was produced (each record's
partition and offset from its delivery report, and its transaction's fate) plus every
record's (offset, timestamp) in the log, transaction markers included, read back raw
with the codec. Positional meaning, Kafka's: a time resolves per partition to the first
offset whose timestamp is >= it (markers count, as in Kafka's time index), or, with no
such offset, to the partition's end (Spark's fallback; with no open transaction the last
stable offset is the end). ``read_committed`` rows leave out the aborted transaction;
markers are never rows.

Each read is checked against the oracle for both ``format("kafka")`` and Chronolog's own
``format("chronolog")``, given the same options. ``make test`` runs a few drawn windows;
``make test-ecosystem`` (marker ``ecosystem_full``) draws many more, and writes with
every compression codec.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import given, settings
from hypothesis import strategies as st

from client import SyncClient, TopicPartition
from storage.records import decode_batch, iter_batches
from tests.helpers.rows import Row, dataframe_rows
from tests.helpers.spark_kafka import connector_jars, connector_version

TOPIC = "spark-kafka"
PARTITIONS = 3
STEP = 60  # ms of event time per record produced: the log's clock, which records jitter around
SPREAD = 300 * STEP  # the clock's span over the 300 records (jitter and lateness go beyond)
LEVELS = ("read_committed", "read_uncommitted")

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Produced:
    row: Row
    fate: str  # plain, commit or abort


@dataclass
class Log:
    t0: int
    """Where the log's event-time clock started: 150 records before the wall clock, so the
    transaction markers (stamped by the broker when written) fall among the data's times."""
    records: list[Produced]
    stamps: dict[int, list[tuple[int, int]]]
    """Every offset of every partition with its timestamp, markers included."""
    ends: dict[int, int]

    def at_time(self, p: int, t: int | None, default: int) -> int:
        """Kafka's ListOffsets for time t (markers count); no match: the end (Spark's
        fallback to latest). No transaction is left open, so the LSO is the end."""
        if t is None:
            return default
        return min((o for o, ts in self.stamps[p] if ts >= t), default=self.ends[p])

    def window(self, level: str, t1: dict[int, int | None], t2: dict[int, int | None]
               ) -> list[Row]:
        visible = {"plain", "commit"} if level == "read_committed" else {
            "plain", "commit", "abort"}
        out = []
        for p in self.ends:
            lo = self.at_time(p, t1[p], 0)
            hi = self.at_time(p, t2[p], self.ends[p])
            out += [r.row for r in self.records
                    if r.row.partition == p and lo <= r.row.offset < hi and r.fate in visible]
        return sorted(out, key=lambda r: (r.partition, r.offset))


@pytest.fixture(scope="module")
def connector(spark: Any) -> str:
    """The connector's version once it is on the shared session's spark.jars; fails with
    the reason (Maven missing, a refused download) otherwise."""
    jars, why_not = connector_jars()
    if why_not is not None:
        pytest.fail(f"Spark's Kafka connector could not be fetched: {why_not}", pytrace=False)
    loaded = spark.sparkContext.getConf().get("spark.jars", "")
    missing = [j for j in jars if j not in loaded.split(",")]
    assert not missing, f"the Spark session started without {missing} on spark.jars"
    return connector_version()


class Writer:
    """Plain and transactional confluent-kafka producers writing the test log."""

    def __init__(self, bootstrap: str, rng: random.Random) -> None:
        self.rng = rng
        self.t0 = int(time.time() * 1000) - 150 * STEP
        self.produced: list[Produced] = []
        self.seq = 0
        self.plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "spark-kafka-tx",
                             "linger.ms": 5})
        self.txn.init_transactions(15)

    def _records(self, producer: Producer, fate: str, n: int) -> list[Produced]:
        sent: list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]] = []
        offsets: dict[int, tuple[int, int]] = {}

        def delivered(err: Any, msg: Any, i: int) -> None:
            assert err is None, err
            offsets[i] = (msg.partition(), msg.offset())

        for _ in range(n):
            self.seq += 1
            i = self.seq
            p = self.rng.randrange(PARTITIONS)
            # Out of order as real streams are: jitter of +-1.5 s around the clock, and one
            # record in ten late by 2-8 s, so a time window is a stretch of each partition.
            ts = self.t0 + i * STEP + self.rng.randint(-1500, 1500)
            if self.rng.random() < 0.1:
                ts -= self.rng.randint(2000, 8000)
            key = None if self.rng.random() < 0.2 else b"k%d" % self.rng.randrange(50)
            value = None if self.rng.random() < 0.05 else b"%s-%d" % (fate.encode(), i) * (
                1 + self.rng.randrange(4))
            headers: tuple[Header, ...] = tuple(
                (f"h{j}", None if self.rng.random() < 0.3 else self.rng.randbytes(3))
                for j in range(self.rng.randint(1, 2))) if self.rng.random() < 0.3 else ()
            producer.produce(TOPIC, value, key, partition=p, timestamp=ts,
                             headers=list(headers) or None,
                             on_delivery=lambda err, msg, i=i: delivered(err, msg, i))
            sent.append((i, ts, key, value, headers))
            if self.rng.random() < 0.15:
                producer.flush(15)  # batch boundaries at random
        producer.flush(15)
        out = []
        for i, ts, key, value, headers in sent:
            p, o = offsets[i]
            out.append(Produced(Row(p, o, ts, 0, key, value, headers), fate))
        return out

    def plain_batch(self, n: int) -> None:
        self.produced += self._records(self.plain, "plain", n)

    def transaction(self, n: int, commit: bool) -> None:
        self.txn.begin_transaction()
        records = self._records(self.txn, "commit" if commit else "abort", n)
        if commit:
            self.txn.commit_transaction(15)
        else:
            self.txn.abort_transaction(15)
        self.produced += records


def _read_log(bootstrap: str, t0: int, records: list[Produced]) -> Log:
    stamps: dict[int, list[tuple[int, int]]] = {}
    ends: dict[int, int] = {}
    with SyncClient(bootstrap) as c:
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            ends[p] = c.list_offsets({tp: -1})[tp][0]
            stamps[p] = []
            offset = 0
            while offset < ends[p]:
                buf = c.fetch_raw(TOPIC, p, offset, 1 << 20).records_bytes
                for pos, h in iter_batches(buf):
                    stamps[p] += [(r.offset, r.timestamp) for r in decode_batch(buf, pos)
                                  if r.offset >= offset]
                    offset = max(offset, h.last_offset + 1)
    return Log(t0, records, stamps, ends)


@pytest.fixture(scope="module")
def log(chronolog: Any) -> Log:
    with SyncClient(chronolog.bootstrap) as c:
        c.create_topic(TOPIC, PARTITIONS, {})
    w = Writer(chronolog.bootstrap, random.Random(27))
    w.plain_batch(120)
    w.transaction(30, commit=True)
    w.plain_batch(60)
    w.transaction(30, commit=False)
    w.plain_batch(60)
    result = _read_log(chronolog.bootstrap, w.t0, w.produced)
    # The log is what the test meant: every partition has data, the aborted transaction
    # left rows that read_committed must drop, and markers sit between data.
    assert all(result.ends[p] > 0 for p in range(PARTITIONS))
    assert sum(r.fate == "abort" for r in result.records) == 30
    assert sum(len(s) for s in result.stamps.values()) > len(result.records)
    return result


def _read(spark: Any, fmt: str, bootstrap: str, options: dict[str, str]) -> list[Row]:
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    r = r.option("subscribe", TOPIC).option("includeHeaders", "true")
    for k, v in options.items():
        r = r.option(k, v)
    return dataframe_rows(r.load())


def _window_options(level: str, t1: dict[int, int | None], t2: dict[int, int | None],
                    per_partition: bool) -> dict[str, str]:
    opts = {"kafka.isolation.level": level, "startingOffsetsByTimestampStrategy": "latest"}
    for side, times in (("starting", t1), ("ending", t2)):
        if per_partition and all(t is not None for t in times.values()):
            opts[f"{side}OffsetsByTimestamp"] = json.dumps(
                {TOPIC: {str(p): t for p, t in times.items()}})
        elif not per_partition and times[0] is not None:
            opts[f"{side}Timestamp"] = str(times[0])
    return opts


times = st.integers(-9600, SPREAD + 1600)
"""Event times relative to the log's t0: from before the latest late record to past the last."""


#: (isolation level, per partition?, start and end per partition, relative to the log's t0).
DrawnWindow = tuple[str, bool, dict[int, int | None], dict[int, int | None]]


@st.composite
def windows(draw: Any) -> DrawnWindow:
    """A level and a window relative to t0, one time for all partitions or one per partition
    (Spark wants every partition listed, so per-partition bounds are all given or all absent)."""
    level = draw(st.sampled_from(LEVELS))
    per_partition = draw(st.booleans())
    n = PARTITIONS if per_partition else 1
    t1s = draw(st.none() | st.lists(times, min_size=n, max_size=n))
    t2s = draw(st.none() | st.lists(times, min_size=n, max_size=n))
    if t1s and t2s:  # start <= end per partition, or Spark refuses the range
        pairs = list(zip(t1s, t2s, strict=True))
        t1s, t2s = [min(pair) for pair in pairs], [max(pair) for pair in pairs]
    t1 = {p: (t1s[p % n] if t1s else None) for p in range(PARTITIONS)}
    t2 = {p: (t2s[p % n] if t2s else None) for p in range(PARTITIONS)}
    return level, per_partition, t1, t2


def _shift(times: dict[int, int | None], t0: int) -> dict[int, int | None]:
    return {p: None if t is None else t0 + t for p, t in times.items()}


def _check_window(spark: Any, bootstrap: str, log: Log, level: str, per_partition: bool,
                  t1: dict[int, int | None], t2: dict[int, int | None]) -> None:
    expected = log.window(level, t1, t2)
    opts = _window_options(level, t1, t2, per_partition)
    kafka = _read(spark, "kafka", bootstrap, opts)
    assert kafka == expected, f"format('kafka') {opts}"
    assert _read(spark, "chronolog", bootstrap, opts) == expected, f"format('chronolog') {opts}"


def _drawn_windows_test(examples: int) -> Any:
    """A test of ``examples`` windows drawn by ``windows()`` (times relative to the log's
    t0), each checked by _check_window: a short run for ``make test``, a long one below."""

    @settings(max_examples=examples)
    @given(w=windows())
    def test(spark: Any, connector: str, chronolog: Any, log: Log, w: DrawnWindow) -> None:
        level, per_partition, t1, t2 = w
        _check_window(spark, chronolog.bootstrap, log, level, per_partition,
                      _shift(t1, log.t0), _shift(t2, log.t0))

    return test


test_batch_time_windows_of_the_kafka_connector_match_chronologs_source = _drawn_windows_test(2)
test_many_drawn_batch_windows_match = pytest.mark.ecosystem_full(_drawn_windows_test(40))


def test_a_window_inside_the_data_at_both_levels_and_both_forms(
    spark: Any, connector: str, chronolog: Any, log: Log
) -> None:
    """A window every run checks: from a quarter into the data to near its end, so it holds
    the aborted transaction, at both levels, one time for all partitions and one each."""
    data = sorted(r.row.timestamp for r in log.records)
    lo, hi = data[len(data) // 4], data[-1] - 1000
    t1 = {p: lo + 7 * p for p in range(PARTITIONS)}
    t2 = {p: hi - 7 * p for p in range(PARTITIONS)}
    committed, everything = (log.window(level, t1, t2) for level in LEVELS)
    assert committed and len(committed) < len(everything) < len(log.records)
    for level in LEVELS:
        _check_window(spark, chronolog.bootstrap, log, level, True, t1, t2)
    _check_window(spark, chronolog.bootstrap, log, "read_committed", False,
                  dict.fromkeys(t1, lo), dict.fromkeys(t2, hi))


def test_a_start_time_past_every_record_fails_the_connector_by_default(
    spark: Any, connector: str, chronolog: Any, log: Log
) -> None:
    """Spark's default startingOffsetsByTimestampStrategy is ``error``: Chronolog's ListOffsets
    answers -1 for a time past every record, and the connector says so, naming the time.
    (Chronolog's own source defaults to ``latest``: docs/compatibility.md.)"""
    late = max(ts for s in log.stamps.values() for _o, ts in s) + 1
    with pytest.raises(Exception, match=f"No offset matched.*{late}"):
        _read(spark, "kafka", chronolog.bootstrap, {"startingTimestamp": str(late)})
    assert _read(spark, "chronolog", chronolog.bootstrap, {"startingTimestamp": str(late)}) == []


def _stream(spark: Any, fmt: str, bootstrap: str, options: dict[str, str], tmp: Path) -> list[Row]:
    name = f"spark_kafka_{fmt}_{time.monotonic_ns()}"
    r = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", TOPIC).option("includeHeaders", "true"))
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp / name)).trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(180), f"{fmt} stream did not finish"
        assert q.exception() is None, q.exception()
        return dataframe_rows(spark.table(name))
    finally:
        q.stop()
        spark.catalog.dropTempView(name)


def _check_stream(spark: Any, bootstrap: str, log: Log, level: str, per_partition: bool,
                  t1: dict[int, int | None], tmp: Path) -> None:
    expected = log.window(level, t1, dict.fromkeys(t1))
    opts = _window_options(level, t1, dict.fromkeys(t1), per_partition)
    if "startingTimestamp" not in opts and "startingOffsetsByTimestamp" not in opts:
        opts["startingOffsets"] = "earliest"
    assert _stream(spark, "kafka", bootstrap, opts, tmp) == expected, f"format('kafka') {opts}"
    assert _stream(spark, "chronolog", bootstrap, opts, tmp) == expected, \
        f"format('chronolog') {opts}"


def test_a_stream_from_a_time_delivers_the_window_to_the_end(
    spark: Any, connector: str, chronolog: Any, log: Log, tmp_path: Path
) -> None:
    """readStream from startingTimestamp, trigger availableNow, into the memory sink."""
    data = sorted(r.row.timestamp for r in log.records)
    t1 = dict.fromkeys(range(PARTITIONS), data[len(data) // 3])
    expected = log.window("read_committed", t1, dict.fromkeys(t1))
    assert 0 < len(expected) < len(log.window("read_uncommitted", t1, dict.fromkeys(t1)))
    _check_stream(spark, chronolog.bootstrap, log, "read_committed", False, t1, tmp_path)


@pytest.mark.ecosystem_full
@settings(max_examples=12)
@given(w=windows())
def test_streams_from_drawn_times_match_the_oracle(
    spark: Any, connector: str, chronolog: Any, log: Log, tmp_path_factory: Any,
    w: DrawnWindow
) -> None:
    level, per_partition, t1, _t2 = w
    _check_stream(spark, chronolog.bootstrap, log, level, per_partition, _shift(t1, log.t0),
                  tmp_path_factory.mktemp("stream"))


def _written(bootstrap: str, topic: str) -> dict[int, list[tuple[int, int, int, Any, Any, Any]]]:
    """Every record of ``topic`` read back with Chronolog's client and codec, per partition."""
    out: dict[int, list[tuple[int, int, int, Any, Any, Any]]] = {}
    with SyncClient(bootstrap) as c:
        for p in c.list_topics()[topic]:
            tp = TopicPartition(topic, p)
            end = c.list_offsets({tp: -1})[tp][0]
            out[p] = []
            offset = 0
            while offset < end:
                buf = c.fetch_raw(topic, p, offset, 1 << 20).records_bytes
                for pos, h in iter_batches(buf):
                    assert not h.is_control
                    out[p] += [(r.offset, r.timestamp, h.timestamp_type, r.key, r.value,
                                tuple(r.headers)) for r in decode_batch(buf, pos)
                               if r.offset >= offset]
                    offset = max(offset, h.last_offset + 1)
    return out


def _check_write(spark: Any, bootstrap: str, topic: str, rows: list[tuple[Any, ...]],
                 codec: str) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    with SyncClient(bootstrap) as c:
        c.create_topic(topic, PARTITIONS, {})
    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())])))])
    df = spark.createDataFrame(
        [(k, v, p, [{"key": hk, "value": hv} for hk, hv in h]) for k, v, p, h in rows], schema
    ).repartition(2)
    before = int(time.time() * 1000)
    (df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("kafka.compression.type", codec).save())
    after = int(time.time() * 1000)
    landed = _written(bootstrap, topic)
    for p in range(PARTITIONS):
        got = landed[p]
        # Each record once (the idempotent producer), at consecutive offsets, stamped by the
        # producer while the job ran (the sink sets no timestamps: CreateTime, now).
        assert [g[0] for g in got] == list(range(len(got)))
        assert all(before <= g[1] <= after and g[2] == 0 for g in got), (before, after, got[:3])
        want = sorted(((k, v, tuple(h)) for k, v, q, h in rows if q == p), key=repr)
        assert sorted(((g[3], g[4], g[5]) for g in got), key=repr) == want, f"partition {p}"


def _rows_to_write(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return [(None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 12)),
             None if rng.random() < 0.05 else rng.randbytes(rng.randint(0, 300)),
             rng.randrange(PARTITIONS),
             [(f"h{j}", None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 6)))
              for j in range(rng.randint(0, 2))])
            for _ in range(n)]


def test_a_kafka_write_lands_exactly_the_rows(
    spark: Any, connector: str, chronolog: Any
) -> None:
    _check_write(spark, chronolog.bootstrap, "spark-kafka-write",
                 _rows_to_write(random.Random(6), 400), "none")


@pytest.mark.ecosystem_full
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kafka_writes_with_each_codec_land_exactly_the_rows(
    spark: Any, connector: str, chronolog: Any, codec: str
) -> None:
    _check_write(spark, chronolog.bootstrap, f"spark-kafka-write-{codec}",
                 _rows_to_write(random.Random(codec), 3000), codec)


@pytest.fixture(scope="module", autouse=True)
def _no_stream_left(spark: Any) -> Iterator[None]:
    yield
    for q in spark.streams.active:
        q.stop()

