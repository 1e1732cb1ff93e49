"""Committed offsets: the durable store, and the OffsetCommit/OffsetFetch/FindCoordinator
APIs answered by the real broker to real clients.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.group_offsets import OFFSETS_FILE, CommittedOffset, GroupOffsetStore

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


def apply(store: GroupOffsetStore, history: list, oracle: dict) -> None:  # type: ignore[type-arg]
    for i, (group, items) in enumerate(history):
        offs = [(t, p, CommittedOffset(o, e, m, NOW + i)) for t, p, o, e, m in items]
        store.commit(group, offs)
        for t, p, off in offs:
            oracle[(group, t, p)] = off


@given(commits, commits)
def test_store_matches_a_dict_across_reopen_and_compaction(
    tmp_path_factory: pytest.TempPathFactory, first: list, second: list  # type: ignore[type-arg]
) -> None:
    d = tmp_path_factory.mktemp("o")
    oracle: dict = {}  # type: ignore[type-arg]
    store = GroupOffsetStore(d, now_ms=NOW)
    apply(store, first, oracle)
    store.close()
    store = GroupOffsetStore(d, now_ms=NOW)
    apply(store, second, oracle)
    store.compact()
    store.close()
    store = GroupOffsetStore(d, now_ms=NOW)
    for (g, t, p), off in oracle.items():
        assert store.fetch(g, t, p) == off
    for g in {k[0] for k in oracle}:
        assert store.fetch_group(g) == {(t, p): o for (gg, t, p), o in oracle.items() if gg == g}
    assert store.fetch("nobody", "a", 0) is None
    store.close()


def test_torn_last_line_is_dropped_and_earlier_commits_survive(tmp_path: Path) -> None:
    store = GroupOffsetStore(tmp_path, now_ms=NOW)
    store.commit("g", [("t", 0, CommittedOffset(5, -1, "m", NOW))])
    store.close()
    with open(tmp_path / OFFSETS_FILE, "ab") as f:
        f.write(b'{"g":"g","c":[["t",0,9')  # a crash in the middle of the next commit
    store = GroupOffsetStore(tmp_path, now_ms=NOW)
    assert store.fetch("g", "t", 0) == CommittedOffset(5, -1, "m", NOW)
    store.commit("g", [("t", 1, CommittedOffset(7, -1, None, NOW))])
    store.close()
    store = GroupOffsetStore(tmp_path, now_ms=NOW)
    assert store.fetch("g", "t", 0) == CommittedOffset(5, -1, "m", NOW)
    assert store.fetch("g", "t", 1) == CommittedOffset(7, -1, None, NOW)
    store.close()


def test_file_stays_proportional_to_live_offsets(tmp_path: Path) -> None:
    store = GroupOffsetStore(tmp_path, now_ms=NOW)
    for i in range(2500):
        store.commit("g", [("t", 0, CommittedOffset(i, -1, "", NOW))])
    size = os.path.getsize(tmp_path / OFFSETS_FILE)
    assert size < 200 * 1000  # at most ~2000 lines of ~40 bytes
    store.close()
    assert GroupOffsetStore(tmp_path, now_ms=NOW).fetch("g", "t", 0).offset == 2499  # type: ignore[union-attr]


def test_offsets_expire_after_retention_and_with_deleted_topics(tmp_path: Path) -> None:
    store = GroupOffsetStore(tmp_path, offsets_retention_ms=1000, now_ms=NOW)
    store.commit("g", [("old", 0, CommittedOffset(1, -1, "", NOW - 5000))])
    store.commit("g", [("new", 0, CommittedOffset(2, -1, "", NOW))])
    store.commit("h", [("gone", 0, CommittedOffset(3, -1, "", NOW))])
    assert store.expire(NOW) == 1
    store.delete_topic("gone")
    assert not store.has_group("h")
    store.close()
    store = GroupOffsetStore(tmp_path, offsets_retention_ms=1000, now_ms=NOW)
    assert store.fetch("g", "old", 0) is None
    assert store.fetch("g", "new", 0) == CommittedOffset(2, -1, "", NOW)
    assert store.fetch("h", "gone", 0) is None
    store.close()
