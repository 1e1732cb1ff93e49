"""Transactions with kafkajs 2.2.4 (Node), a client that shares no code with librdkafka.

kafkajs's transactional producer (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, all at v0) commits and aborts; its read_committed consumer
(the default) drops aborted records by the AbortedTransactions list of Fetch, and its
read_uncommitted one sees everything. Expectations come from what each test produced:
committed records in the order sent, aborted ones only under read_uncommitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import BASE_TS, running_broker, topic_name
from tests.helpers.confluent import consume_isolated
from tests.helpers.kafkajs import JS_DIR, NODE, b64, create, kafkajs, unb64


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    assert NODE and (JS_DIR / "node_modules" / "kafkajs").is_dir(), \
        "kafkajs is not installed: `make check-clients` installs it"
    with running_broker(tmp_path_factory, "kafkajs-txn") as b:
        yield b


def _txn(tag: str, n: int, partitions: int, commit: bool) -> dict[str, Any]:
    """n records spread over the partitions, values naming the transaction and index."""
    return {"commit": commit, "messages": [
        {"partition": i % partitions, "value": b64(f"{tag}-{i}".encode()), "timestamp": BASE_TS + i}
        for i in range(n)]}


def _values(txns: list[dict[str, Any]], partition: int, committed_only: bool) -> list[bytes]:
    """The oracle: what a partition holds, per isolation level, in the order sent."""
    return [unb64(m["value"]) or b"" for t in txns if t["commit"] or not committed_only
            for m in t["messages"] if m["partition"] == partition]


def test_commits_and_aborts_are_seen_per_isolation_level_by_kafkajs_and_librdkafka(
        kb: BrokerProcess) -> None:
    """Commit, abort, commit over two partitions. The committed transaction after the
    aborted one makes a consumer that failed to drop aborted records fail: it would
    read the aborted values first."""
    topic = topic_name("js-txn")
    create(kb, topic, partitions=2)
    txns = [_txn("a", 7, 2, True), _txn("b", 5, 2, False), _txn("c", 6, 2, True)]
    committed = sum(len(t["messages"]) for t in txns if t["commit"])
    everything = sum(len(t["messages"]) for t in txns)
    ran, read_committed, read_uncommitted = kafkajs(kb, [
        {"op": "transactions", "topic": topic, "transactionalId": topic_name("js-tid"),
         "transactions": txns},
        {"op": "consume", "topic": topic, "groupId": topic_name("js-rc"), "count": committed},
        {"op": "consume", "topic": topic, "groupId": topic_name("js-ru"), "count": everything,
         "readUncommitted": True},
    ], timeout=90)
    assert ran == [{"committed": t["commit"]} for t in txns]
    for got, committed_only in ((read_committed, True), (read_uncommitted, False)):
        for p in (0, 1):
            mine = sorted((m for m in got if m["partition"] == p), key=lambda m: m["offset"])
            assert [unb64(m["value"]) for m in mine] == _values(txns, p, committed_only)
    # librdkafka reads what kafkajs wrote the same way (markers and aborted list included).
    for isolation, committed_only in (("read_committed", True), ("read_uncommitted", False)):
        got = consume_isolated(kb.bootstrap, topic, 2, isolation, expect=committed if committed_only else everything)
        for p in (0, 1):
            assert [v for q, _, v in sorted(got) if q == p] == _values(txns, p, committed_only)


def test_offsets_sent_in_a_transaction_count_only_if_it_commits(kb: BrokerProcess) -> None:
    """sendOffsets (AddOffsetsToTxn + TxnOffsetCommit) for two groups: the committed
    transaction's offsets become the group's, the aborted one's never appear."""
    topic = topic_name("js-txo")
    create(kb, topic, partitions=2)
    kept, dropped = topic_name("js-kept"), topic_name("js-dropped")
    txns = [
        {**_txn("k", 4, 2, True),
         "offsets": {"groupId": kept, "topic": topic, "partitions": [
             {"partition": 0, "offset": 11}, {"partition": 1, "offset": 29}]}},
        {**_txn("d", 4, 2, False),
         "offsets": {"groupId": dropped, "topic": topic, "partitions": [
             {"partition": 0, "offset": 3}]}},
    ]
    ran, kept_offsets, dropped_offsets = kafkajs(kb, [
        {"op": "transactions", "topic": topic, "transactionalId": topic_name("js-tid"),
         "transactions": txns},
        {"op": "fetchOffsets", "groupId": kept, "topic": topic},
        {"op": "fetchOffsets", "groupId": dropped, "topic": topic},
    ], timeout=90)
    assert ran == [{"committed": True}, {"committed": False}]
    [k], [d] = kept_offsets, dropped_offsets
    assert sorted((p["partition"], int(p["offset"])) for p in k["partitions"]) == [(0, 11), (1, 29)]
    assert sorted((p["partition"], int(p["offset"])) for p in d["partitions"]) == [(0, -1), (1, -1)]


def test_a_second_producer_with_the_same_id_fences_the_first(kb: BrokerProcess) -> None:
    """The new producer's InitProducerId bumps the epoch and aborts the open transaction;
    the zombie's EndTxn is refused, and its records never become visible."""
    topic = topic_name("js-fence")
    create(kb, topic, partitions=1)
    txns = [_txn("before", 3, 1, True), _txn("zombie", 3, 1, True)]
    [ran] = kafkajs(kb, [{"op": "transactions", "topic": topic, "transactionalId": topic_name("js-tid"),
                          "transactions": txns, "fencedBy": True}], timeout=90)
    assert ran[0] == {"committed": True}
    assert ran[1]["fenced"] in ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"), ran
    got = consume_isolated(kb.bootstrap, topic, 1, "read_committed", expect=3)
    assert [v for _, _, v in sorted(got)] == _values(txns[:1], 0, True)
