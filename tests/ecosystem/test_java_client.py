"""Kafka's Java client (kafka-clients 4.x) against Chronolog, as a Java user runs it.

tools/kafka-ref/java/ClientCheck.java (run with ``java -cp CP ClientCheck.java``, no
build) creates topics, produces with explicit out-of-order timestamps (default,
idempotent producer), asks ``offsetsForTimes``, seeks and polls, consumes in a group
with ``group.protocol=classic`` and ``consumer``, runs three transactions (one
aborted) and reads them ``read_committed`` and ``read_uncommitted``, and asks the
AdminClient for configs, cluster, ListOffsets by time and special values, and
DeleteRecords. Every line it prints is checked against an oracle computed from its
own "produced" lines (a fourth transaction is left open while read_committed and
read_uncommitted readers and the AdminClient look at it); under ``make test-ecosystem``
the same program also runs
against the real Apache Kafka, and the two outputs must be identical.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess, free_port_number
from tests.ecosystem.kafka_peer import KafkaNode, java_program

BASE = int(time.time() * 1000) - 3_600_000  # one base for both brokers: outputs compare 1:1
TXN_SIZE, TXNS = 3, ("commit", "abort", "commit")  # as in ClientCheck.java

Lines = list[dict[str, Any]]


def _run(bootstrap: str) -> Lines:
    lines = java_program("ClientCheck", bootstrap, f"jc-{time.time_ns() % 10**9}", str(BASE))
    assert lines and lines[-1] == {"event": "done"}, lines[-3:]
    return lines


@pytest.fixture(scope="module")
def chronolog_run(module_tmp: Path, kafka_classpath: str) -> Iterator[Lines]:
    data = module_tmp / "chronolog"
    data.mkdir()
    b = BrokerProcess(data, free_port_number()).start()
    try:
        yield _run(b.bootstrap)
    finally:
        assert b.stop() == 0, b.log()


@pytest.fixture(scope="module")
def kafka_run(kafka_node: KafkaNode) -> Lines:
    return _run(kafka_node.bootstrap)


def _events(lines: Lines, name: str) -> Lines:
    return [line for line in lines if line["event"] == name]


def _produced(lines: Lines) -> dict[int, Lines]:
    out: dict[int, Lines] = {}
    for r in _events(lines, "produced"):
        out.setdefault(r["partition"], []).append(
            {k: r[k] for k in ("partition", "offset", "timestamp", "key", "value")})
    return {p: sorted(rs, key=lambda r: r["offset"]) for p, rs in out.items()}


def _first_at_or_after(records: Lines, ts: int) -> dict[str, Any] | None:
    return next((r for r in records if r["timestamp"] >= ts), None)


def check_against_oracle(lines: Lines, host: str = "127.0.0.1") -> None:
    """``host``: the one the listener the program used advertises."""
    [cluster] = _events(lines, "cluster")
    assert cluster == {"event": "cluster", "nodes": 1, "clusterIdSet": True,
                       "controllerIsTheNode": True, "host": host}
    [config] = _events(lines, "topicConfig")
    assert config == {"event": "topicConfig", "retention.ms": "86400000",
                      "retention.ms.source": "DYNAMIC_TOPIC_CONFIG",
                      "message.timestamp.type": "CreateTime", "cleanup.policy": "delete"}

    produced = _produced(lines)
    assert sorted(produced) == [0, 1]
    for records in produced.values():
        assert [r["offset"] for r in records] == list(range(len(records)))
        assert all(BASE <= r["timestamp"] < BASE + 1000 for r in records)

    for q in _events(lines, "offsetsForTimes"):
        hit = _first_at_or_after(produced[q["partition"]], q["probe"])
        assert (q["offset"], q["timestamp"]) == ((hit["offset"], hit["timestamp"]) if hit
                                                 else (None, None)), q
    [seek] = _events(lines, "seekPoll")
    want = []
    for p in sorted(produced):
        hit = _first_at_or_after(produced[p], seek["probe"])
        want += [r for r in produced[p] if hit and r["offset"] >= hit["offset"]]
    assert seek["records"] == want
    [ends] = _events(lines, "ends")
    assert ends["beginning"] == [0, 0]
    assert ends["end"] == [len(produced[0]), len(produced[1])]

    everything = [r for p in sorted(produced) for r in produced[p]]
    groups = _events(lines, "group")
    assert [g["protocol"] for g in groups] == ["classic", "consumer"]
    for g in groups:
        got = sorted(g["records"], key=lambda r: (r["partition"], r["offset"]))
        assert got == everything, g["protocol"]
        assert g["committed"] == {str(p): len(rs) for p, rs in produced.items()}

    # Each transaction's records, then its marker (which takes an offset of its own).
    txn = {"read_uncommitted": [], "read_committed": []}  # type: dict[str, list[tuple[int, str]]]
    n = 0
    for i, outcome in enumerate(TXNS):
        for j in range(TXN_SIZE):
            rec = (i * (TXN_SIZE + 1) + j, f"{outcome}{n}")
            txn["read_uncommitted"].append(rec)
            if outcome == "commit":
                txn["read_committed"].append(rec)
            n += 1
    end = len(TXNS) * (TXN_SIZE + 1)
    for read in _events(lines, "txnRead"):
        assert [(r["offset"], r["value"]) for r in read["records"]] == txn[read["isolation"]]
        assert read["end"] == end

    # A fourth transaction left open (2 records stamped a minute ahead): read_committed
    # ends at its first offset, the LSO, and finds nothing for a time only it holds. A
    # lookup for base+50, above every earlier data record, lands on the first transaction
    # marker: markers carry the time they were written, and Kafka's lookup counts
    # control batches like any other.
    opened = {o["isolation"]: (o["end"], o["offsetForOldTime"], o["offsetForOpenTime"])
              for o in _events(lines, "openTxn")}
    first_marker = TXN_SIZE
    assert opened == {"read_committed": (end, first_marker, None),
                      "read_uncommitted": (end + 2, first_marker, end)}
    assert {t["isolation"]: t["offset"] for t in _events(lines, "openTxnAdminLatest")} == {
        "read_uncommitted": end + 2, "read_committed": end}
    # Then aborted: its marker follows, and both isolation levels end after it.
    assert {t["isolation"]: t["offset"] for t in _events(lines, "adminTxnLatest")} == {
        "read_uncommitted": end + 3, "read_committed": end + 3}

    for q in _events(lines, "adminListOffsets"):
        records = produced[q["partition"]]
        if q["spec"] == "latest":
            want_pair = (len(records), -1)
        elif q["spec"] == "earliest":
            want_pair = (0, -1)
        elif q["spec"] == "maxTimestamp":
            top = max(r["timestamp"] for r in records)
            want_pair = (_first_at_or_after(records, top)["offset"], top)  # type: ignore[index]
        else:
            hit = _first_at_or_after(records, q["spec"])
            want_pair = (hit["offset"], hit["timestamp"]) if hit else (-1, -1)
        assert (q["offset"], q["timestamp"]) == want_pair, q
    [deleted] = _events(lines, "deleteRecords")
    assert deleted["lowWatermark"] == deleted["earliestAfter"] == deleted["before"]


def test_java_client_against_chronolog_matches_the_oracle(chronolog_run: Lines) -> None:
    check_against_oracle(chronolog_run)


@pytest.mark.ecosystem_full
def test_java_client_against_kafka_matches_the_oracle(kafka_run: Lines) -> None:
    check_against_oracle(kafka_run)


@pytest.mark.ecosystem_full
def test_java_client_sees_chronolog_exactly_as_it_sees_kafka(chronolog_run: Lines,
                                                             kafka_run: Lines) -> None:
    assert chronolog_run == kafka_run
