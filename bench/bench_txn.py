"""Transactions: transactional produce vs plain produce, read_committed vs read_uncommitted.

Produce: one confluent-kafka producer (librdkafka) writes N records of 100 bytes to a
1-partition topic, first with ``enable.idempotence`` (the non-transactional baseline,
same acks=all and in-flight limit as a transactional producer), then with a
``transactional.id`` and one transaction per 100 records (begin, 100 x produce,
commit: AddPartitionsToTxn + EndTxn round trips and one COMMIT marker per
transaction). Same broker, same run; the ratio is what counts.
Target (issue 11): transactional >= 50 % of the non-transactional rate.

Consume: one confluent-kafka consumer reads the transactional topic (markers every 101
offsets, every 10th transaction aborted so the aborted list is non-empty) from offset
0 to the end, under read_uncommitted and then read_committed.
Target: read_committed >= 90 % of read_uncommitted.

Where a transaction's time goes, measured in the same run: the wall time per
transaction, the part of it spent inside ``commit_transaction()``, and the broker's own
handling time per transaction (AddPartitionsToTxn + Produce + EndTxn, summed from its
``chronolog_request_seconds`` histogram on the metrics endpoint). What is left is the
client's: librdkafka registers a transaction's first partition from a timer started at
the first ``produce()`` with a 1 ms delay (``rd_kafka_txn_add_partition`` →
``rd_kafka_txn_schedule_register_partitions(rk, 1)``, src/rdkafka_txnmgr.h) and hands
each of the three requests between its application, main and broker threads. A row
with 1,000 records per transaction shows how the fixed cost amortises.

``CHRONOLOG_BENCH_TXN_RECORDS`` sets N (default 200,000; the issue's 1M takes minutes
on a shared 2-core machine).
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import free_port, start_broker, stop_broker
from bench.report import Report

N = int(os.environ.get("CHRONOLOG_BENCH_TXN_RECORDS", "200000"))
PER_TXN = 100
VALUE = b"x" * 100


def _produce_plain(bs: str, topic: str) -> float:
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    t0 = time.perf_counter()
    for i in range(N):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    return N / (time.perf_counter() - t0)


_TXN_APIS = ("AddPartitionsToTxn", "Produce", "EndTxn")


def _broker_seconds(metrics_url: str) -> float:
    """Seconds the broker spent handling the transactional APIs so far (its own histogram)."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    total = 0.0
    for m in re.finditer(r'^chronolog_request_seconds_sum\{api="(\w+)"\} (\S+)$', text, re.M):
        if m.group(1) in _TXN_APIS:
            total += float(m.group(2))
    return total


def _produce_txn(bs: str, topic: str, per_txn: int, txn_id: str
                 ) -> tuple[float, float, float]:
    """(records/s, seconds per transaction, seconds per commit_transaction() call)."""
    p = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(30)
    txns = N // per_txn
    in_commit = 0.0
    commits = 0
    t0 = time.perf_counter()
    for t in range(txns):
        p.begin_transaction()
        for _ in range(per_txn):  # far below queue.buffering.max.messages: never full
            p.produce(topic, VALUE)
        if t % 10 == 9:
            p.flush(30)
            p.abort_transaction(30)
        else:
            c0 = time.perf_counter()
            p.commit_transaction(30)
            in_commit += time.perf_counter() - c0
            commits += 1
    took = time.perf_counter() - t0
    return N / took, took / txns, in_commit / max(commits, 1)


def _consume(bs: str, topic: str, isolation: str) -> tuple[float, int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"bench-{isolation}",
                  "isolation.level": isolation, "enable.partition.eof": True,
                  "enable.auto.commit": False, "fetch.max.bytes": 8 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    n = 0
    t0 = time.perf_counter()
    done = False
    while not done:
        msgs = c.consume(10_000, 0.2)
        for m in msgs:
            if m.error():
                done = m.error().code() == -191  # _PARTITION_EOF
                continue
            n += 1
    took = time.perf_counter() - t0
    c.close()
    return n / took, n


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    metrics_url = f"http://127.0.0.1:{free_port()}/metrics"
    proc, port = start_broker(root, root / "data",
                              {"metrics.listener": metrics_url.split("/")[2]})
    bs = f"127.0.0.1:{port}"
    try:
        admin = AdminClient({"bootstrap.servers": bs})
        topics = [NewTopic("plain", 1, 1), NewTopic("txn", 1, 1), NewTopic("txn1000", 1, 1)]
        for f in admin.create_topics(topics).values():
            f.result(10)
        plain = _produce_plain(bs, "plain")
        before = _broker_seconds(metrics_url)
        txn, per_txn_s, commit_s = _produce_txn(bs, "txn", PER_TXN, "bench-txn")
        broker_s = (_broker_seconds(metrics_url) - before) / (N // PER_TXN)
        big, _, _ = _produce_txn(bs, "txn1000", 10 * PER_TXN, "bench-txn-1000")
        report.add("txn", f"idempotent produce, {N} x 100 B", plain, "rec/s")
        report.add("txn", f"transactional produce, {PER_TXN} rec/txn", txn, "rec/s")
        report.add("txn", "transactional / idempotent", 100 * txn / plain, "%", ">= 50")
        report.add("txn", "wall time per transaction", per_txn_s * 1e3, "ms",
                   note=f"idempotent: {PER_TXN / plain * 1e3:.3f} ms per {PER_TXN} records")
        report.add("txn", "  of which in commit_transaction()", commit_s * 1e3, "ms")
        report.add("txn", "  of which broker handling (AddPartitions+Produce+EndTxn)",
                   broker_s * 1e3, "ms", note="the rest is the client's (1 ms timer, hand-offs)")
        report.add("txn", f"transactional produce, {10 * PER_TXN} rec/txn", big, "rec/s",
                   note=f"{100 * big / plain:.0f} % of idempotent")
        unc, n_unc = _consume(bs, "txn", "read_uncommitted")
        com, n_com = _consume(bs, "txn", "read_committed")
        report.add("txn", "consume read_uncommitted", unc, "rec/s", note=f"{n_unc} records")
        report.add("txn", "consume read_committed", com, "rec/s",
                   note=f"{n_com} records (aborted skipped)")
        # Compare work per record delivered... and per offset read: read_committed reads the
        # same bytes but delivers 10 % fewer records, so compare offsets covered per second.
        report.add("txn", "read_committed / read_uncommitted (offsets/s)",
                   100 * (com * n_unc / max(n_com, 1)) / unc, "%", ">= 90")
    finally:
        stop_broker(proc)
