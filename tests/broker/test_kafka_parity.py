"""Answers Chronolog gives as Apache Kafka 4.1 gives them, where they once differed.

Each was found by tests/ecosystem/test_differential.py (the same request sent to the
real Kafka); these are the regression tests that need no Kafka. The expected values
are Kafka's answers as the differential test observed them.
"""

from __future__ import annotations

import time
from typing import Any

from storage.records import Record, build_batch
from tests.broker.test_core_server import Raw, create_topic, fetch_body

HOUR = 3_600_000


def _produce(raw: Raw, topic: str, stamps: list[int], version: int = 9) -> Any:
    batch = build_batch([Record(0, ts, None, b"v", []) for ts in stamps])
    resp = raw.call(0, version, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return resp.responses[0].partition_responses[0]


def test_a_fetch_out_of_range_answers_only_its_error(broker: Any) -> None:
    raw = Raw(broker.port)
    create_topic(raw, "oor")
    _produce(raw, "oor", [int(time.time() * 1000)] * 2)
    for isolation in (0, 1):
        body = {**fetch_body("oor", 5, max_wait_ms=0), "isolation_level": isolation}
        part = raw.call(1, 12, body).responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, part.last_stable_offset,
                part.log_start_offset, part.aborted_transactions, bytes(part.records or b"")) == (
            1, -1, -1, -1, None, b"")
    # In range, read_committed still answers an empty (not null) list, as Kafka does.
    part = raw.call(1, 12, {**fetch_body("oor", 0, max_wait_ms=0), "isolation_level": 1}
                    ).responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, list(part.aborted_transactions)) == (0, 2, [])
    raw.close()


def test_an_invalid_timestamp_answers_kafkas_message_and_the_log_start(broker: Any) -> None:
    raw = Raw(broker.port)
    create_topic(raw, "future")
    now = int(time.time() * 1000)
    assert _produce(raw, "future", [now, now]).error_code == 0
    bad = _produce(raw, "future", [now, now + 2 * HOUR])  # past message.timestamp.after.max.ms
    assert (bad.error_code, bad.base_offset, bad.log_start_offset, bad.error_message) == (
        32, -1, 0, "One or more records have been rejected due to invalid timestamp")
    assert [e.batch_index for e in bad.record_errors] == [1]
    assert "is out of range" in bad.record_errors[0].batch_index_error_message
    assert "produce to future-0 refused (INVALID_TIMESTAMP)" in broker.log()  # and why
    raw.close()


def test_find_coordinator_says_none_when_found(broker: Any) -> None:
    raw = Raw(broker.port)
    for version in (1, 2, 3):
        resp = raw.call(10, version, {"key": "g", "key_type": 0})
        assert (resp.error_code, resp.error_message) == (0, "NONE")
    resp = raw.call(10, 4, {"key_type": 0, "coordinator_keys": ["g", "h"]})
    assert [(c.error_code, c.error_message) for c in resp.coordinators] == [(0, ""), (0, "")]
    raw.close()


def test_an_out_of_order_sequence_has_no_message_but_a_log_line(broker: Any) -> None:
    """Kafka sends ErrorMessage only with record errors; the reason is logged here."""
    raw = Raw(broker.port)
    create_topic(raw, "seq")
    init = raw.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                            "producer_id": -1, "producer_epoch": -1})
    now = int(time.time() * 1000)

    def send(seq: int) -> Any:
        batch = build_batch([Record(0, now, None, b"v", [])], producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=seq)
        return raw.call(0, 11, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "seq", "partition_data": [{"index": 0, "records": batch}]}]}
        ).responses[0].partition_responses[0]

    assert send(0).error_code == 0
    gap = send(7)
    assert (gap.error_code, gap.error_message, gap.log_start_offset) == (45, None, 0)
    assert "produce to seq-0 refused (OUT_OF_ORDER_SEQUENCE_NUMBER)" in broker.log()
    raw.close()


def test_a_retry_after_delete_records_is_still_a_duplicate(broker: Any) -> None:
    """DeleteRecords past every batch of an idempotent producer does not make the broker
    forget it (Kafka keeps producer state until it expires): the retried batch is
    answered with its original offset, not appended again."""
    raw = Raw(broker.port)
    create_topic(raw, "dedup")
    init = raw.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                            "producer_id": -1, "producer_epoch": -1})
    batch = build_batch([Record(0, 1_600_000_000_000, None, b"v", [])] * 2,
                        producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                        base_sequence=0)

    def send() -> Any:
        return raw.call(0, 11, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "dedup", "partition_data": [{"index": 0, "records": batch}]}]}
        ).responses[0].partition_responses[0]

    assert (send().error_code, send().base_offset) == (0, 0)
    deleted = raw.call(21, 2, {"topics": [{"name": "dedup", "partitions": [
        {"partition_index": 0, "offset": -1}]}], "timeout_ms": 5000})
    assert deleted.topics[0].partitions[0].low_watermark == 2
    again = send()
    assert (again.error_code, again.base_offset) == (0, 0)  # Kafka 4.1's answer
    end = raw.call(2, 7, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 0, "topics": [
        {"name": "dedup", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                          "timestamp": -1}]}]})
    assert end.topics[0].partitions[0].offset == 2  # nothing appended twice
    raw.close()
