"""Chronolog against the real Apache Kafka 4.1, request by request (issue #27, item 2).

Hypothesis writes a program of requests: topics with configs (CreateTime and
LogAppendTime, segment and timestamp-bound settings), produce with out-of-order, future
and out-of-bounds timestamps (plain, idempotent with duplicate and gapped sequences,
transactional with commit and abort), ListOffsets with every special value and chosen
times at every version that may carry them, Fetch from any offset at both isolation
levels, DeleteRecords, IncrementalAlterConfigs and DescribeConfigs, FindCoordinator,
JoinGroup/SyncGroup, OffsetCommit and OffsetFetch. Each request is sent at an explicit
version, as the same bytes, to Chronolog and to the Kafka node; the decoded answers,
normalised by the one table of intended differences (``differential.INTENDED``),
must be equal field by field.

``make test`` runs a few programs against one Kafka node (CHRONOLOG_DIFF_EXAMPLES, 4);
``make test-ecosystem`` (``ecosystem_full``) runs many more (CHRONOLOG_DIFF_FULL_EXAMPLES,
60). To explore, CHRONOLOG_DIFF_COLLECT=FILE appends every difference of every program to
FILE (and the programs to FILE.programs) instead of failing: nothing else uses it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.records import Record, build_batch
from tests.conftest import BrokerProcess
from tests.ecosystem.differential import Clock, Pair, Side
from tests.ecosystem.kafka_peer import KafkaNode

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, CREATE_TOPICS, DELETE_RECORDS = 10, 11, 14, 19, 21
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 22, 24, 26
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
TOPIC_RESOURCE = 2
INVALID_CONFIG = 40
SMALL_SEGMENT = 1 << 20  # Kafka 4's segment.bytes minimum

# CreateTimes of generated records: far from the run's clock window, so a time the
# broker assigned (LogAppendTime, markers) can never be mistaken for one of them.
BASE = 1_600_000_000_000
HOUR = 3_600_000

# ListOffsets: the lowest version that may carry each special value (Kafka's client rule).
SPECIAL = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9}

TOPIC_CONFIGS = {
    "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
    "segment.bytes": st.sampled_from(["1000", "1048576", "2000000"]),
    "segment.ms": st.sampled_from(["60000", "604800000"]),
    "segment.index.bytes": st.sampled_from(["4096", "10485760"]),
    "index.interval.bytes": st.sampled_from(["100", "4096"]),
    "message.timestamp.after.max.ms": st.sampled_from(["60000", "3600000", "86400000"]),
    "message.timestamp.before.max.ms": st.sampled_from(["60000", "9223372036854775807"]),
    # Never the 7-day default: generated CreateTimes are from 2020, and each broker's
    # retention check would delete them on its own schedule.
    "retention.ms": st.sampled_from(["-1", "315360000000"]),
    "cleanup.policy": st.sampled_from(["delete"]),
}


@dataclass
class Model:
    """What the program has created so far (the same on both brokers when they agree)."""

    topics: dict[str, int] = field(default_factory=dict)  # name -> partitions
    written: dict[tuple[str, int], int] = field(default_factory=dict)  # offsets used, about
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)  # after DeleteRecords
    stamps: list[int] = field(default_factory=list)
    prefix: str = ""
    n: int = 0


@dataclass
class Run:
    pair: Pair
    model: Model
    differences: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def check(self, what: str, key: int, version: int,
              body: dict[str, Any] | Callable[[Side], dict[str, Any]], **kw: Any) -> tuple[Any, Any]:
        c, k, found = self.pair.compare(key, version, body, **kw)
        self.log.append(f"{what} v{version}")
        self.differences += [f"{what} v{version}: {d}" for d in found]
        return c, k


@pytest.fixture(scope="module")
def pair(chronolog: BrokerProcess, kafka_node: KafkaNode) -> Iterator[Pair]:
    p = Pair(chronolog.port, kafka_node.port)
    # Kafka creates __consumer_offsets and __transaction_state on the first
    # FindCoordinator; wait for both here, outside any comparison.
    for key_type, key in ((0, "warm-up"), (1, "warm-up")):
        p.ask(FIND_COORDINATOR, 3, {"key": key, "key_type": key_type}, settle=60)
    yield p
    p.close()


def _uniq(model: Model, kind: str) -> str:
    model.n += 1
    return f"{model.prefix}-{kind}{model.n}"


def _wait_topic_on_kafka(pair: Pair, name: str, partitions: int) -> None:
    """Kafka serves a new topic once its metadata log reaches the broker (a moment later)."""
    kafka = pair.sides[1]
    body = {"replica_id": -1, "isolation_level": 0, "timeout_ms": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "current_leader_epoch": -1,
                                       "timestamp": -1} for i in range(partitions)]}]}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        r = kafka.call(LIST_OFFSETS, 7, body)
        if all(p.error_code == 0 for t in r.topics for p in t.partitions):
            return
        time.sleep(0.05)
    raise AssertionError(f"Kafka did not serve {name} within 15 s")


def _wait_config_on_kafka(pair: Pair, topic: str) -> None:
    """Kafka applies a config change when its metadata log reaches the broker: ask until
    Kafka describes the topic as Chronolog does (bounded; a real difference stays)."""
    body = {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic,
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}
    deadline = time.monotonic() + 3
    want = {c.name: c.value for c in pair.sides[0].call(DESCRIBE_CONFIGS, 4, body).results[0].configs}
    while time.monotonic() < deadline:
        got = {c.name: c.value for c in pair.sides[1].call(DESCRIBE_CONFIGS, 4, body).results[0].configs}
        if all(got.get(k) == v for k, v in want.items()):
            return
        time.sleep(0.05)


def _ends(side: Side, partitions: set[tuple[str, int]], isolation: int) -> dict[tuple[str, int], int]:
    topics: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        topics.setdefault(t, []).append(p)
    resp = side.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation, "timeout_ms": 0,
                                       "topics": [{"name": t, "partitions": [
                                           {"partition_index": p, "current_leader_epoch": -1,
                                            "timestamp": -1} for p in ps]} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.offset for t in resp.topics for p in t.partitions}


def _wait_markers(pair: Pair, before: list[dict[tuple[str, int], int]]) -> None:
    """Kafka writes transaction markers after EndTxn answers: wait until every partition
    of the transaction has its marker (its end moved past where it was before EndTxn)
    and the last stable offset reached the end, on both brokers."""
    for side, ends in zip(pair.sides, before, strict=True):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            hw, lso = _ends(side, set(ends), 0), _ends(side, set(ends), 1)
            if all(hw[tp] > end for tp, end in ends.items()) and hw == lso:
                break
            time.sleep(0.05)


# --- the steps -------------------------------------------------------------------


def step_create_topic(run: Run, data: st.DataObject) -> None:
    m = run.model
    name = _uniq(m, "t")
    partitions = data.draw(st.integers(1, 2), "partitions")
    configs = data.draw(st.dictionaries(st.sampled_from(sorted(TOPIC_CONFIGS)), st.just(""), max_size=4))
    configs = {k: data.draw(TOPIC_CONFIGS[k], k) for k in configs}
    configs.setdefault("retention.ms", "-1")  # see TOPIC_CONFIGS
    version = data.draw(st.integers(2, 7), "CreateTopics version")
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": [{"name": n, "value": v} for n, v in configs.items()]}],
            "timeout_ms": 10000, "validate_only": False}
    if int(configs.get("segment.bytes", SMALL_SEGMENT)) < SMALL_SEGMENT:
        # BEHAVIOUR["segment.bytes below 1 MiB"]: exactly this, and the topic is not used.
        c, k = run.pair.ask(CREATE_TOPICS, version, body)
        codes = (c["topics"][0]["error_code"], k["topics"][0]["error_code"])
        assert codes == (0, INVALID_CONFIG), (c, k)
        run.log.append(f"CreateTopics {configs} v{version}: the intended segment.bytes difference")
        return
    c, k = run.check(f"CreateTopics {configs}", CREATE_TOPICS, version, body)
    if c["topics"][0]["error_code"] == 0 and k["topics"][0]["error_code"] == 0:
        _wait_topic_on_kafka(run.pair, name, partitions)
        m.topics[name] = partitions
        for p in range(partitions):
            m.written[(name, p)] = 0


def _timestamps(data: st.DataObject, n: int) -> list[int]:
    now = int(time.time() * 1000)
    one = st.one_of(
        st.integers(BASE, BASE + 10_000),  # out of order, far in the past
        st.sampled_from([now + 10 * 60_000, now + 2 * HOUR, now + 2 * 24 * HOUR]),  # future
    )
    return data.draw(st.lists(one, min_size=n, max_size=n), "timestamps")


def _records(data: st.DataObject, model: Model, clock: Clock) -> list[Record]:
    n = data.draw(st.integers(1, 5), "records")
    stamps = _timestamps(data, n)
    model.stamps += stamps
    for ts in stamps:
        clock.produced(ts)
    return [Record(0, ts, None if i % 3 == 2 else f"k{i}".encode(), f"v{ts}".encode(),
                   [("h", b"x")] if i % 2 else []) for i, ts in enumerate(stamps)]


def _partition(data: st.DataObject, model: Model) -> tuple[str, int]:
    topic = data.draw(st.sampled_from(sorted(model.topics)), "topic")
    return topic, data.draw(st.integers(0, model.topics[topic] - 1), "partition")


def _produce_body(topic: str, partition: int, batch: bytes, acks: int,
                  txn: str | None = None) -> dict[str, Any]:
    return {"transactional_id": txn, "acks": acks, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}


def step_produce(run: Run, data: st.DataObject) -> None:
    m = run.model
    topic, partition = _partition(data, m)
    records = _records(data, m, run.pair.clock)
    codec = data.draw(st.sampled_from([0, 1, 3]), "codec")  # none, gzip, lz4
    batch = build_batch(records, compression=codec)
    version = data.draw(st.integers(3, 11), "Produce version")
    acks = data.draw(st.sampled_from([1, -1]), "acks")
    time.sleep(0.003)  # LogAppendTime: a new millisecond on both brokers
    c, k = run.check(f"Produce {topic}/{partition}", PRODUCE, version,
                     _produce_body(topic, partition, batch, acks))
    if c["responses"][0]["partition_responses"][0]["error_code"] == 0:
        m.written[(topic, partition)] += len(records)


@dataclass
class Idempotent:
    """One idempotent producer per broker: its own id, the same sequences."""

    ids: dict[str, tuple[int, int]] = field(default_factory=dict)
    next_seq: dict[tuple[str, int], int] = field(default_factory=dict)


def step_idempotent(run: Run, data: st.DataObject, state: dict[str, Any]) -> None:
    m = run.model
    prod: Idempotent | None = state.get("idempotent")
    if prod is None:
        prod = state["idempotent"] = Idempotent()
        version = data.draw(st.integers(0, 4), "InitProducerId version")
        c, k = run.check("InitProducerId (idempotent)", INIT_PRODUCER_ID, version, {
            "transactional_id": None, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        for side, resp in zip(run.pair.sides, run.pair.ask_last, strict=True):
            prod.ids[side.name] = (resp["producer_id"], resp["producer_epoch"])
    topic, partition = _partition(data, m)
    records = _records(data, m, run.pair.clock)
    expected = prod.next_seq.get((topic, partition), 0)
    how = data.draw(st.sampled_from(["next", "next", "duplicate", "gap"]), "sequence")
    seq = {"next": expected, "duplicate": max(0, expected - len(records)), "gap": expected + 7}[how]
    version = data.draw(st.integers(3, 11), "Produce version")

    def body(side: Side) -> dict[str, Any]:
        pid, epoch = prod.ids[side.name]
        batch = build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        return _produce_body(topic, partition, batch, -1)

    time.sleep(0.003)
    c, k = run.check(f"Produce idempotent {how} seq={seq} {topic}/{partition}", PRODUCE, version, body)
    if c["responses"][0]["partition_responses"][0]["error_code"] == 0 and how == "next":
        prod.next_seq[(topic, partition)] = seq + len(records)
        m.written[(topic, partition)] += len(records)


def step_transaction(run: Run, data: st.DataObject, state: dict[str, Any]) -> None:
    """A whole transaction: InitProducerId, AddPartitionsToTxn, produce, EndTxn."""
    m = run.model
    txn = state.setdefault("txn_id", _uniq(m, "txn"))
    run.check("FindCoordinator (txn)", FIND_COORDINATOR, data.draw(st.integers(1, 4), "FC version"),
              {"key": txn, "key_type": 1, "coordinator_keys": [txn]})
    c, k = run.check("InitProducerId (txn)", INIT_PRODUCER_ID, data.draw(st.integers(0, 4), "IPI version"),
                     {"transactional_id": txn, "transaction_timeout_ms": 60000,
                      "producer_id": -1, "producer_epoch": -1})
    ids = {s.name: (r["producer_id"], r["producer_epoch"]) for s, r in zip(run.pair.sides, run.pair.ask_last, strict=True)}
    targets = sorted({_partition(data, m) for _ in range(data.draw(st.integers(1, 2), "txn partitions"))})
    by_topic: dict[str, list[int]] = {}
    for t, p in targets:
        by_topic.setdefault(t, []).append(p)

    def add(side: Side) -> dict[str, Any]:
        pid, epoch = ids[side.name]
        return {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    run.check("AddPartitionsToTxn", ADD_PARTITIONS_TO_TXN, data.draw(st.integers(0, 3), "APT version"), add)
    seqs: dict[tuple[str, int], int] = state.setdefault("txn_seq", {})
    for t, p in targets:
        records = _records(data, m, run.pair.clock)
        seq = seqs.get((t, p), 0) if ids["chronolog"][1] == state.get("txn_epoch") else 0

        def body(side: Side, t: str = t, p: int = p, records: list[Record] = records,
                 seq: int = seq) -> dict[str, Any]:
            pid, epoch = ids[side.name]
            batch = build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                is_transactional=True)
            return _produce_body(t, p, batch, -1, txn)

        time.sleep(0.003)
        c, k = run.check(f"Produce transactional {t}/{p}", PRODUCE, data.draw(st.integers(3, 11), "PV"), body)
        if c["responses"][0]["partition_responses"][0]["error_code"] == 0:
            seqs[(t, p)] = seq + len(records)
            m.written[(t, p)] += len(records) + 1  # and the marker
    state["txn_epoch"] = ids["chronolog"][1]
    commit = data.draw(st.booleans(), "commit")

    def end(side: Side) -> dict[str, Any]:
        pid, epoch = ids[side.name]
        return {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch, "committed": commit}

    before = [_ends(side, set(targets), 0) for side in run.pair.sides]
    run.check(f"EndTxn commit={commit}", END_TXN, data.draw(st.integers(0, 3), "EndTxn version"), end)
    _wait_markers(run.pair, before)


def step_list_offsets(run: Run, data: st.DataObject) -> None:
    m = run.model
    topic, partition = _partition(data, m)
    known = m.stamps or [BASE]
    ts = data.draw(st.one_of(
        st.sampled_from(sorted(SPECIAL)),
        st.sampled_from(known),
        st.sampled_from(known).map(lambda t: t + 1),
        st.integers(BASE - 10, BASE + 10_010),
        st.integers(0, 2**62),
    ), "timestamp")
    lowest = SPECIAL.get(ts, 1)
    version = data.draw(st.integers(lowest, 10), "ListOffsets version")
    iso = data.draw(st.integers(0, 1), "isolation") if version >= 2 else 0
    what = f"ListOffsets ts={ts} iso={iso} {topic}/{partition}"
    body = {"replica_id": -1, "isolation_level": iso, "timeout_ms": 1000, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": ts, "max_num_offsets": 1}]}]}
    start = m.log_start.get((topic, partition), 0)
    if start > 0 and (ts >= 0 or ts == -3):
        # BEHAVIOUR["time lookups after DeleteRecords"]: Kafka may answer from deleted
        # records; where the answers differ, Kafka's must be that and Chronolog's a live one.
        c, k = run.pair.ask(LIST_OFFSETS, version, body)
        co, ko = (x["topics"][0]["partitions"][0]["offset"] for x in (c, k))
        if co != ko:
            assert ko < start and (co == -1 or co >= start), (what, start, c, k)
            run.log.append(f"{what} v{version}: Kafka {ko} below the log start {start}, Chronolog {co}")
            return
    run.check(what, LIST_OFFSETS, version, body)


def step_fetch(run: Run, data: st.DataObject) -> None:
    m = run.model
    topic, partition = _partition(data, m)
    end = m.written[(topic, partition)]
    offset = data.draw(st.integers(-1, end + 2), "fetch offset")
    version = data.draw(st.integers(4, 12), "Fetch version")
    iso = data.draw(st.integers(0, 1), "isolation")
    max_bytes = data.draw(st.sampled_from([1, 200, 1 << 20]), "partition_max_bytes")
    run.check(f"Fetch @{offset} iso={iso} max={max_bytes} {topic}/{partition}", FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": iso, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def step_delete_records(run: Run, data: st.DataObject) -> None:
    m = run.model
    topic, partition = _partition(data, m)
    end = m.written[(topic, partition)]
    offset = data.draw(st.one_of(st.integers(0, end + 1), st.just(-1)), "delete before")
    c, k = run.check(f"DeleteRecords before {offset} {topic}/{partition}", DELETE_RECORDS,
                     data.draw(st.integers(0, 2), "DeleteRecords version"), {
                         "topics": [{"name": topic, "partitions": [
                             {"partition_index": partition, "offset": offset}]}],
                         "timeout_ms": 10000})
    low = c["topics"][0]["partitions"][0]["low_watermark"]
    m.log_start[(topic, partition)] = max(m.log_start.get((topic, partition), 0), low)


def step_configs(run: Run, data: st.DataObject) -> None:
    m = run.model
    topic = data.draw(st.sampled_from(sorted(m.topics)), "topic")
    name = data.draw(st.sampled_from(sorted(TOPIC_CONFIGS)), "config")
    op = data.draw(st.sampled_from([0, 1]), "op")  # SET, DELETE
    if name == "retention.ms":
        op = 0  # deleting it would bring back the 7-day default (see TOPIC_CONFIGS)
    value = data.draw(TOPIC_CONFIGS[name], "value") if op == 0 else None
    if name == "segment.bytes" and value is not None and int(value) < SMALL_SEGMENT:
        value = str(SMALL_SEGMENT)  # BEHAVIOUR["segment.bytes below 1 MiB"]
    run.check(f"IncrementalAlterConfigs {name} op={op} {value}", INCREMENTAL_ALTER_CONFIGS,
              data.draw(st.integers(0, 1), "IAC version"), {
                  "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configs": [
                      {"name": name, "config_operation": op, "value": value}]}],
                  "validate_only": False})
    _wait_config_on_kafka(run.pair, topic)
    step_describe_configs(run, data, topic)


def step_describe_configs(run: Run, data: st.DataObject, topic: str | None = None) -> None:
    topic = topic or data.draw(st.sampled_from(sorted(run.model.topics)), "topic")
    version = data.draw(st.integers(1, 4), "DescribeConfigs version")
    keys = data.draw(st.one_of(st.none(), st.lists(st.sampled_from(sorted(TOPIC_CONFIGS)), max_size=3)), "keys")
    run.check(f"DescribeConfigs {topic} keys={keys}", DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": keys}],
        "include_synonyms": data.draw(st.booleans(), "synonyms"), "include_documentation": False})


def step_group(run: Run, data: st.DataObject, state: dict[str, Any]) -> None:
    """A group: FindCoordinator, a one-member join and sync, a commit and a fetch of it."""
    m = run.model
    group = _uniq(m, "g")
    topic, partition = _partition(data, m)
    run.check("FindCoordinator (group)", FIND_COORDINATOR, data.draw(st.integers(0, 4), "FC version"),
              {"key": group, "key_type": 0, "coordinator_keys": [group]})
    joined = data.draw(st.booleans(), "joined")
    member: dict[str, tuple[str, int]] = {s.name: ("", -1) for s in run.pair.sides}
    if joined:
        jv = data.draw(st.integers(4, 9), "JoinGroup version")

        def join(side: Side) -> dict[str, Any]:
            return {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
                    "member_id": member[side.name][0], "group_instance_id": None,
                    "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\x00\x01"}],
                    "reason": None}

        run.check("JoinGroup (first)", JOIN_GROUP, jv, join)
        for side, r in zip(run.pair.sides, run.pair.ask_last, strict=True):
            member[side.name] = (r["member_id"], -1)
        run.check("JoinGroup (with member id)", JOIN_GROUP, jv, join)
        for side, r in zip(run.pair.sides, run.pair.ask_last, strict=True):
            member[side.name] = (r["member_id"], r["generation_id"])

        def sync(side: Side) -> dict[str, Any]:
            mid, gen = member[side.name]
            return {"group_id": group, "generation_id": gen, "member_id": mid, "group_instance_id": None,
                    "protocol_type": "consumer", "protocol_name": "range",
                    "assignments": [{"member_id": mid, "assignment": b"\x00\x01\x02"}]}

        run.check("SyncGroup", SYNC_GROUP, data.draw(st.integers(0, 5), "SyncGroup version"), sync)
    offset = data.draw(st.integers(0, 100), "committed offset")
    cv = data.draw(st.integers(2, 9), "OffsetCommit version")

    def commit(side: Side) -> dict[str, Any]:
        mid, gen = member[side.name]
        return {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": mid,
                "group_instance_id": None, "retention_time_ms": -1, "topics": [
                    {"name": topic, "partitions": [{"partition_index": partition, "committed_offset": offset,
                                                    "committed_leader_epoch": -1,
                                                    "committed_metadata": "meta"}]}]}

    run.check(f"OffsetCommit joined={joined}", OFFSET_COMMIT, cv, commit)
    fv = data.draw(st.integers(1, 9), "OffsetFetch version")
    topics = [{"name": topic, "partition_indexes": [partition, partition + 5]}]

    def fetch(side: Side) -> dict[str, Any]:
        mid, _ = member[side.name]
        return {"group_id": group, "topics": topics, "require_stable": True, "groups": [
            {"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}]}

    run.check("OffsetFetch", OFFSET_FETCH, fv, fetch)


def step_metadata(run: Run, data: st.DataObject) -> None:
    topic = data.draw(st.sampled_from(sorted(run.model.topics)), "topic")
    run.check("Metadata", METADATA, data.draw(st.integers(1, 12), "Metadata version"), {
        "topics": [{"name": topic, "topic_id": bytes(16)}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})


STEPS = ["produce", "produce", "produce", "idempotent", "transaction", "list_offsets", "list_offsets",
         "list_offsets", "fetch", "fetch", "delete_records", "configs", "describe_configs", "group",
         "metadata", "create_topic"]


def run_program(pair: Pair, data: st.DataObject, steps: int) -> Run:
    run = Run(pair, Model(prefix=f"d{time.time_ns() % 10**10}"))
    state: dict[str, Any] = {}
    step_create_topic(run, data)
    while not run.model.topics:
        step_create_topic(run, data)
    for _ in range(steps):
        name = data.draw(st.sampled_from(STEPS), "step")
        fn = globals()[f"step_{name}"]
        if name in ("idempotent", "transaction", "group"):
            fn(run, data, state)
        else:
            fn(run, data)
    return run


EXAMPLES = int(os.environ.get("CHRONOLOG_DIFF_EXAMPLES", "4"))


def _check(pair: Pair, data: st.DataObject, steps: int) -> None:
    run = run_program(pair, data, steps)
    collect = os.environ.get("CHRONOLOG_DIFF_COLLECT")
    if collect:  # exploring: gather every difference of every program, fail nothing
        with open(collect, "a") as f:
            f.write("".join(d + "\n" for d in run.differences))
        if run.differences:
            with open(collect + ".programs", "a") as f:
                f.write("\n".join(["=== program", *run.log, *run.differences, ""]))
        return
    if run.differences:
        raise AssertionError("Chronolog and Kafka answered differently:\n" + "\n".join(run.differences)
                             + "\n\nprogram:\n" + "\n".join(run.log))


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_chronolog_answers_as_kafka_does(pair: Pair, data: st.DataObject) -> None:
    _check(pair, data, 12)


@pytest.mark.ecosystem_full
@settings(max_examples=int(os.environ.get("CHRONOLOG_DIFF_FULL_EXAMPLES", "60")), deadline=None,
          database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_chronolog_answers_as_kafka_does_in_long_programs(pair: Pair, data: st.DataObject) -> None:
    _check(pair, data, 40)
