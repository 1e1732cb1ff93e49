"""Log compaction of a transactional topic through a real broker (confluent-kafka).

A key is committed, then updated in an aborted transaction, then updated again in a
transaction left open while other records roll the segments; the broker's cleaner
compacts the topic. A read_committed consumer must still see the committed value
(the aborted update never speaks for the key), the aborted record must be gone, the
open transaction's record must still be there (the clean stops at the last stable
offset, which the cleaner checkpoint shows), and once that transaction commits its
value is the one a read_committed consumer sees.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.broker.test_compaction_clients import OVERRIDES, _cleaned_upto  # noqa: E402
from tests.broker.test_transactions_confluent import _consume, _txn_producer  # noqa: E402


def _send(p: Producer, topic: str, key: bytes, value: bytes, offsets: dict[bytes, int]) -> None:
    """Produce one record and remember its offset by value (values are unique)."""

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        offsets[msg.value()] = msg.offset()

    p.produce(topic, key=key, value=value, on_delivery=report)
    p.flush(10)


def test_aborted_update_does_not_remove_the_committed_value(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(overrides=OVERRIDES)
    topic = "compacted-txn"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000",
    })])[topic].result(20)
    offsets: dict[bytes, int] = {}
    plain = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})

    committer = _txn_producer(b.bootstrap, "committer")
    committer.begin_transaction()
    _send(committer, topic, b"k", b"committed", offsets)
    committer.commit_transaction(10)

    aborter = _txn_producer(b.bootstrap, "aborter")
    aborter.begin_transaction()
    _send(aborter, topic, b"k", b"aborted", offsets)
    aborter.abort_transaction(10)
    for i in range(12):  # roll segments below the open transaction
        _send(plain, topic, f"f{i}".encode(), f"before-{i}".encode(), offsets)

    pending = _txn_producer(b.bootstrap, "pending")
    pending.begin_transaction()
    _send(pending, topic, b"k", b"pending", offsets)
    for i in range(12):  # and above it, so that the LSO lies below the active segment
        _send(plain, topic, f"g{i}".encode(), f"after-{i}".encode(), offsets)
    lso = offsets[b"pending"]

    deadline = time.time() + 30
    while time.time() < deadline:
        if (b.data_dir / "cleaner-offset-checkpoint").exists() and \
                _cleaned_upto(b.data_dir, topic) >= lso:
            break
        time.sleep(0.2)
    # The clean went up to the LSO and not past it.
    assert _cleaned_upto(b.data_dir, topic) == lso

    committed_view = [v for _, _, v in _consume(b.bootstrap, topic, 1, "read_committed")]
    assert committed_view == [b"committed"] + [f"before-{i}".encode() for i in range(12)]
    uncommitted = {v: o for _, o, v in _consume(b.bootstrap, topic, 1, "read_uncommitted",
                                                expect=26)}
    assert b"aborted" not in uncommitted  # removed by the clean
    assert uncommitted[b"committed"] == offsets[b"committed"]
    assert uncommitted[b"pending"] == offsets[b"pending"]  # above the LSO: untouched
    assert sorted(uncommitted) == sorted(v for v in offsets if v != b"aborted")

    pending.commit_transaction(10)
    after = [v for _, _, v in _consume(b.bootstrap, topic, 1, "read_committed", expect=26)]
    assert [v for v in after if v in (b"committed", b"pending")] == [b"committed", b"pending"]
