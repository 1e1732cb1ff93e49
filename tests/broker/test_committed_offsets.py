"""Committed offsets: the durable store, and the OffsetCommit/OffsetFetch/FindCoordinator
APIs answered by the real broker to real clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.store import (
    COMPACT_MIN_ENTRIES,
    OFFSETS_FILE,
    CommittedOffset,
    GroupStore,
)
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import bring_back
from tests.helpers.kafka_socket import KafkaSocket

NOW = 1_700_000_000_000

commits = st.lists(
    st.tuples(
        st.sampled_from(["g1", "g2", "grüppe"]),
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(-1, 2**40),
                st.integers(-1, 5), st.one_of(st.none(), st.text(max_size=8)),
            ),
            min_size=1, max_size=4,
        ),
    ),
    max_size=30,
)


def apply(store: GroupStore, history: list, oracle: dict) -> None:  # type: ignore[type-arg]
    for i, (group, items) in enumerate(history):
        offs = [(t, p, CommittedOffset(o, e, m, NOW + i)) for t, p, o, e, m in items]
        store.commit(group, offs)
        for t, p, off in offs:
            oracle[(group, t, p)] = off


@settings(max_examples=25)
@given(commits, commits)
def test_store_matches_a_dict_across_reopen_and_compaction(
    tmp_path_factory: pytest.TempPathFactory, first: list, second: list  # type: ignore[type-arg]
) -> None:
    d = tmp_path_factory.mktemp("o")
    oracle: dict = {}  # type: ignore[type-arg]
    store = GroupStore(d)
    apply(store, first, oracle)
    store.close()
    store = GroupStore(d)
    apply(store, second, oracle)
    store.compact()
    store.close()
    store = GroupStore(d)
    for (g, t, p), off in oracle.items():
        assert store.fetch(g, t, p) == off
    for g in {k[0] for k in oracle}:
        assert store.fetch_group(g) == {(t, p): o for (gg, t, p), o in oracle.items() if gg == g}
    assert store.fetch("nobody", "a", 0) is None
    store.close()


def test_torn_last_line_is_dropped_and_earlier_commits_survive(tmp_path: Path) -> None:
    store = GroupStore(tmp_path)
    store.commit("g", [("t", 0, CommittedOffset(5, -1, "m", NOW))])
    store.close()
    with open(tmp_path / OFFSETS_FILE, "ab") as f:
        f.write(b'{"g":"g","c":[["t",0,9')  # a crash in the middle of the next commit
    store = GroupStore(tmp_path)
    assert store.fetch("g", "t", 0) == CommittedOffset(5, -1, "m", NOW)
    store.commit("g", [("t", 1, CommittedOffset(7, -1, None, NOW))])
    store.close()
    store = GroupStore(tmp_path)
    assert store.fetch("g", "t", 0) == CommittedOffset(5, -1, "m", NOW)
    assert store.fetch("g", "t", 1) == CommittedOffset(7, -1, None, NOW)
    store.close()


def test_file_is_compacted_to_the_live_offsets(tmp_path: Path) -> None:
    store = GroupStore(tmp_path)
    n = COMPACT_MIN_ENTRIES + 50
    for i in range(n):
        store.commit("g", [("t", i % 2, CommittedOffset(i, -1, "", NOW))])
    lines = (tmp_path / OFFSETS_FILE).read_bytes().count(b"\n")
    assert lines <= 60  # one compaction happened: 1 line of live offsets + the later commits
    store.close()
    reopened = GroupStore(tmp_path)
    assert reopened.fetch_group("g") == {("t", 0): CommittedOffset(n - 2, -1, "", NOW),
                                         ("t", 1): CommittedOffset(n - 1, -1, "", NOW)}


def test_offsets_of_a_deleted_topic_are_forgotten_durably(tmp_path: Path) -> None:
    store = GroupStore(tmp_path)
    store.commit("g", [("keep", 0, CommittedOffset(2, -1, "", NOW))])
    store.commit("h", [("gone", 0, CommittedOffset(3, -1, "", NOW))])
    store.delete_topic("gone")
    assert not store.has_group("h")
    store.close()
    store = GroupStore(tmp_path)
    assert store.fetch("g", "keep", 0) == CommittedOffset(2, -1, "", NOW)
    assert store.fetch("h", "gone", 0) is None
    store.close()


# ---- the APIs, every served version, over a real socket against the broker -----------

UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, ILLEGAL_GENERATION = 3, 12, 22
UNKNOWN_MEMBER_ID, INVALID_REQUEST = 25, 42


def create(conn: KafkaSocket, name: str, partitions: int) -> None:
    resp = conn.request(19, 5, {"topics": [{"name": name, "num_partitions": partitions,
                                            "replication_factor": 1, "assignments": [],
                                            "configs": []}], "timeout_ms": 5000})
    assert resp.topics[0].error_code == 0


def commit(conn: KafkaSocket, version: int, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]],
           generation: int = -1, member: str = "") -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[dict[str, object]]] = {}
    for (t, p), (o, m) in offsets.items():
        by_topic.setdefault(t, []).append(
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 3,
             "committed_metadata": m})
    resp = conn.request(8, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    })
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch(conn: KafkaSocket, version: int, group: str,
          wanted: dict[str, list[int]] | None) -> dict[tuple[str, int], tuple[int, int, str | None]]:
    topics = None if wanted is None else [{"name": t, "partition_indexes": ps} for t, ps in wanted.items()]
    if version >= 8:
        resp = conn.request(9, version, {"groups": [{"group_id": group, "topics": topics}]})
        (g,) = resp.groups
        assert (g.group_id, g.error_code) == (group, 0)
        result_topics = g.topics
    else:
        resp = conn.request(9, version, {"group_id": group, "topics": topics})
        assert resp.error_code == 0
        result_topics = resp.topics
    out = {}
    for t in result_topics:
        for p in t.partitions:
            assert p.error_code == 0
            out[(t.name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch, p.metadata)
    return out


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[KafkaSocket]:
    with KafkaSocket(broker.port) as c:
        create(c, "co", 3)
        yield c


def test_every_offset_commit_version_is_read_back_by_every_offset_fetch_version(
    conn: KafkaSocket,
) -> None:
    for commit_version in range(2, 10):
        group = f"g{commit_version}"
        errs = commit(conn, commit_version, group, {("co", 0): (11, "meta"), ("co", 2): (7, None)})
        assert errs == {("co", 0): 0, ("co", 2): 0}
        epoch = 3 if commit_version >= 6 else -1  # CommittedLeaderEpoch exists from v6
        for v in range(1, 10):
            got = fetch(conn, v, group, {"co": [0, 1, 2]})
            read_epoch = epoch if v >= 5 else -1
            assert got == {("co", 0): (11, read_epoch, "meta"), ("co", 1): (-1, -1, ""),
                           ("co", 2): (7, read_epoch, "")}
            if v >= 2:  # null topics: everything the group committed
                assert fetch(conn, v, group, None) == {("co", 0): (11, read_epoch, "meta"),
                                                       ("co", 2): (7, read_epoch, "")}


def test_offset_commit_errors_are_per_partition_as_in_kafka(conn: KafkaSocket) -> None:
    errs = commit(conn, 8, "ge", {("co", 0): (1, "x" * 4097), ("co", 9): (1, None),
                                  ("nope", 0): (1, None), ("co", 1): (5, "ok")})
    assert errs == {("co", 0): OFFSET_METADATA_TOO_LARGE, ("co", 9): UNKNOWN_TOPIC_OR_PARTITION,
                    ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION, ("co", 1): 0}
    assert fetch(conn, 8, "ge", None) == {("co", 1): (5, 3, "ok")}
    # A generation claims a membership: "ge" is a simple group (no members), "fresh" unknown.
    assert commit(conn, 8, "ge", {("co", 1): (6, None)}, generation=1, member="m") == {
        ("co", 1): UNKNOWN_MEMBER_ID}
    assert commit(conn, 8, "fresh", {("co", 1): (6, None)}, generation=1, member="m") == {
        ("co", 1): ILLEGAL_GENERATION}
    # A member id with generation -1 is a simple commit, accepted as Kafka does.
    assert commit(conn, 3, "ge", {("co", 1): (8, None)}, member="whoever") == {("co", 1): 0}
    assert fetch(conn, 3, "ge", {"co": [1]}) == {("co", 1): (8, -1, "")}


def test_offset_fetch_v8_answers_several_groups_at_once(conn: KafkaSocket) -> None:
    commit(conn, 8, "a", {("co", 0): (1, "a")})
    commit(conn, 8, "b", {("co", 0): (2, "b")})
    resp = conn.request(9, 8, {"groups": [
        {"group_id": "a", "topics": [{"name": "co", "partition_indexes": [0]}]},
        {"group_id": "b", "topics": None},
        {"group_id": "none", "topics": None},
    ]})
    got = {g.group_id: [(t.name, p.partition_index, p.committed_offset, p.metadata)
                        for t in g.topics for p in t.partitions] for g in resp.groups}
    assert got == {"a": [("co", 0, 1, "a")], "b": [("co", 0, 2, "b")], "none": []}


@pytest.mark.parametrize("how", ["graceful", "crash"])
def test_committed_offsets_survive_restarts(broker: BrokerProcess, how: str) -> None:
    with KafkaSocket(broker.port) as c:
        create(c, "co", 2)
        for i in range(20):
            assert commit(c, 8, "durable", {("co", i % 2): (i, f"m{i}")}) == {("co", i % 2): 0}
    bring_back(broker, how)
    with KafkaSocket(broker.port) as c:
        assert fetch(c, 8, "durable", None) == {("co", 0): (18, 3, "m18"), ("co", 1): (19, 3, "m19")}


def test_find_coordinator_names_this_broker_at_every_version(broker: BrokerProcess) -> None:
    for version in range(5):
        check_find_coordinator(broker, version)


def check_find_coordinator(broker: BrokerProcess, version: int) -> None:
    with KafkaSocket(broker.port) as c:
        if version >= 4:
            resp = c.request(10, version, {"key_type": 0, "coordinator_keys": ["g1", "g2"]})
            assert [(x.key, x.node_id, x.host, x.port, x.error_code) for x in resp.coordinators] == [
                ("g1", 0, "127.0.0.1", broker.port, 0), ("g2", 0, "127.0.0.1", broker.port, 0)]
            bad = c.request(10, version, {"key_type": 7, "coordinator_keys": ["g"]})
            assert bad.coordinators[0].error_code == INVALID_REQUEST
        else:
            resp = c.request(10, version, {"key": "g", "key_type": 1 if version >= 1 else 0})
            assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 0, "127.0.0.1", broker.port)
            if version >= 1:
                bad = c.request(10, version, {"key": "g", "key_type": 2})
                assert bad.error_code == INVALID_REQUEST


async def test_async_commits_apply_in_arrival_order_and_are_durable(tmp_path: Path) -> None:
    store = GroupStore(tmp_path)
    await asyncio.gather(*(
        store.commit_async("g", [("t", i % 3, CommittedOffset(i, -1, f"m{i}", NOW))])
        for i in range(60)
    ))
    expected = {("t", p): CommittedOffset(57 + p, -1, f"m{57 + p}", NOW) for p in range(3)}
    assert store.fetch_group("g") == expected
    store.close()
    assert GroupStore(tmp_path).fetch_group("g") == expected


def test_find_coordinator_answers_the_advertised_listener(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(overrides={"advertised.listeners": "PLAINTEXT://localhost:19092"})
    with KafkaSocket(b.port) as c:
        resp = c.request(10, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        assert [(x.host, x.port) for x in resp.coordinators] == [("localhost", 19092)]
        md = c.request(3, 12, {"topics": None})
        assert [(x.host, x.port) for x in md.brokers] == [("localhost", 19092)]


async def test_compaction_during_in_flight_commits_keeps_every_durable_commit(tmp_path: Path) -> None:
    """A topic deletion (which compacts) racing the worker-thread writes loses nothing else."""
    store = GroupStore(tmp_path)
    store.commit("g", [("doomed", 0, CommittedOffset(1, -1, "", NOW))])

    async def delete_soon() -> None:
        await asyncio.sleep(0)
        store.delete_topic("doomed")

    await asyncio.gather(
        *(store.commit_async("g", [("t", i, CommittedOffset(i, -1, "", NOW))]) for i in range(30)),
        delete_soon(),
    )
    expected = {("t", i): CommittedOffset(i, -1, "", NOW) for i in range(30)}
    assert store.fetch_group("g") == expected
    store.close()
    assert GroupStore(tmp_path).fetch_group("g") == expected


def test_a_recreated_topic_does_not_inherit_the_deleted_topics_commits(conn: KafkaSocket) -> None:
    assert commit(conn, 8, "reborn", {("co", 0): (42, "old"), ("co", 1): (7, None)}) == {
        ("co", 0): 0, ("co", 1): 0}
    resp = conn.request(20, 4, {"topic_names": ["co"], "timeout_ms": 5000})
    assert resp.responses[0].error_code == 0
    create(conn, "co", 3)
    assert fetch(conn, 8, "reborn", {"co": [0, 1]}) == {("co", 0): (-1, -1, ""), ("co", 1): (-1, -1, "")}
    assert fetch(conn, 8, "reborn", None) == {}


async def test_concurrent_commits_share_fsyncs_and_each_is_durable_when_answered(tmp_path: Path) -> None:
    store = GroupStore(tmp_path)
    await asyncio.gather(*(
        store.commit_async(f"g{i}", [("t", 0, CommittedOffset(i, -1, "", NOW))]) for i in range(50)
    ))
    assert store.syncs < 50  # group commit: lines queued during an fsync share the next one
    reopened = GroupStore(tmp_path)  # another reader sees every answered commit on disk
    assert {g: reopened.fetch(g, "t", 0) for g in reopened.groups()} == {
        f"g{i}": CommittedOffset(i, -1, "", NOW) for i in range(50)}
    reopened.close()
    store.close()
