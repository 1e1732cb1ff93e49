"""Transactions with confluent-kafka (librdkafka) against a real broker subprocess.

Commit, abort, multi-partition transactions, consume-transform-produce with
send_offsets_to_transaction, zombie fencing, abandoned transactions aborted after
their timeout (also across kill -9), and read_committed vs read_uncommitted
consumers. Each expectation is derived from what the test itself produced.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from storage import txnindex
from storage.records import control_type, iter_batches
from storage.txnindex import TxnIndexEntry
from tests.helpers.confluent import consume_isolated, txn_producer
from tests.helpers.kafka_socket import KafkaSocket


def _topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(10)
    return name






def _open_transaction(bs: str, topic: str, txn_id: str, timeout_ms: int, value: bytes) -> Producer:
    """A producer whose transaction holds one record of ``topic`` and stays open."""
    p = txn_producer(bs, txn_id, **{"transaction.timeout.ms": timeout_ms})
    p.begin_transaction()
    p.produce(topic, value=value)
    p.flush(10)
    return p


def _watermarks(bootstrap: str, topic: str, isolation: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


def test_commit_and_abort_are_seen_per_isolation_level(broker: Any) -> None:
    bs = broker.bootstrap
    topic = _topic(bs, "txn-basic")
    p = txn_producer(bs, "t-basic")
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"c1-%d" % i)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"ab-%d" % i)
    p.flush(10)  # else librdkafka purges the unsent records instead of aborting them
    p.abort_transaction(15)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"c2-%d" % i)
    p.commit_transaction(15)
    committed = [v for _, _, v in consume_isolated(bs, topic, 1, "read_committed", 8)]
    assert committed == [b"c1-%d" % i for i in range(5)] + [b"c2-%d" % i for i in range(3)]
    uncommitted = [v for _, _, v in consume_isolated(bs, topic, 1, "read_uncommitted", 12)]
    assert uncommitted == ([b"c1-%d" % i for i in range(5)] + [b"ab-%d" % i for i in range(4)]
                           + [b"c2-%d" % i for i in range(3)])
    # 12 data records + 3 markers; no transaction open: LSO = HW = LEO at both levels.
    assert _watermarks(bs, topic, "read_committed") == (0, 15)
    assert _watermarks(bs, topic, "read_uncommitted") == (0, 15)


def test_open_transaction_pins_the_last_stable_offset(broker: Any) -> None:
    bs = broker.bootstrap
    topic = _topic(bs, "txn-open")
    plain = Producer({"bootstrap.servers": bs})
    for i in range(3):
        plain.produce(topic, value=b"before-%d" % i)
    plain.flush(10)
    p = txn_producer(bs, "t-open")
    p.begin_transaction()
    p.produce(topic, value=b"open")
    p.flush(10)
    for i in range(2):
        plain.produce(topic, value=b"after-%d" % i)
    plain.flush(10)
    # Offsets 0-2 plain, 3 the open transaction, 4-5 plain: LSO 3, LEO 6.
    assert _watermarks(bs, topic, "read_committed") == (0, 3)
    assert _watermarks(bs, topic, "read_uncommitted") == (0, 6)
    assert [v for _, _, v in consume_isolated(bs, topic, 1, "read_committed", 3, timeout=3)] == [
        b"before-0", b"before-1", b"before-2"]
    p.commit_transaction(15)
    assert _watermarks(bs, topic, "read_committed") == (0, 7)
    assert [v for _, _, v in consume_isolated(bs, topic, 1, "read_committed", 6)] == [
        b"before-0", b"before-1", b"before-2", b"open", b"after-0", b"after-1"]


def test_multi_partition_transaction_commits_everywhere(broker: Any) -> None:
    bs = broker.bootstrap
    topic = _topic(bs, "txn-multi", 3)
    p = txn_producer(bs, "t-multi")
    p.begin_transaction()
    for part in range(3):
        p.produce(topic, value=b"x%d" % part, partition=part)
    p.commit_transaction(15)
    p.begin_transaction()
    for part in range(3):
        p.produce(topic, value=b"y%d" % part, partition=part)
    p.flush(10)
    p.abort_transaction(15)
    got = sorted((part, v) for part, _, v in consume_isolated(bs, topic, 3, "read_committed", 3))
    assert got == [(0, b"x0"), (1, b"x1"), (2, b"x2")]
    for part in range(3):
        assert _watermarks(bs, topic, "read_committed", part) == (0, 4)  # 2 data + 2 markers


def test_consume_transform_produce_commits_offsets_only_with_the_transaction(broker: Any) -> None:
    bs = broker.bootstrap
    src = _topic(bs, "ctp-in")
    dst = _topic(bs, "ctp-out")
    plain = Producer({"bootstrap.servers": bs})
    for i in range(10):
        plain.produce(src, value=b"%d" % i)
    plain.flush(10)
    group = "ctp-group"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([src])
    msgs: list[Any] = []
    deadline = time.monotonic() + 20
    while len(msgs) < 10 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            msgs.append(m)
    assert len(msgs) == 10
    p = txn_producer(bs, "t-ctp")

    def transform(batch: list[Any], commit: bool) -> None:
        p.begin_transaction()
        for m in batch:
            p.produce(dst, value=m.value() + b"!")
        p.flush(10)
        offsets = [TopicPartition(src, 0, batch[-1].offset() + 1)]
        p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 15)
        if commit:
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)

    def stable_fetch() -> tuple[int, int]:
        with KafkaSocket(broker.port) as raw:
            r = raw.request(9, 7, {"group_id": group, "require_stable": True,
                                   "topics": [{"name": src, "partition_indexes": [0]}]})
        part = r.topics[0].partitions[0]
        return part.error_code, part.committed_offset

    # While offsets are pending in an open transaction, RequireStable gets 88 (retriable).
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(src, 0, 2)],
                                  consumer.consumer_group_metadata(), 15)
    assert stable_fetch() == (88, -1)
    p.abort_transaction(15)
    assert stable_fetch() == (0, -1)
    transform(msgs[:4], commit=True)
    assert stable_fetch() == (0, 4)
    assert consumer.committed([TopicPartition(src, 0)], 10)[0].offset == 4
    transform(msgs[4:7], commit=False)
    assert consumer.committed([TopicPartition(src, 0)], 10)[0].offset == 4  # gone on abort
    transform(msgs[4:10], commit=True)
    assert consumer.committed([TopicPartition(src, 0)], 10)[0].offset == 10
    consumer.close()
    out = [v for _, _, v in consume_isolated(bs, dst, 1, "read_committed", 10)]
    assert out == [b"%d!" % i for i in range(10)]


def test_second_producer_with_the_same_id_fences_the_first(broker: Any) -> None:
    bs = broker.bootstrap
    topic = _topic(bs, "txn-zombie")
    zombie = txn_producer(bs, "t-zombie")
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(10)
    successor = txn_producer(bs, "t-zombie")  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(15)
    zombie.produce(topic, value=b"zombie-2")
    with pytest.raises(KafkaException) as exc:
        zombie.commit_transaction(15)
    assert exc.value.args[0].fatal() or "fenced" in str(exc.value).lower()
    assert [v for _, _, v in consume_isolated(bs, topic, 1, "read_committed", 1)] == [b"successor"]


def test_abandoned_transaction_is_aborted_after_its_timeout_even_across_kill_9(
        broker_factory: Any) -> None:
    broker = broker_factory({
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    bs = broker.bootstrap
    topic = _topic(bs, "txn-abandoned")
    _open_transaction(bs, topic, "t-abandoned", 3000, b"abandoned")
    assert _watermarks(bs, topic, "read_committed") == (0, 0)
    broker.kill()
    broker.start()
    assert _watermarks(bs, topic, "read_committed") == (0, 0)  # still pinned after kill -9
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _watermarks(bs, topic, "read_committed") != (0, 2):
        time.sleep(0.3)
    assert _watermarks(bs, topic, "read_committed") == (0, 2)  # data + ABORT marker
    assert consume_isolated(bs, topic, 1, "read_committed", timeout=3) == []
    assert [v for _, _, v in consume_isolated(bs, topic, 1, "read_uncommitted", 1)] == [b"abandoned"]


def test_describe_and_list_transactions_and_producers_show_an_open_transaction(
        broker: Any) -> None:
    bs = broker.bootstrap
    topic = _topic(bs, "txn-describe")
    p = _open_transaction(bs, topic, "t-describe", 45_000, b"open")
    with KafkaSocket(broker.port) as raw:
        lso, leo = (raw.request(2, 7, {"replica_id": -1, "isolation_level": level, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": -1}]}]}).topics[0].partitions[0].offset
            for level in (1, 0))
        assert leo == lso + 1  # the open transaction's one record is the last offset
        [d] = raw.request(65, 0, {"transactional_ids": ["t-describe"]}).transaction_states
        assert (d.error_code, d.transaction_state, d.transaction_timeout_ms) == (0, "Ongoing", 45_000)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0])]
        [unknown] = raw.request(65, 0, {"transactional_ids": ["nope"]}).transaction_states
        assert unknown.error_code == 105
        listed = raw.request(66, 1, {"state_filters": ["Ongoing", "Bogus"],
                                     "producer_id_filters": [], "duration_filter": -1})
        assert [t.transactional_id for t in listed.transaction_states] == ["t-describe"]
        assert list(listed.unknown_state_filters) == ["Bogus"]
        producers = raw.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        active = producers.topics[0].partitions[0].active_producers
        assert [a.current_txn_start_offset for a in active if a.producer_id == d.producer_id] \
            == [lso]
    p.commit_transaction(15)
    with KafkaSocket(broker.port) as raw:
        [d] = raw.request(65, 0, {"transactional_ids": ["t-describe"]}).transaction_states
        assert (d.transaction_state, list(d.topics)) == ("CompleteCommit", [])


def test_kill_9_between_prepare_commit_and_its_markers_commits_on_restart(
        broker: Any) -> None:
    """The coordinator's PrepareCommit is durable but the broker dies before any marker:
    after restart the markers are written and the transaction's data becomes readable."""
    bs = broker.bootstrap
    topic = _topic(bs, "txn-prepare")
    _open_transaction(bs, topic, "t-prepare", 60_000, b"prepared")
    broker.kill()
    state = broker.data_dir / "__chronolog" / "transactions.log"
    last = [json.loads(line) for line in state.read_text().splitlines()
            if json.loads(line)["id"] == "t-prepare"][-1]
    assert last["state"] == 1 and last["partitions"] == [[topic, 0]]  # Ongoing
    last["state"] = 2  # PrepareCommit: what EndTxn(commit) writes before any marker
    with open(state, "a") as f:
        f.write(json.dumps(last) + "\n")
    broker.start()
    assert _watermarks(bs, topic, "read_committed") == (0, 2)  # data + COMMIT marker
    assert [v for _, _, v in consume_isolated(bs, topic, 1, "read_committed", 1)] == [b"prepared"]
    again = txn_producer(bs, "t-prepare")  # CompleteCommit: a new session starts clean
    again.begin_transaction()
    again.produce(topic, value=b"next")
    again.commit_transaction(15)
    assert [v for _, _, v in consume_isolated(bs, topic, 1, "read_committed", 2)] == [
        b"prepared", b"next"]


def _txnindex_oracle(partition_dir: Path) -> dict[int, list[TxnIndexEntry]]:
    """Kafka's rule, from the log alone: an ABORT marker closes its producer's open
    transaction (opened by its first transactional batch) and records (producer id, first
    offset, marker offset, LSO then: the oldest other open transaction's first offset, or
    the marker + 1) in the .txnindex of the segment holding the marker."""
    out: dict[int, list[TxnIndexEntry]] = {}
    open_txns: dict[int, int] = {}
    for seg in sorted(partition_dir.glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_batches(data):
            if h.attributes & 0x20:
                first = open_txns.pop(h.producer_id, None)
                if first is not None and control_type(data, pos) == 0:
                    lso = min(open_txns.values(), default=h.base_offset + 1)
                    out.setdefault(int(seg.stem), []).append(
                        TxnIndexEntry(h.producer_id, first, h.base_offset, lso))
            elif h.attributes & 0x10:
                open_txns.setdefault(h.producer_id, h.base_offset)
    return out


def _txnindex_files(partition_dir: Path) -> dict[int, list[TxnIndexEntry]]:
    return {int(p.stem): txnindex.read(p) for p in sorted(partition_dir.glob("*.txnindex"))}


def test_txnindex_files_hold_every_abort_and_are_rebuilt_after_a_crash(broker_factory: Any) -> None:
    """Two transactional producers interleave commits and aborts over small segments;
    the .txnindex files equal the oracle read from the log. After kill -9 with one file
    deleted and another torn, the restarted broker writes them back exactly."""
    broker = broker_factory({"log.segment.bytes": "2000"})
    bs = broker.bootstrap
    topic = _topic(bs, "txn-index")
    a, b = txn_producer(bs, "t-idx-a"), txn_producer(bs, "t-idx-b")
    for i in range(12):
        a.begin_transaction()
        a.produce(topic, value=b"a%d" % i)
        a.flush(10)
        b.begin_transaction()  # opens while a's transaction is open: a's abort sees its LSO
        b.produce(topic, value=b"b%d" % i)
        b.flush(10)
        (a.commit_transaction if i % 3 == 0 else a.abort_transaction)(15)
        (b.abort_transaction if i % 2 else b.commit_transaction)(15)
    part = broker.data_dir / f"{topic}-0"
    want = _txnindex_oracle(part)
    assert len(want) >= 2 and sum(map(len, want.values())) == 8 + 6
    assert _txnindex_files(part) == want
    broker.kill()
    victims = sorted(want)
    (part / f"{victims[0]:020d}.txnindex").unlink()
    torn = part / f"{victims[-1]:020d}.txnindex"
    torn.write_bytes(torn.read_bytes()[:-10])
    broker.start()
    assert _txnindex_files(part) == want
    assert "rewrote 2 .txnindex file(s)" in broker.log()
    committed = sorted(v for _, _, v in consume_isolated(bs, topic, 1, "read_committed", expect=4 + 6))
    assert committed == sorted([b"a%d" % i for i in range(0, 12, 3)] + [b"b%d" % i for i in range(0, 12, 2)])
    # dump-log prints each entry as Kafka's DumpLogSegments does.
    chronolog = str(Path(sys.executable).parent / "chronolog")
    shown = subprocess.run([chronolog, "dump-log", str(part)], capture_output=True, text=True,
                           timeout=60, check=True).stdout
    printed = [line for line in shown.splitlines() if line.startswith("version: 0 producerId:")]
    assert printed == [f"version: 0 producerId: {e.producer_id} firstOffset: {e.first_offset} "
                       f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}"
                       for base in sorted(want) for e in want[base]]
