"""Kafka's ``LogValidator``: every rule a client batch must pass before the log takes it.

The record walk itself (magic, CRC, one batch, base offset 0, count, control flag,
records parse exactly to the end, offset deltas 0..n-1, true min/max timestamps) is
the codec's (``records.validate_client_batch``); this module adds the topic's rules
on top and decides what is written: the batch as given, or a copy whose
``maxTimestamp`` / timestamp type was rewritten.

Invariants:
- a batch that fails any rule raises (``RecordTooLargeError``,
  ``RecordListTooLargeError``, ``CorruptRecordError``, ``InvalidRecordError``,
  ``UnsupportedCompressionError``, ``InvalidTimestampError``) and nothing of it is
  written: validation reads the batch and writes nothing but its own copy;
- the rules are checked in Kafka's order: sizes, the record walk, keys of a
  compacted topic, then timestamps (CreateTime: every record within
  ``message.timestamp.before/after.max.ms``; LogAppendTime: the broker's stamp);
- under CreateTime a wrong producer ``maxTimestamp`` is corrected, as Kafka does.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from storage.cleaner import null_key_indexes
from storage.config import LogConfig
from storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from storage.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchHeader,
    set_max_timestamp,
    timestamp_errors,
    validate_client_batch,
)

Buffer = bytes | bytearray | memoryview
# A ValidatedBatch from a tuple in C, without NamedTuple's Python __new__: this runs
# once per appended batch (bench/bench_storage.py, append rows).
_new_tuple = tuple.__new__


class ValidatedBatch(NamedTuple):
    """A batch that passed every rule, and what the append needs from the walk."""

    header: BatchHeader
    rewritten: bytearray | None
    """A copy with maxTimestamp / timestamp type rewritten, or None (write as given)."""
    min_timestamp: int
    max_timestamp: int
    late: int
    """Records below the running max before the batch (the zone map's disorder)."""
    max_lateness: int


# Kafka's ProduceResponse ErrorMessage for INVALID_TIMESTAMP (its InvalidTimestampException);
# which records and why are in the per-record errors.
INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"


def validate_batch(batch: Buffer, config: LogConfig, *, now_ms: int, running: int,
                   append_time: int | None, log_dir: Path) -> ValidatedBatch:
    """Every rule of Kafka's LogValidator for one client batch.

    ``running`` is the log's running max timestamp before the batch (late records
    are counted against it in the same walk); ``append_time`` is the broker's stamp
    for a LogAppendTime topic (None under CreateTime); ``log_dir`` (the partition's
    directory) names the partition in Kafka's record error messages, read only then.
    """
    size = len(batch)
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes}")
    if size > config.segment_bytes:
        raise RecordListTooLargeError(
            f"append of {size} bytes exceeds segment.bytes={config.segment_bytes}")
    scan = validate_client_batch(batch, running=running)
    h = scan.header
    if config.compact:
        check_keys(batch, config, now_ms=now_ms, partition=log_dir.name)
    if append_time is not None:
        buf = bytearray(batch)
        set_max_timestamp(buf, 0, append_time, LOG_APPEND_TIME)
        late, worst = (h.records_count, running - append_time) if append_time < running else (0, 0)
        return _new_tuple(ValidatedBatch, (h, buf, append_time, append_time, late, worst))
    if h.timestamp_type == LOG_APPEND_TIME:
        errors = [(i, "Invalid timestamp type in message: producer should not set "
                      "the timestamp type to LogAppendTime")
                  for i in range(h.records_count)]
        raise InvalidTimestampError(INVALID_TIMESTAMP_MESSAGE, errors)
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    if (now_ms - scan.min_timestamp > before) or (scan.max_timestamp - now_ms > after):
        errors = timestamp_errors(batch, 0, now_ms, before, after)
        if errors:
            raise InvalidTimestampError(INVALID_TIMESTAMP_MESSAGE, errors)
    max_ts = scan.max_timestamp
    rewritten: bytearray | None = None
    if h.max_timestamp != max_ts:  # fix a wrong producer value, as Kafka does
        rewritten = bytearray(batch)
        set_max_timestamp(rewritten, 0, max_ts, CREATE_TIME)
    return _new_tuple(ValidatedBatch,
                      (h, rewritten, scan.min_timestamp, max_ts, scan.late, scan.max_lateness))


def check_keys(batch: Buffer, config: LogConfig, *, now_ms: int, partition: str) -> None:
    """Kafka's LogValidator.validateKey for a compacted topic: every record needs a
    key. The batch fails with INVALID_RECORD and one record error per keyless
    record, or INVALID_TIMESTAMP when another record's timestamp is also bad."""
    missing = null_key_indexes(batch)
    if not missing:
        return
    msg = f"Compacted topic cannot accept message without key in topic partition {partition}"
    errors = [(i, msg) for i in missing]
    if not config.log_append_time:
        bad = set(missing)
        ts_errors = [e for e in timestamp_errors(
            batch, 0, now_ms, config.message_timestamp_before_max_ms,
            config.message_timestamp_after_max_ms) if e[0] not in bad]
        if ts_errors:
            raise InvalidTimestampError(INVALID_TIMESTAMP_MESSAGE, sorted(errors + ts_errors))
    raise InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors "
        f"in total: {msg}", errors)
