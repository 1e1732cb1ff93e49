"""Bad input: the broker answers with Kafka's error or drops only that connection, logs
why, keeps serving everyone else, and never loses what it acknowledged.

One broker serves the whole module (auto-create off, a 1 MiB request limit). Before
the first test it acknowledges a ledger of records; after every test a connection
opened at the start must still work and the ledger must read back byte-exact.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import event, given, settings
from hypothesis import strategies as st

from protocol.api import encode_request
from storage.records import Record, build_batch
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    BASE_TS,
    fetch_all,
    list_offset,
    partition_errors,
    produce_body,
    running_broker,
)
from tests.helpers.kafka_socket import KafkaSocket, size_prefixed

LEDGER_TOPIC = "acknowledged-ledger"  # never the target of a fuzzed frame (see FUZZ_TOPIC)
FUZZ_TOPIC = "fz"  # a byte flip or truncation cannot turn this name into LEDGER_TOPIC
SMALL_TOPIC = "small-batches"  # max.message.bytes=2000
REQUEST_MAX = 1 << 20
CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TIMESTAMP, UNSUPPORTED_VERSION = 2, 3, 32, 35
MESSAGE_TOO_LARGE, INVALID_REQUIRED_ACKS, INVALID_RECORD = 10, 21, 87
OUT_OF_ORDER_SEQUENCE_NUMBER, KAFKA_STORAGE_ERROR = 45, 56


def rec(i: int, ts: int) -> Record:
    return Record(0, ts, f"k{i}".encode(), f"value-{i}".encode() * (i % 4), [("h", bytes([i % 256]))])


class State:
    broker: BrokerProcess
    witness: KafkaSocket
    ledger: dict[int, list[Record]]


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[State]:
    overrides = {"auto.create.topics.enable": "false", "socket.request.max.bytes": str(REQUEST_MAX)}
    with running_broker(tmp_path_factory, "bad-input", overrides) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for name in (LEDGER_TOPIC, FUZZ_TOPIC):
            admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[name].result(15)
        small = NewTopic(SMALL_TOPIC, num_partitions=1, replication_factor=1,
                         config={"max.message.bytes": "2000"})
        admin.create_topics([small])[SMALL_TOPIC].result(15)
        s = State()
        s.broker = b
        s.ledger = {0: [], 1: []}
        with KafkaSocket(b.port) as conn:
            for round_ in range(3):
                for p in (0, 1):
                    recs = [rec(i, BASE_TS + (i * 37) % 500) for i in range(round_ * 10, round_ * 10 + 10)]
                    batch = build_batch(recs, compression=round_ % 2)
                    errs = partition_errors(conn.request(0, 9, produce_body(LEDGER_TOPIC, {p: batch})))
                    assert errs[(LEDGER_TOPIC, p)] == (0, len(s.ledger[p]))
                    s.ledger[p] += recs
        s.witness = KafkaSocket(b.port)
        yield s
        s.witness.close()


@pytest.fixture(autouse=True)
def nothing_lost(state: State) -> Iterator[None]:
    """After each test: the broker lives, the witness connection works, the ledger is intact."""
    yield
    b = state.broker
    assert b.proc is not None and b.proc.poll() is None, b.log()[-3000:]
    resp = state.witness.request(18, 3, {"client_software_name": "w", "client_software_version": "1"})
    assert resp.error_code == 0
    for p, expected in state.ledger.items():
        got = fetch_all(state.witness, LEDGER_TOPIC, p)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
            (i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(expected)
        ]


def api_versions_frame(cid: int = 1) -> bytes:
    return encode_request(18, 3, cid, "t", {"client_software_name": "t", "client_software_version": "1"})


def log_has(b: BrokerProcess, *needles: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = b.log()
        if all(n in text for n in needles):
            return True
        time.sleep(0.05)
    return False


# ---- framing ----------------------------------------------------------------------


def test_negative_size_closes_the_connection_and_says_why(state: State) -> None:
    with KafkaSocket(state.broker.port) as c:
        c.send(struct.pack(">i", -5) + b"xxxx")
        assert c.outcome() == "closed"
    assert log_has(state.broker, "request size -5")


def test_oversized_frame_is_refused_before_its_body_arrives(state: State) -> None:
    with KafkaSocket(state.broker.port) as c:
        c.send(struct.pack(">i", REQUEST_MAX + 1) + b"\x00" * 100)
        assert c.outcome() == "closed"
    assert log_has(state.broker, f"request size {REQUEST_MAX + 1}", "socket.request.max.bytes")


def test_frame_too_short_for_a_header_closes_the_connection(state: State) -> None:
    with KafkaSocket(state.broker.port) as c:
        c.send(size_prefixed(b"\x00\x12\x00"))
        assert c.outcome() == "closed"
    assert log_has(state.broker, "too short for a request header")


def test_a_frame_split_across_writes_is_reassembled(state: State) -> None:
    f = api_versions_frame(7)
    with KafkaSocket(state.broker.port) as c:
        c.send(f[:3])
        time.sleep(0.05)
        c.send(f[3:11])
        assert c.outcome(0.3) == "pending"  # waits for the rest, as Kafka does
        c.send(f[11:])
        (cid,) = struct.unpack(">i", c.read_frame()[:4])
        assert cid == 7


def test_truncated_frame_then_disconnect_harms_no_one(state: State) -> None:
    f = api_versions_frame()
    with KafkaSocket(state.broker.port) as c:
        c.send(f[: len(f) // 2])
    with KafkaSocket(state.broker.port) as c:
        c.send(f)
        assert len(c.read_frame()) > 4


# ---- unknown APIs and versions --------------------------------------------------------


def test_unknown_api_key_closes_the_connection_and_logs_it(state: State) -> None:
    with KafkaSocket(state.broker.port) as c:
        c.send(size_prefixed(struct.pack(">hhih", 999, 0, 1, -1)))
        assert c.outcome() == "closed"
    assert log_has(state.broker, "unsupported API key 999")


def test_unknown_version_closes_the_connection_and_logs_it(state: State) -> None:
    with KafkaSocket(state.broker.port) as c:
        c.send(size_prefixed(struct.pack(">hhih", 0, 99, 1, -1) + b"\x00" * 20))
        assert c.outcome() == "closed"
    assert log_has(state.broker, "unsupported version 99")


def test_unknown_api_versions_version_gets_error_35_in_a_v0_body(state: State) -> None:
    with KafkaSocket(state.broker.port) as c:
        c.send(size_prefixed(struct.pack(">hhih", 18, 77, 5, -1) + b"garbage"))
        body = c.read_frame()
        cid, error, n = struct.unpack_from(">ihi", body)
        assert (cid, error) == (5, UNSUPPORTED_VERSION)
        entries = [struct.unpack_from(">hhh", body, 10 + 6 * i) for i in range(n)]
        assert (18, 0) == entries[0][:2] and entries[0][2] >= 3
        assert len(body) == 10 + 6 * n  # v0 has no throttle time and no tagged fields


# ---- produce-level rejections ---------------------------------------------------------


def test_corrupt_crc_is_corrupt_message_and_other_partitions_append(state: State) -> None:
    good = build_batch([rec(1, BASE_TS)])
    bad = bytearray(build_batch([rec(2, BASE_TS), rec(3, BASE_TS)]))
    bad[-1] ^= 0xFF
    with KafkaSocket(state.broker.port) as c:
        before = list_offset(c, FUZZ_TOPIC, 0, -1)[0]
        errs = partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {0: bytes(bad), 1: good})))
        assert errs[(FUZZ_TOPIC, 0)][0] == CORRUPT_MESSAGE
        assert errs[(FUZZ_TOPIC, 1)][0] == 0
        assert list_offset(c, FUZZ_TOPIC, 0, -1)[0] == before


def test_future_timestamp_rejects_the_whole_partition_batch_only(state: State) -> None:
    now = int(time.time() * 1000)
    late = build_batch([rec(1, now), rec(2, now + 2 * 3_600_000), rec(3, now)])
    ok = build_batch([rec(4, now)])
    with KafkaSocket(state.broker.port) as c:
        before = list_offset(c, FUZZ_TOPIC, 0, -1)[0]
        resp = c.request(0, 9, produce_body(FUZZ_TOPIC, {0: late, 1: ok}))
        errs = partition_errors(resp)
        assert errs[(FUZZ_TOPIC, 0)] == (INVALID_TIMESTAMP, -1)
        assert errs[(FUZZ_TOPIC, 1)][0] == 0
        p0 = next(p for p in resp.responses[0].partition_responses if p.index == 0)
        assert [e.batch_index for e in p0.record_errors] == [1]
        assert list_offset(c, FUZZ_TOPIC, 0, -1)[0] == before


def test_produce_to_unknown_topic_without_auto_create_is_error_3(state: State) -> None:
    with KafkaSocket(state.broker.port) as c:
        errs = partition_errors(c.request(0, 9, produce_body("no-such-topic", {0: build_batch([rec(0, BASE_TS)])})))
        assert errs[("no-such-topic", 0)][0] == UNKNOWN_TOPIC_OR_PARTITION
        errs = partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {7: build_batch([rec(0, BASE_TS)])})))
        assert errs[(FUZZ_TOPIC, 7)][0] == UNKNOWN_TOPIC_OR_PARTITION
        md = c.request(3, 12, {"topics": [{"name": "no-such-topic"}], "allow_auto_topic_creation": True})
        assert md.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_batch_over_max_message_bytes_is_message_too_large(state: State) -> None:
    big = build_batch([Record(0, BASE_TS, None, b"x" * 3000, [])])
    fits = build_batch([Record(0, BASE_TS, None, b"x" * 1000, [])])
    with KafkaSocket(state.broker.port) as c:
        assert partition_errors(c.request(0, 9, produce_body(SMALL_TOPIC, {0: big})))[
            (SMALL_TOPIC, 0)][0] == MESSAGE_TOO_LARGE
        assert partition_errors(c.request(0, 9, produce_body(SMALL_TOPIC, {0: fits})))[
            (SMALL_TOPIC, 0)] == (0, 0)
        assert list_offset(c, SMALL_TOPIC, 0, -1)[0] == 1


def test_invalid_acks_and_malformed_record_sets_are_refused(state: State) -> None:
    one = build_batch([rec(1, BASE_TS)])
    with KafkaSocket(state.broker.port) as c:
        before = list_offset(c, FUZZ_TOPIC, 0, -1)[0]
        errs = partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {0: one}, acks=2)))
        assert errs[(FUZZ_TOPIC, 0)][0] == INVALID_REQUIRED_ACKS
        # Kafka takes exactly one batch per partition per request.
        errs = partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {0: one + one})))
        assert errs[(FUZZ_TOPIC, 0)][0] == INVALID_RECORD
        # A client batch must start at offset 0.
        shifted = bytearray(one)
        shifted[0:8] = (5).to_bytes(8, "big")
        errs = partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {0: bytes(shifted)})))
        assert errs[(FUZZ_TOPIC, 0)][0] == INVALID_RECORD
        assert list_offset(c, FUZZ_TOPIC, 0, -1)[0] == before


def test_payloads_that_are_not_one_v2_batch_are_invalid_record(state: State) -> None:
    """Kafka answers 87 (not the retriable 2) for magic 0/1 message sets and scraps."""
    magic1 = bytearray(build_batch([rec(1, BASE_TS)]))
    magic1[16] = 1
    with KafkaSocket(state.broker.port) as c:
        before = list_offset(c, FUZZ_TOPIC, 0, -1)[0]
        for payload in (bytes(magic1), b"\x00" * 20):
            errs = partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {0: payload})))
            assert errs[(FUZZ_TOPIC, 0)][0] == INVALID_RECORD
        assert list_offset(c, FUZZ_TOPIC, 0, -1)[0] == before


def test_a_damaged_idempotent_batch_is_corrupt_message_not_a_sequence_error(
        state: State) -> None:
    """Records are validated before producer state, as in Kafka: a flipped byte in a
    batch whose sequence would also be out of order is CORRUPT_MESSAGE (retriable)."""
    with KafkaSocket(state.broker.port) as c:
        pid = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                "producer_id": -1, "producer_epoch": -1}).producer_id
        first = build_batch([rec(1, BASE_TS)], producer_id=pid, producer_epoch=0, base_sequence=0)
        assert partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {1: first})))[
            (FUZZ_TOPIC, 1)][0] == 0
        gap = bytearray(build_batch([rec(2, BASE_TS)], producer_id=pid, producer_epoch=0,
                                    base_sequence=7))
        gap[-1] ^= 0x01
        before = list_offset(c, FUZZ_TOPIC, 1, -1)[0]
        errs = partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {1: bytes(gap)})))
        assert errs[(FUZZ_TOPIC, 1)][0] == CORRUPT_MESSAGE
        # Undamaged, the same gap is the sequence error.
        gap[-1] ^= 0x01
        errs = partition_errors(c.request(0, 9, produce_body(FUZZ_TOPIC, {1: bytes(gap)})))
        assert errs[(FUZZ_TOPIC, 1)][0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert list_offset(c, FUZZ_TOPIC, 1, -1)[0] == before


def test_a_failed_auto_create_fails_only_its_topic(broker: BrokerProcess) -> None:
    """An I/O error creating a topic's directory (here: a file already in its place)
    is KAFKA_STORAGE_ERROR for that topic; partitions appended in the same request
    keep their acknowledgement, so a client never retries data that was written."""
    with KafkaSocket(broker.port) as c:
        ok = partition_errors(c.request(0, 9, produce_body("kept", {0: build_batch([rec(0, BASE_TS)])})))
        assert ok[("kept", 0)] == (0, 0)
        (broker.data_dir / "blocked-0").write_text("not a directory")
        body = produce_body("kept", {0: build_batch([rec(1, BASE_TS)])})
        body["topic_data"] += produce_body("blocked", {0: build_batch([rec(2, BASE_TS)])})["topic_data"]
        errs = partition_errors(c.request(0, 9, body))
        assert errs[("kept", 0)] == (0, 1)
        assert errs[("blocked", 0)][0] == KAFKA_STORAGE_ERROR
        assert list_offset(c, "kept", 0, -1)[0] == 2


# ---- fuzzing ------------------------------------------------------------------------


def seed_frames() -> list[bytes]:
    """Valid requests of every API we serve, aimed away from the ledger topic."""
    batch = build_batch([Record(0, BASE_TS + i, None, b"v" * i, []) for i in range(3)])
    reqs: list[tuple[int, int, dict[str, object]]] = [
        (18, 3, {"client_software_name": "f", "client_software_version": "1"}),
        (18, 0, {}),
        (3, 12, {"topics": [{"name": FUZZ_TOPIC}], "allow_auto_topic_creation": False}),
        (3, 0, {"topics": []}),
        (0, 9, produce_body(FUZZ_TOPIC, {0: batch})),
        (0, 3, produce_body(FUZZ_TOPIC, {1: batch})),
        (1, 12, {"max_wait_ms": 0, "min_bytes": 0, "topics": [{"topic": FUZZ_TOPIC, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16}]}]}),
        (1, 4, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [{"topic": FUZZ_TOPIC, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16}]}]}),
        (2, 7, {"replica_id": -1, "topics": [{"name": FUZZ_TOPIC, "partitions": [
            {"partition_index": 0, "timestamp": BASE_TS}]}]}),
        (2, 0, {"replica_id": -1, "topics": [{"name": FUZZ_TOPIC, "partitions": [
            {"partition_index": 0, "timestamp": -1, "max_num_offsets": 3}]}]}),
        (8, 8, {"group_id": "fg", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": FUZZ_TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 3,
                                                 "committed_metadata": "m"}]}]}),
        (9, 8, {"groups": [{"group_id": "fg", "topics": None}]}),
        (9, 1, {"group_id": "fg", "topics": [{"name": FUZZ_TOPIC, "partition_indexes": [0, 1]}]}),
        (10, 4, {"key_type": 0, "coordinator_keys": ["fg", "other"]}),
        (10, 0, {"key": "fg"}),
        (22, 4, {"transactional_id": None, "transaction_timeout_ms": 1000}),
        (19, 7, {"topics": [{"name": "fz-new", "num_partitions": 1, "replication_factor": 1,
                             "assignments": [], "configs": []}], "timeout_ms": 1000}),
    ]
    return [encode_request(k, v, 11, "fuzz", body) for k, v, body in reqs]


SEEDS = seed_frames()


def send_and_observe(state: State, data: bytes) -> str:
    """Send one frame on a fresh connection and check the broker's reaction is legitimate.

    - answered: the response carries the correlation id of the request;
    - closed: the broker logged why it closed this very connection;
    - pending: only a Fetch (long poll) or a Produce (acks=0 has no response) may wait.
    """
    with KafkaSocket(state.broker.port) as c:
        port = c.sock.getsockname()[1]
        api_key = struct.unpack_from(">h", data, 4)[0] if len(data) >= 6 else None
        try:
            c.send(data)
            outcome = c.outcome(0.3)
            if outcome == "pending" and api_key not in (0, 1):
                outcome = c.outcome(5.0)  # a loaded machine, not a hang: give it time
        except (BrokenPipeError, ConnectionResetError):
            outcome = "closed"
        if outcome == "answered":
            c.sock.settimeout(5)
            response = c.read_frame_after_partial()
            assert response[:4] == data[8:12], "response to another correlation id"
    if outcome == "closed":
        assert log_has(state.broker, f"closing connection from 127.0.0.1:{port}:"), (
            "connection closed without a log line saying why"
        )
    elif outcome == "pending":
        assert api_key in (0, 1), f"API {api_key} left a complete request unanswered"
    return outcome


@settings(max_examples=40)
@given(payload=st.binary(min_size=0, max_size=300))
def test_random_frames_are_answered_or_dropped(state: State, payload: bytes) -> None:
    event(send_and_observe(state, size_prefixed(payload)))


@settings(max_examples=60)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=4),
    cut=st.one_of(st.none(), st.integers(8, 10_000)),
)
def test_corrupted_and_truncated_valid_frames_are_answered_or_dropped(
    state: State, seed: int, flips: list[tuple[int, int]], cut: int | None
) -> None:
    body = bytearray(SEEDS[seed][4:])
    for pos, x in flips:
        # Bytes 0-3 are the API key and version: flipping them is the other test's job.
        body[4 + pos % (len(body) - 4)] ^= x
    if cut is not None:
        body = body[: 8 + cut % (len(body) - 7)]
    event(send_and_observe(state, size_prefixed(bytes(body))))


def test_every_closed_connection_was_logged_with_a_reason(state: State) -> None:
    """Drive a few known-bad frames, then check one log line per close with its cause."""
    before = state.broker.log().count("closing connection")
    for data in (size_prefixed(b"\x00"), size_prefixed(struct.pack(">hhih", 4242, 0, 1, -1)), struct.pack(">i", -1)):
        assert send_and_observe(state, data) == "closed"
    deadline = time.monotonic() + 5
    while state.broker.log().count("closing connection") < before + 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state.broker.log().count("closing connection") >= before + 3


def test_acknowledged_data_survives_a_crash_after_the_abuse(state: State) -> None:
    state.witness.close()
    state.broker.kill()
    state.broker.start()
    state.witness = KafkaSocket(state.broker.port)
