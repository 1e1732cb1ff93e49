"""Topic ids: Kafka's ``partition.metadata`` file, one id per topic, kept across reopen."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.config import LogConfig
from storage.logdir import LogDir
from storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    ZERO_ID,
    id_from_str,
    id_to_str,
    new_topic_id,
    read_topic_id,
    write_topic_id,
)

CFG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def logdir_with(path: Path, topic: str, partitions: int) -> LogDir:
    """A LogDir at ``path`` holding partitions 0..partitions-1 of ``topic``."""
    ld = LogDir(path, CFG)
    for p in range(partitions):
        ld.get_or_create(topic, p)
    return ld


@given(st.binary(min_size=16, max_size=16))
def test_id_text_is_kafkas_unpadded_base64url_and_round_trips(raw: bytes) -> None:
    text = id_to_str(raw)
    # Oracle: Java's Base64.getUrlEncoder().withoutPadding() over the uuid's 16 bytes.
    assert text == base64.urlsafe_b64encode(uuid.UUID(bytes=raw).bytes).decode().replace("=", "")
    assert len(text) == 22 and id_from_str(text) == raw


def test_new_ids_are_distinct_never_reserved_and_never_start_with_a_dash() -> None:
    ids = [new_topic_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(i not in (ZERO_ID, bytes(15) + b"\x01") for i in ids)
    assert not any(id_to_str(i).startswith("-") for i in ids)


def test_file_is_kafkas_two_line_text_and_reads_back(tmp_path: Path) -> None:
    topic_id = new_topic_id()
    write_topic_id(tmp_path, topic_id)
    assert (tmp_path / PARTITION_METADATA_FILE).read_text() == f"version: 0\ntopic_id: {id_to_str(topic_id)}"
    assert read_topic_id(tmp_path) == topic_id


def test_a_file_written_by_kafka_reads_back(tmp_path: Path) -> None:
    # The exact bytes Kafka's PartitionMetadataFileFormatter writes (no trailing newline).
    (tmp_path / PARTITION_METADATA_FILE).write_text("version: 0\ntopic_id: 4Pn4lyxYQ7GLs3BiS6V-Jg")
    assert id_to_str(read_topic_id(tmp_path) or b"") == "4Pn4lyxYQ7GLs3BiS6V-Jg"


def test_missing_or_damaged_files_read_as_no_id(tmp_path: Path) -> None:
    assert read_topic_id(tmp_path) is None
    for text in ("", "version: 1\ntopic_id: 4Pn4lyxYQ7GLs3BiS6V-Jg", "version: 0\ntopic_id: short",
                 "version: 0\n", f"version: 0\ntopic_id: {id_to_str(ZERO_ID)}"):
        (tmp_path / PARTITION_METADATA_FILE).write_text(text)
        assert read_topic_id(tmp_path) is None, text


def test_every_partition_of_a_topic_shares_one_id_and_topics_differ(tmp_path: Path) -> None:
    ld = logdir_with(tmp_path, "a", 4)
    ld.get_or_create("b", 0)
    ids = {read_topic_id(tmp_path / f"a-{p}") for p in range(4)}
    assert ids == {ld.topic_id("a")}
    assert ld.topic_id("b") not in (None, ld.topic_id("a"))
    assert ld.topic_by_id(ld.topic_id("a") or b"") == "a"
    assert ld.topic_by_id(new_topic_id()) is None


def test_ids_survive_reopen_after_clean_close_and_after_a_crash(tmp_path: Path) -> None:
    ld = logdir_with(tmp_path, "t", 2)
    before = ld.topic_id("t")
    ld.close()
    again = LogDir(tmp_path, CFG)
    assert again.topic_id("t") == before
    # no close: as after kill -9
    crashed = LogDir(tmp_path, CFG)
    assert crashed.topic_id("t") == before


def test_a_topic_without_files_gets_one_id_written_into_each_partition(tmp_path: Path) -> None:
    ld = logdir_with(tmp_path, "old", 3)
    ld.close()
    for p in range(3):
        os.unlink(tmp_path / f"old-{p}" / PARTITION_METADATA_FILE)  # as an older Chronolog left it
    reopened = LogDir(tmp_path, CFG)
    assigned = reopened.topic_id("old")
    assert assigned is not None
    assert {read_topic_id(tmp_path / f"old-{p}") for p in range(3)} == {assigned}
    assert LogDir(tmp_path, CFG).topic_id("old") == assigned


def test_partitions_that_disagree_take_the_lowest_partitions_id(tmp_path: Path) -> None:
    ld = logdir_with(tmp_path, "x", 2)
    first = ld.topic_id("x")
    ld.close()
    write_topic_id(tmp_path / "x-1", new_topic_id())
    assert LogDir(tmp_path, CFG).topic_id("x") == first
    assert read_topic_id(tmp_path / "x-1") == first


def test_a_deleted_and_recreated_topic_gets_a_new_id(tmp_path: Path) -> None:
    ld = logdir_with(tmp_path, "r", 2)
    old = ld.topic_id("r")
    ld.delete("r", 0)
    assert ld.topic_id("r") == old  # one partition is left
    ld.delete("r", 1)
    assert ld.topic_id("r") is None and ld.topic_by_id(old or b"") is None
    ld.get_or_create("r", 0)
    assert ld.topic_id("r") not in (None, old)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 3)), min_size=1, max_size=12))
def test_ids_match_a_brute_force_reading_of_the_files(tmp_path_factory: object, parts: list[tuple[str, int]]) -> None:
    path = tmp_path_factory.mktemp("ld")  # type: ignore[attr-defined]
    ld = LogDir(path, CFG)
    for topic, p in parts:
        ld.get_or_create(topic, p)
    ld.close()
    reopened = LogDir(path, CFG)
    # Oracle: read every partition.metadata on disk.
    on_disk: dict[str, set[bytes | None]] = {}
    for topic, p in parts:
        on_disk.setdefault(topic, set()).add(read_topic_id(path / f"{topic}-{p}"))
    for topic, ids in on_disk.items():
        assert ids == {reopened.topic_id(topic)}
        assert reopened.topic_by_id(next(iter(ids)) or b"") == topic
    assert len({reopened.topic_id(t) for t in on_disk}) == len(on_disk)
