"""Spark event-time reads (``.option("eventTime", "true")``) against a brute-force oracle.

The oracle is what the test produced: every record's partition, offset (from the produce
answer or delivery report), timestamp and transaction fate, filtered by start <= ts < end
(and, under read_committed, without aborted records), each partition in offset order.
The records arrive with random disorder, equal timestamps, whole late batches, into
topics with tiny segments; windows are random, empty, before and after all data. Also
checked: the planned tasks hold every matching record and no more bytes than the
partitions have, a task fetches no byte outside its plan, and a positional window over
out-of-order data logs the warning naming eventTime.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import ProducerRecord, SyncClient
from pipeline.fetcher import FetchStats, read_ranges
from pipeline.options import OptionError, parse_read_options
from pipeline.source import event_time_partitions
from tests.helpers.broker import free_port_number
from tests.helpers.disorder import SHAPES, disordered

NOW = int(time.time() * 1000)
T0 = NOW - 40 * 86_400_000
LEVELS = ("read_committed", "read_uncommitted")
_topics = itertools.count()

# (partition, offset, timestamp, value, fate): fate is plain, commit or abort.
Produced = tuple[int, int, int, bytes, str]


@pytest.fixture(scope="module")
def evt_broker(tmp_path_factory: pytest.TempPathFactory, broker_process_class: Any
               ) -> Iterator[Any]:
    """One broker for the module: hypothesis examples each make a topic of their own. The
    records are stamped weeks ago, so time retention is off (it would delete them mid-run)."""
    data = tmp_path_factory.mktemp("spark-evt") / "data"
    data.mkdir()
    b = broker_process_class(data, free_port_number(), {"log.retention.ms": "-1"}).start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def txn(evt_broker: Any) -> Iterator[Producer]:
    p = Producer({"bootstrap.servers": evt_broker.bootstrap, "transactional.id": "spark-evt",
                  "linger.ms": 5})
    p.init_transactions(15)
    yield p
    p.flush(15)


def _timestamps(shape: str, n: int, at: int, rng: random.Random) -> list[int]:
    return disordered(shape, n, T0 + at * 5, T0, rng)


def _produce(c: SyncClient, txn: Producer | None, topic: str, parts: int,
             batches: list[tuple[int, list[int], str]]) -> list[Produced]:
    """Each (partition, timestamps, fate) as one batch: plain through the bundled client,
    commit/abort as one transaction of a real transactional producer."""
    out: list[Produced] = []
    for n, (p, tss, fate) in enumerate(batches):
        p %= parts
        values = [b"%d-%d" % (n, i) for i in range(len(tss))]
        if fate == "plain":
            offs = c.produce(topic, [ProducerRecord(value=v, timestamp=t)
                                     for v, t in zip(values, tss, strict=True)], partition=p)
        else:
            got: dict[bytes, int] = {}

            def report(err: Any, msg: Any, got: dict[bytes, int] = got) -> None:
                assert err is None, err
                got[msg.value()] = msg.offset()

            assert txn is not None
            txn.begin_transaction()
            for v, t in zip(values, tss, strict=True):
                txn.produce(topic, value=v, partition=p, timestamp=t, on_delivery=report)
            txn.flush(15)
            (txn.commit_transaction if fate == "commit" else txn.abort_transaction)(15)
            offs = [got[v] for v in values]
        out += [(p, o, t, v, fate) for o, t, v in zip(offs, tss, values, strict=True)]
    return out


def _oracle(rows: list[Produced], t1: int, t2: int, level: str) -> list[tuple[int, int, int, bytes]]:
    return sorted((p, o, t, v) for p, o, t, v, fate in rows
                  if t1 <= t < t2 and (fate != "abort" or level == "read_uncommitted"))


def _options(bootstrap: str, topic: str, t1: int, t2: int, level: str, split: str,
             event_time: bool = True) -> dict[str, str]:
    opts = {"bootstrap.servers": bootstrap, "subscribe": topic, "startingTimestamp": str(t1),
            "endingTimestamp": str(t2), "kafka.isolation.level": level}
    if event_time:
        opts["eventTime"] = "true"
    if split:  # "maxRecordsPerPartition=7" or "minPartitions=5"
        key, value = split.split("=")
        opts[key] = value
    return opts


def _spark(spark: Any, opts: dict[str, str]) -> list[tuple[int, int, int, bytes]]:
    """The rows as Spark returns them (task order: no sort), timestamps in ms."""
    import pyarrow as pa

    r = spark.read.format("chronolog")
    for k, v in opts.items():
        r = r.option(k, v)
    table = r.load().select("partition", "offset", "timestamp", "value").toArrow()
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    return [(p, o, t // 1000, v) for p, o, t, v in zip(
        table.column("partition").to_pylist(), table.column("offset").to_pylist(), ts,
        table.column("value").to_pylist(), strict=True)]


def _log_bytes(broker: Any, topic: str) -> int:
    return sum(f.stat().st_size for f in Path(broker.data_dir).glob(f"{topic}-*/*.log"))


def _check_plan(broker: Any, topic: str, opts: dict[str, str],
                want: list[tuple[int, int, int, bytes]]) -> None:
    """Tasks hold every matching record, plan no more bytes than the log has, and (uncut)
    fetch no byte outside their plan while returning exactly the window's rows."""
    ro = parse_read_options({k.lower(): v for k, v in opts.items()}, streaming=False)
    with SyncClient(broker.bootstrap) as c:
        tasks = event_time_partitions(c, ro)
    for p, o, _, _ in want:
        assert any(t.partition == p and s <= o < e for t in tasks for s, e, _ in t.ranges), (p, o)
    planned = sum(t.bytes for t in tasks)
    assert planned <= _log_bytes(broker, topic)
    stats = FetchStats()
    direct = []
    for t in tasks:
        for b in read_ranges(broker.bootstrap, t.topic, t.partition, t.ranges, window=t.window,
                             fetch_max_bytes=ro.fetch_max_bytes, stats=stats,
                             isolation_level=ro.isolation_level):
            d = b.to_pydict()
            direct += [(t.partition, o, ts.timestamp() * 1000, v) for o, ts, v in zip(
                d["offset"], d["timestamp"], d["value"], strict=True)]
    assert [(p, o, int(t), v) for p, o, t, v in direct] == want
    if len(tasks) == len({t.partition for t in tasks}):  # no range cut between tasks
        assert stats.bytes_fetched <= planned


def _per_partition(rows: list[tuple[int, int, int, bytes]]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    return out


batch_shapes = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(SHAPES),
              st.integers(1, 25), st.integers(0, 400_000),
              st.sampled_from(["plain", "plain", "plain", "commit", "abort"])),
    min_size=1, max_size=18)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(shapes=batch_shapes, parts=st.integers(1, 3), seed=st.integers(0, 1000),
       data=st.data())
def test_event_time_reads_equal_the_oracle_and_tasks_read_only_planned_ranges(
    spark: Any, evt_broker: Any, txn: Producer, shapes: list[Any], parts: int, seed: int,
    data: st.DataObject,
) -> None:
    rng = random.Random(seed)
    topic = f"sevt-{next(_topics)}"
    with SyncClient(evt_broker.bootstrap) as c:
        c.create_topic(topic, parts, {"segment.bytes": "1500", "index.interval.bytes": "200"})
        rows = _produce(c, txn, topic, parts, [(p, _timestamps(shape, n, at, rng), fate)
                                                for p, shape, n, at, fate in shapes])
    tss = sorted(r[2] for r in rows)
    for _ in range(2):
        kind = data.draw(st.sampled_from(["random", "random", "before", "after", "empty",
                                          "all", "one_stamp"]))
        if kind == "before":
            t1, t2 = T0 - 10_000, T0 - 1
        elif kind == "after":
            t1, t2 = tss[-1] + 1, tss[-1] + 10_000
        elif kind == "empty":
            t1 = t2 = data.draw(st.sampled_from(tss))
        elif kind == "all":
            t1, t2 = tss[0], tss[-1] + 1
        elif kind == "one_stamp":
            t1 = data.draw(st.sampled_from(tss))
            t2 = t1 + 1
        else:
            a = data.draw(st.sampled_from(tss))
            t1, t2 = a - data.draw(st.integers(0, 50_000)), a + data.draw(st.integers(1, 200_000))
        level = data.draw(st.sampled_from(LEVELS))
        split = data.draw(st.sampled_from(["", "", "maxRecordsPerPartition=7",
                                           "minPartitions=5"]))
        opts = _options(evt_broker.bootstrap, topic, t1, t2, level, split)
        want = _oracle(rows, t1, t2, level)
        got = _spark(spark, opts)
        assert sorted(got) == want, (kind, t1, t2, level, split)
        assert _per_partition(got) == _per_partition(want)  # each partition in offset order
        _check_plan(evt_broker, topic, opts, want)


def test_a_stream_refuses_event_time(spark: Any, evt_broker: Any, tmp_path: Path) -> None:
    with SyncClient(evt_broker.bootstrap) as c:
        c.create_topic("sevt-stream", 1)
    q = (spark.readStream.format("chronolog").option("bootstrap.servers", evt_broker.bootstrap)
         .option("subscribe", "sevt-stream").option("startingTimestamp", str(T0))
         .option("eventTime", "true").load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    try:
        with pytest.raises(Exception, match="(?s)eventTime.*batch reads"):
            q.awaitTermination(120)
    finally:
        q.stop()
    with pytest.raises(OptionError, match="batch reads"):
        parse_read_options({"bootstrap.servers": "x", "subscribe": "t", "eventtime": "true",
                            "startingtimestamp": "1"}, streaming=True)


def test_log_append_time_topics_window_on_the_append_time(spark: Any, evt_broker: Any) -> None:
    """LogAppendTime: the broker's stamp is the record's timestamp, in the plan and the rows."""
    with SyncClient(evt_broker.bootstrap) as c:
        c.create_topic("sevt-lat", 1, {"message.timestamp.type": "LogAppendTime",
                                       "index.interval.bytes": "100"})
        for n in range(3):
            c.produce("sevt-lat", [ProducerRecord(value=b"%d-%d" % (n, i), timestamp=T0 + i)
                                   for i in range(5)], partition=0)
            time.sleep(0.02)
        stamps = [(r.offset, r.timestamp, r.value) for r in c.consume("sevt-lat", 0, 0, 15)]
    middle = sorted({t for _, t, _ in stamps})[1]
    want = [(0, o, t, v) for o, t, v in stamps if t == middle]
    assert [v for *_, v in want] == [b"1-%d" % i for i in range(5)]
    opts = _options(evt_broker.bootstrap, "sevt-lat", middle, middle + 1, "read_uncommitted", "")
    assert _spark(spark, opts) == want
    # The producer's CreateTime (T0 + i) is not what the window is about.
    opts = _options(evt_broker.bootstrap, "sevt-lat", T0, T0 + 5, "read_uncommitted", "")
    assert _spark(spark, opts) == []


def test_the_export_job_reads_an_event_time_window(spark: Any, evt_broker: Any, txn: Producer,
                                                    tmp_path: Path) -> None:
    from pipeline import jobs

    rng = random.Random(11)
    with SyncClient(evt_broker.bootstrap) as c:
        c.create_topic("sevt-export", 2, {"segment.bytes": "2000"})
        rows = _produce(c, txn, "sevt-export", 2, [
            (i % 2, _timestamps("shuffled", 12, 1000 + i * 50, rng), "plain") for i in range(10)])
    tss = sorted(r[2] for r in rows)
    t1, t2 = tss[len(tss) // 3], tss[2 * len(tss) // 3]
    want = _oracle(rows, t1, t2, "read_uncommitted")
    result = jobs.export(spark, evt_broker.bootstrap, "sevt-export", t1, t2,
                         str(tmp_path / "out"), show_progress=False, event_time=True)
    assert result.rows == len(want)
    back = spark.read.parquet(str(tmp_path / "out")).select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in back) == [(p, o) for p, o, _, _ in want]
    # The same window from the CLI, as docs/cli.md shows it: export and rollup.
    from client.cli import main

    for job, extra in (("export", []), ("rollup", ["--every", "1d"])):
        out = tmp_path / f"cli-{job}"
        assert main(["pipeline", job, "--topic", "sevt-export", "--from", str(t1), "--to", str(t2),
                     *extra, "--out", str(out), "--bootstrap-server", evt_broker.bootstrap,
                     "--quiet", "--event-time"]) == 0
        table = spark.read.parquet(str(out))
        if job == "export":
            got = sorted((r.partition, r.offset) for r in table.select("partition", "offset").collect())
            assert got == [(p, o) for p, o, _, _ in want]
        else:
            assert sum(r.records for r in table.collect()) == len(want)


def test_read_committed_stops_at_an_open_transaction_and_read_uncommitted_does_not(
    spark: Any, evt_broker: Any
) -> None:
    """Under read_committed the plan ends at the last stable offset, so no task is planned
    into the open transaction (its fetch would find no committed end there)."""
    with SyncClient(evt_broker.bootstrap) as c:
        c.create_topic("sevt-open", 1, {"segment.bytes": "1500", "index.interval.bytes": "200"})
        rows = _produce(c, None, "sevt-open", 1, [(0, [T0 + 30 - i for i in range(10)], "plain")])
    p = Producer({"bootstrap.servers": evt_broker.bootstrap, "transactional.id": "sevt-open",
                  "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    got: dict[bytes, int] = {}
    for i in range(5):
        p.produce("sevt-open", value=b"open-%d" % i, partition=0, timestamp=T0 + 10 + i,
                  on_delivery=lambda err, msg: got.__setitem__(msg.value(), msg.offset()))
    p.flush(15)
    with SyncClient(evt_broker.bootstrap) as c:
        rows += _produce(c, None, "sevt-open", 1, [(0, [T0 + 5 + i for i in range(10)], "plain")])
    open_rows = [(0, got[b"open-%d" % i], T0 + 10 + i, b"open-%d" % i, "open") for i in range(5)]
    lso = min(o for _, o, *_ in open_rows)
    try:
        for level in LEVELS:
            opts = _options(evt_broker.bootstrap, "sevt-open", T0 + 8, T0 + 25, level, "")
            visible = rows + open_rows if level == "read_uncommitted" else [
                r for r in rows if r[1] < lso]
            want = sorted((q, o, t, v) for q, o, t, v, _ in visible if T0 + 8 <= t < T0 + 25)
            assert _spark(spark, opts) == want, level
            _check_plan(evt_broker, "sevt-open", opts, want)
    finally:
        p.abort_transaction(15)


def test_after_delete_records_the_window_starts_at_the_log_start(spark: Any, evt_broker: Any,
                                                                  txn: Producer) -> None:
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import AdminClient

    rng = random.Random(2)
    with SyncClient(evt_broker.bootstrap) as c:
        c.create_topic("sevt-del", 2, {"segment.bytes": "1000", "index.interval.bytes": "150"})
        rows = _produce(c, txn, "sevt-del", 2, [
            (i % 2, [T0 + rng.randint(0, 90_000) for _ in range(7)], "plain") for i in range(30)])
    start = {0: 17, 1: 40}  # inside batches, not at their starts
    admin = AdminClient({"bootstrap.servers": evt_broker.bootstrap})
    for f in admin.delete_records([KafkaTopicPartition("sevt-del", p, o)
                                   for p, o in start.items()], request_timeout=15).values():
        f.result()
    kept = [r for r in rows if r[1] >= start[r[0]]]
    for t1, t2 in [(T0, T0 + 90_001), (T0 + 20_000, T0 + 30_000), (T0 + 89_000, T0 + 95_000)]:
        opts = _options(evt_broker.bootstrap, "sevt-del", t1, t2, "read_uncommitted", "")
        want = _oracle(kept, t1, t2, "read_uncommitted")
        assert _spark(spark, opts) == want
        _check_plan(evt_broker, "sevt-del", opts, want)


def test_a_window_with_one_bound_is_open_on_the_other_side(spark: Any, evt_broker: Any) -> None:
    rng = random.Random(4)
    with SyncClient(evt_broker.bootstrap) as c:
        c.create_topic("sevt-open-ended", 2, {"segment.bytes": "1200"})
        rows = _produce(c, None, "sevt-open-ended", 2, [
            (i % 2, _timestamps("shuffled", 9, 2000 + i * 40, rng), "plain") for i in range(12)])
    middle = sorted(r[2] for r in rows)[len(rows) // 2]
    for side, want in (("startingTimestamp", _oracle(rows, middle, 2**63 - 1, "read_committed")),
                       ("endingTimestamp", _oracle(rows, 0, middle, "read_committed"))):
        r = (spark.read.format("chronolog").option("bootstrap.servers", evt_broker.bootstrap)
             .option("subscribe", "sevt-open-ended").option("eventTime", "true")
             .option(side, str(middle)))
        table = r.load().select("partition", "offset").toArrow()
        got = list(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                       strict=True))
        assert got == [(p, o) for p, o, _, _ in want], side
        assert 0 < len(want) < len(rows)
