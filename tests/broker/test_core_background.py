"""The broker's background tasks: retention, time-based flush and checkpoints."""

from __future__ import annotations

import time
from typing import Any

from storage.checkpoint import read_checkpoint
from tests.helpers.kafka_socket import KafkaSocket, create_topic, produce_frame
from tests.helpers.wait import wait_until


def offsets(raw: KafkaSocket, topic: str, ts: int) -> int:
    resp = raw.request(2, 7, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": ts}]}]})
    return int(resp.topics[0].partitions[0].offset)


def test_retention_runs_on_its_interval_and_moves_the_log_start(broker_factory: Any) -> None:
    b = broker_factory(overrides={"log.retention.check.interval.ms": "200"})
    raw = KafkaSocket(b.port)
    create_topic(raw, "old", configs={"retention.ms": "60000", "segment.bytes": "1024"})
    create_topic(raw, "young", configs={"segment.bytes": "1024"})
    day_ago = int(time.time() * 1000) - 86_400_000
    for topic in ("old", "young"):
        for _ in range(6):
            cid, frame = produce_frame(raw, topic, [b"x" * 200] * 3, ts=day_ago)
            raw.send(frame)
            assert raw.read()[1].responses[0].partition_responses[0].error_code == 0
    # Every segment of "old" is a day old: retention removes them (the active one too,
    # after a roll, as Kafka does); "young" keeps the 7-day default.
    assert wait_until(lambda: offsets(raw, "old", -2) > 0, 15.0, "retention to move the log start")
    assert offsets(raw, "old", -1) == 18
    assert offsets(raw, "young", -2) == 0
    start = offsets(raw, "old", -2)
    # A lookup never answers below the log start; with everything gone there is no answer.
    assert offsets(raw, "old", 0) == (start if start < 18 else -1)
    assert "retention deleted" in b.log()


def test_time_based_flush_and_checkpoints_record_the_recovery_point(broker_factory: Any) -> None:
    b = broker_factory(overrides={"log.flush.scheduler.interval.ms": "100",
                                  "log.flush.interval.ms": "0",
                                  "log.flush.offset.checkpoint.interval.ms": "200"})
    raw = KafkaSocket(b.port)
    create_topic(raw, "durable")
    cid, frame = produce_frame(raw, "durable", [b"a"] * 10)
    raw.send(frame)
    raw.read()
    path = b.data_dir / "recovery-point-offset-checkpoint"
    assert wait_until(lambda: read_checkpoint(path).get(("durable", 0)) == 10, 15.0,
                      "the recovery checkpoint to reach 10")


def test_flush_every_n_messages(broker_factory: Any) -> None:
    b = broker_factory(overrides={"log.flush.interval.messages": "5",
                                  "log.flush.offset.checkpoint.interval.ms": "200"})
    raw = KafkaSocket(b.port)
    create_topic(raw, "counted")
    for n in (3, 3):
        cid, frame = produce_frame(raw, "counted", [b"a"] * n)
        raw.send(frame)
        raw.read()
    path = b.data_dir / "recovery-point-offset-checkpoint"
    assert wait_until(lambda: read_checkpoint(path).get(("counted", 0)) == 6, 15.0,
                      "the recovery checkpoint to reach 6")


def test_a_roll_is_synced_off_the_request_path_and_moves_the_recovery_point(
        broker_factory: Any) -> None:
    """With no flush policy, only rolls sync data. A roll itself syncs nothing (see
    tests/storage/test_roll_flush.py); the broker runs its fsyncs on a worker thread,
    and then the recovery point reaches the base offset of the newest segment (what
    the checkpoint file records)."""
    b = broker_factory(overrides={"log.flush.offset.checkpoint.interval.ms": "200"})
    raw = KafkaSocket(b.port)
    create_topic(raw, "rolling", configs={"segment.bytes": "1024"})
    for _ in range(6):
        cid, frame = produce_frame(raw, "rolling", [b"x" * 200] * 3)
        raw.send(frame)
        assert raw.read()[1].responses[0].partition_responses[0].error_code == 0
    segment_bases = sorted(int(p.stem) for p in (b.data_dir / "rolling-0").glob("*.log"))
    assert len(segment_bases) > 1
    path = b.data_dir / "recovery-point-offset-checkpoint"
    assert wait_until(lambda: read_checkpoint(path).get(("rolling", 0)) == segment_bases[-1], 15.0,
                      "the recovery checkpoint to reach the last segment")
