"""The data directory: partition discovery, Kafka's checkpoint files, the clean
shutdown marker, create/delete, and topic configs from Kafka's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.checkpoint import CheckpointError, read_checkpoint, write_checkpoint
from storage.config import LONG_MAX, LogConfig
from storage.logdir import CLEAN_SHUTDOWN_FILE, LogDir
from storage.records import Record, build_batch

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def fill(ld: LogDir, topic: str, partition: int, n: int) -> None:
    log = ld.get_or_create(topic, partition)
    for i in range(n):
        log.append(build_batch([Record(0, T0 + i, None, b"x" * 40, [])]), now_ms=T0 + 10_000)


def test_close_writes_marker_and_checkpoints_in_kafkas_text_format(tmp_path: Path) -> None:
    ld = LogDir(tmp_path, CFG)
    fill(ld, "a-b.c", 0, 12)
    fill(ld, "a-b.c", 3, 2)
    ld.get("a-b.c", 0).advance_log_start_offset(6)  # type: ignore[union-attr]
    ld.get("a-b.c", 0).delete_old_segments(T0)  # type: ignore[union-attr]
    start = ld.get("a-b.c", 0).log_start_offset  # type: ignore[union-attr]
    ld.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\na-b.c 0 12\na-b.c 3 2\n"
    lso = (tmp_path / "log-start-offset-checkpoint").read_text()
    assert lso == "0\n1\na-b.c 0 6\n" and start == 6


def test_reopen_after_clean_shutdown_skips_recovery_and_removes_the_marker(tmp_path: Path) -> None:
    ld = LogDir(tmp_path, CFG)
    fill(ld, "t", 0, 20)
    ld.close()
    ld = LogDir(tmp_path, CFG)
    assert ld.clean_shutdown
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    log = ld.get("t", 0)
    assert log is not None and log.recovered_segments == 0 and log.log_end_offset == 20
    got = log.offset_for_timestamp(T0 + 7)
    assert got is not None and got.offset == 7
    ld.close()


def test_without_marker_every_log_is_recovered_from_its_checkpoint(tmp_path: Path) -> None:
    ld = LogDir(tmp_path, CFG)
    fill(ld, "t", 0, 20)
    fill(ld, "u", 1, 3)
    ld.flush()
    ld.checkpoint()
    fill(ld, "t", 0, 5)
    for log in ld.logs().values():
        for seg in log.segments:
            seg.release()  # crash
    ld = LogDir(tmp_path, CFG)
    assert not ld.clean_shutdown
    t = ld.get("t", 0)
    assert t is not None and t.log_end_offset == 25 and t.recovered_segments >= 1
    assert len(t.segments) > 1 and t.recovered_segments < len(t.segments)
    got = t.offset_for_timestamp(T0 + 19)  # the second fill restarted at T0
    assert got is not None and got.offset == 19
    assert t.offset_for_timestamp(T0 + 20) is None
    ld.close()


def test_other_files_are_ignored_and_interrupted_deletes_finished(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\n")
    (tmp_path / "not_a_partition").mkdir()
    (tmp_path / "t-0.0123abcd-delete").mkdir()
    ld = LogDir(tmp_path, CFG)
    assert ld.logs() == {}
    assert not (tmp_path / "t-0.0123abcd-delete").exists()
    assert (tmp_path / "not_a_partition").exists()
    fill(ld, "t", 0, 3)
    assert ld.delete("t", 0)
    assert not any(p.name.startswith("t-0") for p in tmp_path.iterdir())
    assert ld.get("t", 0) is None
    ld.close()


def test_per_topic_configs_come_from_the_caller(tmp_path: Path) -> None:
    lat = LogConfig(message_timestamp_type="LogAppendTime")
    ld = LogDir(tmp_path, CFG)
    log = ld.get_or_create("stamped", 0, lat)
    r = log.append(build_batch([Record(0, T0, None, b"x", [])]), now_ms=T0 + 5)
    assert r.log_append_time_ms == T0 + 5
    ld.close()
    ld = LogDir(tmp_path, CFG, config_for=lambda topic: lat if topic == "stamped" else None)
    assert ld.get("stamped", 0).config.log_append_time  # type: ignore[union-attr]
    ld.close()


def test_checkpoint_round_trip_and_bad_files(tmp_path: Path) -> None:
    p = tmp_path / "cp"
    write_checkpoint(p, {("x", 1): 5, ("a-b", 0): 0})
    assert read_checkpoint(p) == {("x", 1): 5, ("a-b", 0): 0}
    assert read_checkpoint(tmp_path / "missing") == {}
    p.write_text("1\n0\n")
    with pytest.raises(CheckpointError):
        read_checkpoint(p)
    p.write_text("0\n2\nx 1 5\n")
    with pytest.raises(CheckpointError):
        read_checkpoint(p)


def test_log_config_uses_kafka_names_defaults_and_validates() -> None:
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.segment_index_bytes, c.index_interval_bytes) == (
        1073741824, 604800000, 10485760, 4096)
    assert (c.retention_ms, c.retention_bytes, c.max_message_bytes) == (604800000, -1, 1048588)
    assert c.message_timestamp_after_max_ms == 3600000
    assert c.message_timestamp_before_max_ms == LONG_MAX
    c2 = LogConfig.from_kafka({"segment.bytes": "1024", "message.timestamp.type": "LogAppendTime",
                               "cleanup.policy": "delete,compact", "retention.ms": "-1",
                               "compression.type": "zstd"})
    assert c2.segment_bytes == 1024 and c2.log_append_time and c2.retention_ms == -1
    assert c2.cleanup_policy == "delete,compact" and c2.compact and c2.delete_enabled
    assert c2.extra == {"compression.type": "zstd"}
    assert LogConfig.from_kafka(c2.to_kafka()) == c2
    for bad in ({"segment.bytes": "abc"}, {"segment.bytes": "1"}, {"no.such.config": "1"},
                {"message.timestamp.type": "Now"}, {"retention.ms": "-2"},
                {"cleanup.policy": "archive"}, {"min.cleanable.dirty.ratio": "1.5"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            LogConfig.from_kafka(bad)
    assert 0 <= LogConfig(segment_jitter_ms=10).random_segment_jitter() < 10
