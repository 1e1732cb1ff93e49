"""Idempotent producers: the sequence rules of Kafka's ProducerStateManager.

The unit tests drive ``broker.producers.ProducerStateManager`` with real files in a
temporary data dir; the end-to-end tests at the bottom retry real batches over a real
socket against the broker subprocess.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.producers import (
    BATCHES_TO_RETAIN,
    ID_BLOCK_SIZE,
    INT32_MAX,
    Duplicate,
    ProducerStateManager,
    last_sequence,
)
from protocol.errors import ErrorCode, KafkaError
from storage.records import BatchHeader, Record, build_batch
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.clients import (
    BASE_TS,
    bring_back,
    fetch_all,
    list_offset,
    partition_errors,
    produce_body,
)
from tests.helpers.kafka_socket import KafkaSocket, split_frames


class Header(NamedTuple):
    """The header fields producer state reads, as storage.records.BatchHeader has them."""

    base_offset: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    attributes: int


class Appender:
    """A partition's log as offsets: check, 'append' at the end, record."""

    def __init__(self, mgr: ProducerStateManager, topic: str = "t", partition: int = 0) -> None:
        self.mgr = mgr
        self.topic = topic
        self.partition = partition
        self.next_offset = 0
        self.headers: list[Header] = []

    def produce(self, pid: int, epoch: int, seq: int, count: int) -> tuple[int, bool]:
        """Returns (base offset, was_duplicate)."""
        dup = self.mgr.check(self.topic, self.partition, pid, epoch, seq, count - 1)
        if dup is not None:
            return dup.base_offset, True
        base = self.next_offset
        self.next_offset += count
        self.headers.append(Header(base, count - 1, 1000 + base, pid, epoch, seq, 0))
        self.mgr.record(
            self.topic, self.partition, pid, epoch, seq, count - 1, base, base + count - 1, -1,
            now_ms=1000,
        )
        return base, False

    def read_headers(self, offset: int) -> list[Header]:
        return [h for h in self.headers if h.base_offset + h.last_offset_delta >= offset]


@pytest.fixture
def log(tmp_path: Path) -> Appender:
    """One partition of a fresh producer-state manager."""
    return Appender(ProducerStateManager(tmp_path))


def expect_error(code: ErrorCode, fn, *args) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as exc:
        fn(*args)
    assert exc.value.code == code


def test_retried_batch_is_answered_with_its_original_offsets(log: Appender) -> None:
    assert log.produce(7, 0, 0, 3) == (0, False)
    assert log.produce(7, 0, 3, 2) == (3, False)
    assert log.produce(7, 0, 0, 3) == (0, True)
    assert log.produce(7, 0, 3, 2) == (3, True)
    assert log.next_offset == 5


def test_only_the_last_five_batches_are_recognised_as_duplicates(log: Appender) -> None:
    for i in range(BATCHES_TO_RETAIN + 1):
        log.produce(1, 0, i, 1)
    for i in range(1, BATCHES_TO_RETAIN + 1):
        assert log.produce(1, 0, i, 1) == (i, True)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log.produce, 1, 0, 0, 1)


def test_sequence_gap_is_out_of_order(log: Appender) -> None:
    log.produce(1, 0, 0, 5)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log.produce, 1, 0, 6, 1)
    # A partially overlapping retry is not a duplicate either.
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log.produce, 1, 0, 2, 3)
    assert log.produce(1, 0, 5, 1) == (5, False)


def test_stale_epoch_is_rejected_and_new_epoch_restarts_at_zero(log: Appender) -> None:
    log.produce(1, 3, 0, 2)
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log.produce, 1, 2, 2, 1)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log.produce, 1, 4, 2, 1)
    assert log.produce(1, 4, 0, 1) == (2, False)
    # The old epoch's batches are no longer duplicates once the epoch moved on.
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log.produce, 1, 3, 0, 2)


def test_unknown_producer_is_accepted_at_any_sequence_as_kafka_does(log: Appender) -> None:
    assert log.produce(99, 0, 42, 2) == (0, False)
    assert log.produce(99, 0, 44, 1) == (2, False)


def test_producers_and_partitions_are_independent(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    a, b = Appender(mgr, "t", 0), Appender(mgr, "t", 1)
    a.produce(1, 0, 0, 2)
    a.produce(2, 0, 0, 2)
    assert b.produce(1, 0, 0, 1) == (0, False)
    assert a.produce(2, 0, 2, 1) == (4, False)


def test_sequence_wraps_from_int32_max_to_zero(log: Appender) -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 1
    log.produce(1, 0, INT32_MAX - 1, 2)
    assert log.produce(1, 0, 0, 1) == (2, False)
    assert log.produce(1, 0, INT32_MAX - 1, 2) == (0, True)


def test_non_idempotent_and_invalid_batches(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    assert mgr.check("t", 0, -1, -1, -1, 10) is None
    expect_error(ErrorCode.INVALID_RECORD, mgr.check, "t", 0, 5, 0, -1, 0)
    with pytest.raises(KafkaError) as exc:
        mgr.check("t", 0, -1, -1, -1, 0, is_transactional=True)
    assert exc.value.code == ErrorCode.INVALID_RECORD
    # A transactional batch opens a transaction; the same producer's plain batch there is 48.
    assert mgr.check("t", 0, 5, 0, 0, 0, is_transactional=True) is None
    mgr.record_batch("t", 0, BatchHeader(0, 0, 0, 2, 0, 0x10, 0, 0, 0, 5, 0, 0, 1), 7, -1,
                     now_ms=0)
    with pytest.raises(KafkaError) as exc:
        mgr.check("t", 0, 5, 0, 1, 0)
    assert exc.value.code == ErrorCode.INVALID_TXN_STATE


def test_producer_ids_are_unique_across_restarts_and_crashes(tmp_path: Path) -> None:
    seen: set[int] = set()
    for _ in range(3):
        mgr = ProducerStateManager(tmp_path)  # no close: every restart is a "crash"
        for _ in range(ID_BLOCK_SIZE // 2 + 3):
            pid = mgr.allocate_producer_id()
            assert pid not in seen
            seen.add(pid)


def test_allocation_skips_ids_found_in_the_log(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    log = Appender(ProducerStateManager(tmp_path / "a"))
    log.produce(5000, 0, 0, 1)
    mgr = ProducerStateManager(tmp_path / "a")
    mgr.restore_partition("t", 0, 0, log.next_offset, log.read_headers)
    assert mgr.allocate_producer_id() > 5000


def test_a_forged_huge_producer_id_does_not_exhaust_allocation(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    mgr.record("t", 0, 2**63 - 5, 0, 0, 0, 0, 0, -1, now_ms=1)
    assert mgr.allocate_producer_id() == 0


def test_idle_producers_expire(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    mgr.record("t", 0, 1, 0, 0, 0, 0, 0, -1, now_ms=10_000)
    mgr.record("t", 0, 2, 0, 0, 0, 1, 1, -1, now_ms=10_900)
    assert mgr.remove_expired(11_000) == 1
    assert mgr.entry("t", 0, 1) is None and mgr.entry("t", 0, 2) is not None


# A produce history: (producer, epoch step, sequence action, record count).
# action 0 = next sequence, 1 = retry one of the recent batches, 2 = gap.
history = st.lists(
    st.tuples(
        st.integers(0, 3), st.integers(0, 1), st.sampled_from([0, 0, 0, 1, 2]),
        st.integers(1, 4),
    ),
    max_size=40,
)


def play(log: Appender, steps: list[tuple[int, int, int, int]]) -> list[object]:
    """Drive a plausible client: a retry re-sends a recent batch, a gap skips ahead."""
    epochs: dict[int, int] = {}
    nxt: dict[int, int] = {}
    sent: dict[int, list[tuple[int, int, int]]] = {}
    outcomes: list[object] = []
    for pid, bump, action, count in steps:
        epoch = epochs.get(pid, 0) + bump
        if bump:
            nxt[pid] = 0
            sent[pid] = []
        epochs[pid] = epoch
        if action == 1 and sent.get(pid):
            e, seq, n = sent[pid][-1]
            args = (pid, e, seq, n)
        else:
            seq = nxt.get(pid, 0) + (3 if action == 2 else 0)
            args = (pid, epoch, seq, count)
        try:
            outcomes.append(log.produce(*args))
            if args[2] == nxt.get(pid, 0) or pid not in nxt:
                nxt[pid] = last_sequence(args[2], args[3] - 1) + 1
                sent.setdefault(pid, []).append((args[1], args[2], args[3]))
        except KafkaError as e:
            outcomes.append(e.code)
    return outcomes


@given(history, history)
def test_state_rebuilt_from_the_log_answers_exactly_like_the_live_state(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[tuple[int, int, int, int]],
    after: list[tuple[int, int, int, int]],
) -> None:
    d = tmp_path_factory.mktemp("p")
    live = Appender(ProducerStateManager(d / "live"))
    play(live, before)
    rebuilt = Appender(ProducerStateManager(d / "rebuilt"))
    rebuilt.headers = list(live.headers)
    rebuilt.next_offset = live.next_offset
    rebuilt.mgr.restore_partition("t", 0, 0, live.next_offset, rebuilt.read_headers)
    assert play(rebuilt, after) == play(live, after)


@given(history, st.integers(0, 60))
def test_snapshot_plus_replayed_tail_equals_full_replay(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[int, int, int, int]],
    cut: int,
) -> None:
    d = tmp_path_factory.mktemp("s")
    live = Appender(ProducerStateManager(d))
    play(live, steps[:cut])
    live.mgr.write_snapshot({("t", 0): live.next_offset})
    play(live, steps[cut:])  # appended after the snapshot: must be replayed on open
    reopened = Appender(ProducerStateManager(d))
    assert not (d / "producer-state-snapshot.json").exists()
    reopened.headers, reopened.next_offset = list(live.headers), live.next_offset
    reopened.mgr.restore_partition("t", 0, 0, live.next_offset, reopened.read_headers)
    probe = [(p, 0, a, c) for p in range(4) for a in (0, 1) for c in (1, 2)]
    assert play(reopened, probe) == play(live, probe)


def test_duplicate_reports_the_original_log_append_time(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    mgr.record("t", 0, 1, 0, 0, 4, 10, 14, 123456, now_ms=1)
    assert mgr.check("t", 0, 1, 0, 0, 4) == Duplicate(10, 14, 123456)


# ---- end to end: retried batches over a real socket against the broker subprocess ----


def init_producer_id(conn: KafkaSocket, version: int = 4, txn: str | None = None) -> tuple[int, int, int]:
    r = conn.request(22, version, {"transactional_id": txn, "transaction_timeout_ms": 60000})
    return r.error_code, r.producer_id, r.producer_epoch


def idem_batch(pid: int, epoch: int, seq: int, n: int, tag: str = "") -> bytes:
    recs = [Record(0, BASE_TS + seq + i, f"{seq + i}".encode(), f"v{seq + i}{tag}".encode(), [])
            for i in range(n)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def send(conn: KafkaSocket, topic: str, batch: bytes, partition: int = 0) -> tuple[int, int]:
    return partition_errors(conn.request(0, 9, produce_body(topic, {partition: batch})))[(topic, partition)]


def test_broker_appends_a_retried_batch_once_and_enforces_sequences(
    broker: BrokerProcess,
) -> None:
    with KafkaSocket(broker.port) as c:
        c.request(19, 5, {"topics": [{"name": "idem", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}], "timeout_ms": 5000})
        err, pid, epoch = init_producer_id(c)
        assert (err, epoch) == (0, 0) and pid >= 0
        assert send(c, "idem", idem_batch(pid, 0, 0, 5)) == (0, 0)
        assert send(c, "idem", idem_batch(pid, 0, 5, 3)) == (0, 5)
        # The retry of either recent batch is answered with its original offset...
        assert send(c, "idem", idem_batch(pid, 0, 0, 5)) == (0, 0)
        assert send(c, "idem", idem_batch(pid, 0, 5, 3)) == (0, 5)
        # ...and nothing was appended twice.
        assert list_offset(c, "idem", 0, -1)[0] == 8
        assert send(c, "idem", idem_batch(pid, 0, 20, 1))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(c, "idem", idem_batch(pid, 1, 0, 2)) == (0, 8)  # epoch bump restarts at 0
        assert send(c, "idem", idem_batch(pid, 0, 8, 1))[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        # A producer id the broker never saw is accepted, as Kafka does since KIP-360.
        assert send(c, "idem", idem_batch(pid + 10_000, 0, 17, 1)) == (0, 10)
        assert list_offset(c, "idem", 0, -1)[0] == 11
        values = [r.value for r in fetch_all(c, "idem")]
        assert values == [f"v{i}".encode() for i in range(8)] + [b"v0", b"v1", b"v17"]


@pytest.mark.parametrize("how", ["graceful", "crash"])
def test_duplicates_are_still_recognised_after_a_restart(broker: BrokerProcess, how: str) -> None:
    with KafkaSocket(broker.port) as c:
        c.request(19, 5, {"topics": [{"name": "idem-rs", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}], "timeout_ms": 5000})
        _, pid, _ = init_producer_id(c)
        for seq in range(0, 12, 2):
            send(c, "idem-rs", idem_batch(pid, 0, seq, 2))
    bring_back(broker, how)
    with KafkaSocket(broker.port) as c:
        assert send(c, "idem-rs", idem_batch(pid, 0, 10, 2)) == (0, 10)
        assert send(c, "idem-rs", idem_batch(pid, 0, 4, 2)) == (0, 4)
        assert send(c, "idem-rs", idem_batch(pid, 0, 12, 2)) == (0, 12)
        assert list_offset(c, "idem-rs", 0, -1)[0] == 14
        _, pid2, _ = init_producer_id(c)
        assert pid2 > pid  # ids are never reused across restarts


def test_transactional_init_gets_an_id_and_idempotent_init_at_every_version(
    broker: BrokerProcess,
) -> None:
    with KafkaSocket(broker.port) as c:
        pids = []
        for v in range(5):
            err, pid, epoch = init_producer_id(c, v)
            assert (err, epoch) == (0, 0)
            pids.append(pid)
        assert len(set(pids)) == 5
        # KIP-360 fields are for transactional ids: an idempotent re-init gets a fresh id.
        again = c.request(22, 3, {"transactional_id": None, "transaction_timeout_ms": 1,
                                  "producer_id": pids[0], "producer_epoch": 0})
        assert (again.error_code, again.producer_epoch) == (0, 0)
        assert again.producer_id not in pids
        err, txn_pid, txn_epoch = init_producer_id(c, 4, "tx")
        assert (err, txn_epoch) == (0, 0) and txn_pid not in pids
        assert init_producer_id(c, 1, "")[0] == ErrorCode.INVALID_REQUEST


def test_transactional_batch_outside_a_transaction_is_refused_and_not_appended(broker: BrokerProcess) -> None:
    with KafkaSocket(broker.port) as c:
        c.request(19, 5, {"topics": [{"name": "txn", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}], "timeout_ms": 5000})
        _, pid, _ = init_producer_id(c)
        recs = [Record(0, BASE_TS, None, b"t", [])]
        batch = build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=0,
                            is_transactional=True)
        assert send(c, "txn", batch)[0] == ErrorCode.INVALID_TXN_STATE
        assert list_offset(c, "txn", 0, -1)[0] == 0
        assert send(c, "txn", idem_batch(pid, 0, 0, 1)) == (0, 0)


class LossyProxy:
    """A TCP proxy that loses the broker's answer to every ``every``-th Produce request.

    The broker has appended the batch, the client never hears so and retries it on a new
    connection: exactly the failure idempotence exists for. Real sockets, real broker.
    """

    def __init__(
        self, target_port: int, every: int, on_drop: Callable[[], None] | None = None
    ) -> None:
        self.target_port = target_port
        self.every = every
        self.on_drop = on_drop
        self.produces = 0
        self.dropped = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.stopped = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            produce_ids: set[int] = set()
            threading.Thread(target=self._requests, args=(client, upstream, produce_ids), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, produce_ids), daemon=True).start()

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        """shutdown() wakes the other pump's blocked recv and sends the FIN; close() alone does not."""
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _requests(self, src: socket.socket, dst: socket.socket, produce_ids: set[int]) -> None:
        for f in split_frames(src):
            api_key, _v, cid = struct.unpack_from(">hhi", f, 4)
            if api_key == 0:
                produce_ids.add(cid)
            try:
                dst.sendall(f)
            except OSError:
                break
        self._shut(src, dst)

    def _responses(self, src: socket.socket, dst: socket.socket, produce_ids: set[int]) -> None:
        for f in split_frames(src):
            (cid,) = struct.unpack_from(">i", f, 4)
            if cid in produce_ids:
                with self.lock:
                    self.produces += 1
                    drop = self.produces % self.every == 0
                    self.dropped += drop
                if drop:
                    if self.on_drop is not None:
                        self.on_drop()
                    break  # appended by the broker, never acknowledged to the client
            try:
                dst.sendall(f)
            except OSError:
                break
        self._shut(src, dst)


@pytest.fixture
def lossy(broker_factory) -> Iterator[tuple[BrokerProcess, LossyProxy]]:  # type: ignore[no-untyped-def]
    """A broker that tells clients to connect through a proxy losing some produce acks."""
    port = free_port_number()
    b = broker_factory(overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    b.stop()
    proxy = LossyProxy(b.port, every=7)
    b.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    b.start()
    yield b, proxy
    proxy.close()


def read_values(b: BrokerProcess, topic: str) -> list[int]:
    with KafkaSocket(b.port) as c:
        return [int(r.value or b"") for r in fetch_all(c, topic)]


def send_numbers_idempotently(
    port: int, topic: str, n: int, *, batch: int, poll_every: int, reconnect_max_ms: int, flush_s: float
) -> None:
    """Send the values 0..n-1 to partition 0 through an idempotent librdkafka producer on
    127.0.0.1:port, with fast retries; asserts every one was delivered without error."""
    from confluent_kafka import Producer

    p = Producer({
        "bootstrap.servers": f"127.0.0.1:{port}", "enable.idempotence": True,
        "linger.ms": 1, "batch.num.messages": batch, "retry.backoff.ms": 20,
        "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": reconnect_max_ms,
    })
    errors: list[object] = []
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=0,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        if i % poll_every == 0:
            p.poll(0.01)  # let batches go out one by one so some of their acks get lost
    assert p.flush(flush_s) == 0
    assert errors == []


def test_librdkafka_retries_after_lost_acks_are_appended_once(
    lossy: tuple[BrokerProcess, LossyProxy],
) -> None:
    b, proxy = lossy
    n = 3000
    send_numbers_idempotently(proxy.port, "lossy", n, batch=50, poll_every=100,
                              reconnect_max_ms=50, flush_s=60)
    assert proxy.dropped >= 3  # retries really happened
    assert read_values(b, "lossy") == list(range(n))


def test_kafka_python_default_producer_retries_after_lost_acks_are_appended_once(
    lossy: tuple[BrokerProcess, LossyProxy],
) -> None:
    from kafka import KafkaProducer

    b, proxy = lossy
    n = 1500
    p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", linger_ms=1, batch_size=400,
                      retry_backoff_ms=20, reconnect_backoff_ms=10, request_timeout_ms=10_000)
    try:
        futures = []
        for i in range(n):
            futures.append(p.send("lossy-kp", value=str(i).encode(), partition=0))
            if i % 50 == 0:
                p.flush(30)
        p.flush(60)
        offsets = [f.get(30).offset for f in futures]
    finally:
        p.close(timeout=10)
    assert offsets == list(range(n))
    assert proxy.dropped >= 3
    assert read_values(b, "lossy-kp") == list(range(n))


def test_retries_after_lost_acks_and_a_broker_crash_are_recognised_by_the_rebuilt_state(
    broker_factory,  # type: ignore[no-untyped-def]
) -> None:
    """The ack is lost and the broker is SIGKILLed before the client retries: only the
    producer state rebuilt from the log on restart can tell the retry is a duplicate."""
    port = free_port_number()
    b = broker_factory(overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    b.stop()
    crashes = 0

    def crash() -> None:
        nonlocal crashes
        crashes += 1
        b.kill()
        b.start()

    proxy = LossyProxy(b.port, every=20, on_drop=crash)
    b.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    b.start()
    try:
        n = 2000
        send_numbers_idempotently(proxy.port, "crashy", n, batch=40, poll_every=80,
                                  reconnect_max_ms=100, flush_s=90)
        assert crashes >= 1
        assert read_values(b, "crashy") == list(range(n))
    finally:
        proxy.close()


def test_retry_on_a_log_append_time_topic_reports_the_original_append_time(
    broker: BrokerProcess,
) -> None:
    with KafkaSocket(broker.port) as c:
        c.request(19, 5, {"topics": [{"name": "lat-idem", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": [
                                          {"name": "message.timestamp.type", "value": "LogAppendTime"}]}],
                          "timeout_ms": 5000})
        _, pid, _ = init_producer_id(c)
        batch = idem_batch(pid, 0, 0, 3)

        def produce_once() -> tuple[int, int, int]:
            resp = c.request(0, 9, produce_body("lat-idem", {0: batch}))
            p = resp.responses[0].partition_responses[0]
            return p.error_code, p.base_offset, p.log_append_time_ms

        first = produce_once()
        assert first[0] == 0 and first[2] > 0
        time.sleep(0.05)
        assert produce_once() == first
        assert [r.timestamp for r in fetch_all(c, "lat-idem")] == [first[2]] * 3


def test_aborted_transactions_below_a_new_log_start_are_forgotten(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    txn = BatchHeader(0, 0, 0, 2, 0, 0x10, 1, 0, 0, 5, 0, 0, 2)
    mgr.record_batch("t", 0, txn, 10, -1, now_ms=0)  # offsets 10-11
    assert mgr.last_stable_offset("t", 0, 12) == 10
    aborted = mgr.complete_txn("t", 0, 5, 0, False, 12, now_ms=0)
    assert aborted is not None and (aborted.first_offset, aborted.last_offset) == (10, 12)
    assert mgr.last_stable_offset("t", 0, 13) == 13
    assert mgr.aborted_transactions("t", 0, 0, 13) == [aborted]
    mgr.on_log_start_moved("t", 0, 12)
    assert mgr.aborted_transactions("t", 0, 0, 13) == [aborted]  # the marker is still there
    mgr.on_log_start_moved("t", 0, 13)
    assert mgr.aborted_transactions("t", 0, 0, 13) == []
