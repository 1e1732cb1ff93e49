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
from pathlib import Path
from typing import Any, NamedTuple

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import TopicPartition as KpTP  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402

from client import SyncClient  # noqa: E402
from client.aio import FetchResult  # noqa: E402
from storage import txnindex  # noqa: E402
from storage.records import (  # noqa: E402
    ABORT_MARKER,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    TRANSACTIONAL_MASK,
    control_type,
    decode_batch,
    iter_batches,
)
from tests.helpers.compaction import OVERRIDES, cleaned_upto  # noqa: E402
from tests.helpers.confluent import consume_isolated, txn_producer  # noqa: E402


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

    committer = txn_producer(b.bootstrap, "committer")
    committer.begin_transaction()
    _send(committer, topic, b"k", b"committed", offsets)
    committer.commit_transaction(10)

    aborter = txn_producer(b.bootstrap, "aborter")
    aborter.begin_transaction()
    _send(aborter, topic, b"k", b"aborted", offsets)
    aborter.abort_transaction(10)
    for i in range(12):  # roll segments below the open transaction
        _send(plain, topic, f"f{i}".encode(), f"before-{i}".encode(), offsets)

    pending = txn_producer(b.bootstrap, "pending")
    pending.begin_transaction()
    _send(pending, topic, b"k", b"pending", offsets)
    for i in range(12):  # and above it, so that the LSO lies below the active segment
        _send(plain, topic, f"g{i}".encode(), f"after-{i}".encode(), offsets)
    lso = offsets[b"pending"]

    deadline = time.time() + 30
    while time.time() < deadline:
        if (b.data_dir / "cleaner-offset-checkpoint").exists() and \
                cleaned_upto(b.data_dir, topic) >= lso:
            break
        time.sleep(0.2)
    # The clean went up to the LSO and not past it.
    assert cleaned_upto(b.data_dir, topic) == lso

    committed_view = [v for _, _, v in consume_isolated(b.bootstrap, topic, 1, "read_committed")]
    assert committed_view == [b"committed"] + [f"before-{i}".encode() for i in range(12)]
    uncommitted = {v: o for _, o, v in consume_isolated(b.bootstrap, topic, 1, "read_uncommitted",
                                                expect=26)}
    assert b"aborted" not in uncommitted  # removed by the clean
    assert uncommitted[b"committed"] == offsets[b"committed"]
    assert uncommitted[b"pending"] == offsets[b"pending"]  # above the LSO: untouched
    assert sorted(uncommitted) == sorted(v for v in offsets if v != b"aborted")

    pending.commit_transaction(10)
    # The commit moves the LSO past "pending", so the cleaner may now remove "committed":
    # a later committed value of its key supersedes it (Kafka keeps only the last value
    # per key). Whether that clean has run yet is timing; what must hold either way is
    # that "pending" speaks for the key and every other key's value is untouched.
    after = {v: o for _, o, v in consume_isolated(b.bootstrap, topic, 1, "read_committed",
                                                   expect=25)}
    assert after[b"pending"] == offsets[b"pending"]
    assert set(after) - {b"committed"} == set(offsets) - {b"committed", b"aborted"}
    assert after.get(b"committed", offsets[b"committed"]) == offsets[b"committed"]


# ---------------------------------------------------------------- markers removed by the cleaner


class _Disk(NamedTuple):
    """What a partition's files hold, read with the storage code (the oracle)."""

    markers: list[tuple[int, int, int]]  # (offset, producer id, marker type)
    horizons: set[int]  # offsets of the markers that carry a delete horizon
    data: list[tuple[int, bytes | None, bytes | None, bool]]  # offset, key, value, aborted
    txnindex: list[tuple[int, int]]  # (producer id, first offset)


def _disk(part_dir: Path) -> _Disk:
    """Every batch of the partition's ``.log`` files in offset order; a data batch is
    aborted when a ``.txnindex`` entry covers it (Kafka's CompletedFetch rule)."""
    entries = [e for f in sorted(part_dir.glob("*.txnindex")) for e in txnindex.read(f)]
    markers: list[tuple[int, int, int]] = []
    horizons: set[int] = set()
    data: list[tuple[int, bytes | None, bytes | None, bool]] = []
    for f in sorted(part_dir.glob("*.log")):
        try:
            buf = f.read_bytes()
        except FileNotFoundError:  # swapped out by a clean meanwhile: read again
            return _disk(part_dir)
        for pos, h in iter_batches(buf):
            if h.attributes & CONTROL_MASK:
                kind = control_type(buf, pos)
                markers.append((h.base_offset, h.producer_id, -1 if kind is None else kind))
                if h.attributes & DELETE_HORIZON_MASK:
                    horizons.add(h.base_offset)
                continue
            aborted = bool(h.attributes & TRANSACTIONAL_MASK) and any(
                e.producer_id == h.producer_id and e.first_offset <= h.base_offset < e.last_offset
                for e in entries)
            data += [(r.offset, r.key, r.value, aborted) for r in decode_batch(buf, pos)]
    return _Disk(markers, horizons, data, [(e.producer_id, e.first_offset) for e in entries])


def test_markers_go_once_their_data_has_gone_and_delete_retention_passed(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """Kafka's marker removal through a real broker: transactions whose data the cleaner
    removes (superseded or aborted) lose their COMMIT/ABORT marker once
    delete.retention.ms has passed after the clean that found it needless; a marker
    whose transaction still has a batch (the producer's last, kept empty for its
    sequence; or live data) stays, and so does its aborted-transaction entry. Checked
    against the ``.log``/``.txnindex`` files, two consumers from offset 0, Fetch's
    aborted list and LSO, DescribeProducers, and again after a restart and a kill -9
    (the producer state rebuilt from the cleaned log); then the same
    transactional.id runs a new transaction."""
    b = broker_factory(overrides=OVERRIDES)
    topic = "compacted-markers"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "500",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "2000",
    })])[topic].result(20)
    offsets: dict[bytes, int] = {}
    latest: dict[bytes, bytes] = {}  # the committed view: latest committed value per key

    def txn(p: Producer, records: list[tuple[bytes, bytes]], commit: bool) -> None:
        p.begin_transaction()
        for k, v in records:
            _send(p, topic, k, v, offsets)
        if commit:
            p.commit_transaction(10)
            latest.update(records)
        else:
            p.abort_transaction(10)

    t1 = txn_producer(b.bootstrap, "t1")
    t2 = txn_producer(b.bootstrap, "t2")
    txn(t1, [(b"a", b"a1"), (b"b", b"b1")], True)   # superseded below: marker goes
    txn(t1, [(b"a", b"aX")], False)                 # aborted: data and marker go
    txn(t1, [(b"c", b"c1")], True)                  # superseded below: marker goes
    txn(t1, [(b"c", b"cX")], False)                 # t1's last batch: kept empty, marker stays
    txn(t2, [(b"d", b"d1")], True)                  # live data: marker stays
    plain = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for k, v in ((b"a", b"a2"), (b"b", b"b2"), (b"c", b"c2")):
        _send(plain, topic, k, v, offsets)
        latest[k] = v
    gone = {offsets[b"b1"] + 1, offsets[b"aX"] + 1, offsets[b"c1"] + 1}  # their markers
    stays = {offsets[b"cX"] + 1, offsets[b"d1"] + 1}
    part = b.data_dir / f"{topic}-0"

    def views() -> tuple[_Disk, list[tuple[int, int, bytes]], list[tuple[int, int, bytes]],
                         FetchResult]:
        """The files, both consumers from offset 0 and a read_committed Fetch, taken
        while no clean swapped segments in (read again until the files stay still)."""
        for _ in range(10):
            disk = _disk(part)
            while True:  # until the cleaner has nothing more to swap in
                time.sleep(0.4)
                later = _disk(part)
                if later == disk:
                    break
                disk = later
            live = sum(not aborted for *_, aborted in disk.data)
            committed = consume_isolated(b.bootstrap, topic, 1, "read_committed", expect=live,
                                 timeout=5)
            uncommitted = consume_isolated(b.bootstrap, topic, 1, "read_uncommitted",
                                   expect=len(disk.data), timeout=5)
            with SyncClient(b.bootstrap) as c:
                res = c.fetch_raw(topic, 0, 0, 1 << 20, isolation_level=1)
            if _disk(part) == disk:
                break
            time.sleep(0.5)
        # Consumers see the files' records, read_committed without aborted ones, and
        # Fetch names the aborted transactions the .txnindex files hold.
        assert [(o, v) for _, o, v in committed] == \
            [(o, v) for o, _, v, aborted in disk.data if not aborted]
        assert [(o, v) for _, o, v in uncommitted] == [(o, v) for o, _, v, _ in disk.data]
        assert sorted(res.aborted) == sorted(disk.txnindex)
        return disk, committed, uncommitted, res

    deadline = time.monotonic() + 40
    i = 0
    horizon_seen = False
    while True:  # fillers roll segments so the cleaner keeps getting dirty data
        for _ in range(8):
            k, v = f"f{i % 5}".encode(), f"fill-{i}".encode()
            _send(plain, topic, k, v, offsets)
            latest[k] = v
            i += 1
        disk = _disk(part)
        if disk.horizons & gone and not horizon_seen:
            # A needless marker waits for its horizon: consumers read past it.
            horizon_seen = True
            assert views()[0].horizons  # still there while the consumers read
        if not gone & {o for o, _, _ in disk.markers}:
            break
        assert time.monotonic() < deadline, disk.markers
        time.sleep(0.3)
    assert horizon_seen  # removed in two steps: horizon first, then a later clean

    def check() -> None:
        disk, _, _, res = views()
        fetched, lso, hw = res.aborted, res.last_stable_offset, res.high_watermark
        view = [(o, k, v) for o, k, v, _ in disk.data]
        at = {o: (pid, kind) for o, pid, kind in disk.markers}
        assert set(at) == stays and not disk.horizons  # only the markers still needed
        assert at[offsets[b"cX"] + 1][1] == ABORT_MARKER
        assert not any(aborted for *_, aborted in disk.data)  # no aborted record is left
        last = {k: v for _, k, v in view}
        assert last == latest
        # Fetch's aborted list names the transaction whose (emptied) batch is left, not
        # the one whose data went.
        t1_pid = at[offsets[b"cX"] + 1][0]
        assert sorted(fetched) == [(t1_pid, offsets[b"cX"])]
        assert lso == hw  # no transaction is open

    def producers() -> dict[int, tuple[int, int, int]]:
        """DescribeProducers (kafka-python): producer id -> (epoch, last sequence,
        open transaction's start)."""
        kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            got = kp.describe_producers([KpTP(topic, 0)])[KpTP(topic, 0)].active_producers
        finally:
            kp.close()
        return {s.producer_id: (s.producer_epoch, s.last_sequence,
                                s.current_transaction_start_offset) for s in got}

    check()
    state = producers()
    # t1 sent 5 records, one per batch, t2 one: their last sequences survive the cleans
    # (each producer's last batch is kept), and no transaction is open.
    t1_pid = next(pid for o, pid, _ in _disk(part).markers if o == offsets[b"cX"] + 1)
    t2_pid = next(pid for o, pid, _ in _disk(part).markers if o == offsets[b"d1"] + 1)
    assert state[t1_pid][1:] == (4, -1) and state[t2_pid][1:] == (0, -1)
    b.restart()
    check()
    assert producers() == state
    b.kill()
    b.start()
    check()
    assert producers() == state  # rebuilt from the cleaned log alone
    again = txn_producer(b.bootstrap, "t1")  # the same transactional.id goes on
    txn(again, [(b"a", b"a3")], True)
    committed = [v for _, _, v in consume_isolated(b.bootstrap, topic, 1, "read_committed",
                                           expect=len(_disk(part).data))]
    assert committed[-1] == b"a3" and not {b"a1", b"aX", b"cX"} & set(committed)
