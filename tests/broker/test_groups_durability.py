"""Durable group state: acknowledged commits survive kill -9, and offsets expire per KIP-211.

The property test pipelines bursts of OffsetCommits on one connection and SIGKILLs the
broker after reading only some answers. Answers arrive in request order, so the
unanswered requests are a suffix; after the restart every key must hold its last
acknowledged commit or one sent after it (the oracle: the allowed set per key), and a
commit is the whole of it: offset, leader epoch and metadata as OffsetFetch answers
them, and the commit timestamp (which OffsetFetch does not carry, in Kafka neither)
read from the broker's store after it stopped, within the time its burst was in flight.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig
from broker.groups.classic import ClassicGroup, JoinRequest
from broker.groups.coordinator import GroupCoordinator
from broker.groups.store import CommittedOffset, GroupStore
from broker.partitions import STATE_DIR
from protocol.api import decode_response, encode_request
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.kafka_socket import KafkaSocket

GROUPS = ["d0", "d1"]
PARTITIONS = 2

#: One commit: (group, partition, offset, leader epoch, metadata).
Commit = tuple[str, int, int, int, str]
#: What a key may hold after a restart: (offset, leader epoch, metadata) -> the window
#: (ms) in which the broker may have stamped it; None = no commit at all.
Allowed = dict[tuple[int, int, str] | None, tuple[int, int]]

commits = st.tuples(
    st.sampled_from(GROUPS), st.integers(0, PARTITIONS - 1), st.integers(0, 2**40),
    st.integers(-1, 2**31 - 1),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
)
bursts = st.lists(
    st.tuples(
        st.lists(commits, min_size=1, max_size=25),
        st.floats(0, 1),   # the fraction of answers read before the kill
        st.booleans(),     # kill -9 after this burst
    ),
    min_size=1, max_size=3,
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def commit_frame(corr: int, group: str, partition: int, offset: int, epoch: int, metadata: str) -> bytes:
    return encode_request(8, 8, corr, "durability", {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "dt", "partitions": [
            {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": epoch,
             "committed_metadata": metadata}]}]})


def fetch_all(b: BrokerProcess) -> dict[tuple[str, int], tuple[int, int, str]]:
    with KafkaSocket(b.port) as c:
        resp = c.request(9, 8, {"groups": [{"group_id": g, "topics": None} for g in GROUPS]})
    return {(g.group_id, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
            for g in resp.groups for t in g.topics for p in t.partitions}


def widen(allowed: Allowed, value: tuple[int, int, str] | None, lo: int, hi: int) -> None:
    """Let ``value`` be stamped anywhere in [lo, hi] (besides any window it had)."""
    old = allowed.get(value)
    allowed[value] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=bursts)
def test_every_acknowledged_commit_survives_kill_minus_nine(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[list[Commit], float, bool]]
) -> None:
    data = tmp_path_factory.mktemp("dur") / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number()).start()
    allowed: dict[tuple[str, int], Allowed] = {}
    try:
        with KafkaSocket(b.port) as c:
            c.request(19, 5, {"topics": [{"name": "dt", "num_partitions": PARTITIONS, "replication_factor": 1,
                                          "assignments": [], "configs": []}], "timeout_ms": 5000})
        for burst, fraction, kill in plan:
            with KafkaSocket(b.port) as c:
                frames = [commit_frame(i + 1, *commit) for i, commit in enumerate(burst)]
                sent = now_ms()
                c.send(b"".join(frames))
                to_read = int(len(burst) * fraction) if kill else len(burst)
                for i in range(to_read):
                    corr, resp = decode_response(8, 8, c.read_frame())
                    assert corr == i + 1 and resp.topics[0].partitions[0].error_code == 0
                    g, p, o, e, m = burst[i]
                    # acknowledged: nothing older may come back
                    allowed[(g, p)] = {(o, e, m): (sent, now_ms())}
                if kill:
                    b.kill()
                ended = now_ms()
                for g, p, o, e, m in burst[to_read:]:  # may or may not have landed
                    widen(allowed.setdefault((g, p), {None: (0, 0)}), (o, e, m), sent, ended)
                if kill:
                    b.start()
            got = fetch_all(b)
            for key, ok in allowed.items():
                value = got.get(key)
                assert value in ok, (key, value, ok)
                allowed[key] = {value: ok[value]}  # what survived is now the truth
            assert set(got) <= set(allowed)
    finally:
        b.stop()
    store = GroupStore(data / STATE_DIR)
    try:
        for (g, p), ok in allowed.items():
            ((value, (lo, hi)),) = ok.items()
            stored = store.fetch(g, "dt", p)
            if value is None:
                assert stored is None
                continue
            assert stored is not None and (stored.offset, stored.leader_epoch, stored.metadata) == value
            # +-1 ms: the broker rounds time.time() * 1000, this test floors time_ns()
            assert lo - 1 <= stored.commit_timestamp_ms <= hi + 1, ((g, p), stored, lo, hi)
    finally:
        store.close()


# ---- expiry (KIP-211), driven by a fake clock over a real store ---------------------------------------


def coordinator(tmp_path: Path, now: list[int]) -> GroupCoordinator:
    config = BrokerConfig(offsets_retention_minutes=1, group_initial_rebalance_delay_ms=0)
    return GroupCoordinator(config, GroupStore(tmp_path), clock=lambda: now[0])


def join_request() -> JoinRequest:
    return JoinRequest("", "inst", "c", "/h", 10_000, 10_000, "consumer", [("range", b"")], 5)


async def empty_consumer_group(coord: GroupCoordinator, gid: str, now: int) -> ClassicGroup:
    """A group whose one member joins at ``now`` and leaves at once: Empty since ``now``."""
    g = coord.classic(gid, create=True)
    assert g is not None
    await coord.run_effects(g, g.join(now, join_request(), None))
    await coord.run_effects(g, g.on_timer(now))
    (mid,) = g.members
    codes, fx = g.leave(now, [(mid, "inst")])
    await coord.run_effects(g, fx.extend(g.on_timer(now)))
    assert codes == [0] and g.state == "Empty" and g.state_timestamp_ms == now
    return g


async def test_offsets_expire_from_the_last_commit_or_from_becoming_empty(tmp_path: Path) -> None:
    minute = 60_000
    now = [0]
    coord = coordinator(tmp_path, now)
    await coord.commit_offsets("simple", [("t", 0, CommittedOffset(1, -1, "", 0))])
    await coord.commit_offsets("consumer", [("t", 0, CommittedOffset(2, -1, "", 0))])
    await empty_consumer_group(coord, "consumer", 5 * minute)  # Empty since minute 5
    assert await coord.expire_offsets(minute - 1) == 0
    assert await coord.expire_offsets(minute) == 1  # the simple group's, from its commit
    assert coord.group("simple") is None and coord.store.fetch("simple", "t", 0) is None
    assert await coord.expire_offsets(6 * minute - 1) == 0  # not from the old commit time
    assert coord.store.fetch("consumer", "t", 0) is not None
    assert await coord.expire_offsets(6 * minute) == 1
    assert coord.group("consumer") is None  # an Empty group goes with its last offset
    coord.store.close()
    reopened = GroupStore(tmp_path)
    assert reopened.groups() == [] and reopened.group_records() == {}
    reopened.close()


async def test_offsets_of_an_active_group_never_expire(tmp_path: Path) -> None:
    now = [0]
    coord = coordinator(tmp_path, now)
    g = coord.classic("active", create=True)
    assert g is not None
    await coord.run_effects(g, g.join(0, join_request(), None))
    await coord.run_effects(g, g.on_timer(0))
    await coord.commit_offsets("active", [("t", 0, CommittedOffset(9, -1, "", 0))])
    assert g.state == "CompletingRebalance"
    assert await coord.expire_offsets(10**9) == 0
    assert coord.store.fetch("active", "t", 0) is not None
    coord.store.close()


async def test_an_empty_groups_state_timestamp_survives_a_reopen(tmp_path: Path) -> None:
    now = [0]
    coord = coordinator(tmp_path, now)
    await coord.commit_offsets("c", [("t", 0, CommittedOffset(2, -1, "", 0))])
    await empty_consumer_group(coord, "c", 3 * 60_000)
    coord.store.close()
    again = coordinator(tmp_path, now)
    g: Any = again.group("c")
    assert g is not None and g.state == "Empty" and g.state_timestamp_ms == 3 * 60_000
    assert await again.expire_offsets(4 * 60_000 - 1) == 0
    assert await again.expire_offsets(4 * 60_000) == 1
    again.store.close()


async def test_an_empty_group_without_offsets_is_deleted_by_the_cleanup(tmp_path: Path) -> None:
    now = [0]
    coord = coordinator(tmp_path, now)
    await empty_consumer_group(coord, "bare", 0)  # became Empty, never committed
    assert coord.store.has_record("bare")
    await coord.commit_offsets("kept", [("t", 0, CommittedOffset(1, -1, "", 0))])
    await coord.store.delete_offsets("kept", [("t", 0)])  # a simple group whose offsets went
    assert await coord.expire_offsets(1) == 0
    assert coord.group("bare") is None and coord.group("kept") is None
    coord.store.close()
    assert GroupStore(tmp_path).group_records() == {}
