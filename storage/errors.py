"""Exceptions raised by the storage layer.

Storage knows nothing of the wire protocol; ``broker/errors.py`` maps each of
these to its Kafka error code in one place (named beside each class).
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class for everything storage raises on purpose."""


class CorruptRecordError(StorageError):
    """A batch fails its CRC, size or magic checks (CORRUPT_MESSAGE, 2)."""


class InvalidRecordError(StorageError):
    """A batch violates an append rule: wrong base offset, count, control batch (INVALID_RECORD, 87).

    ``record_errors`` lists ``(batch_index, message)`` for rules checked per record
    (a null key in a compacted topic), as Produce v8+ reports them.
    """

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.record_errors = record_errors or []


class RecordTooLargeError(StorageError):
    """A batch is larger than max.message.bytes (MESSAGE_TOO_LARGE, 10)."""


class RecordListTooLargeError(StorageError):
    """An append is larger than segment.bytes (RECORD_LIST_TOO_LARGE, 18)."""


class UnsupportedCompressionError(StorageError):
    """A batch uses a codec id outside 0..4 (UNSUPPORTED_COMPRESSION_TYPE, 76)."""


class InvalidTimestampError(StorageError):
    """Records outside message.timestamp.before/after.max.ms (INVALID_TIMESTAMP, 32).

    ``record_errors`` lists ``(batch_index, message)`` for every offending record,
    as Produce v8+ reports them; nothing of the batch was appended.
    """

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.record_errors = record_errors or []


class OffsetOutOfRangeError(StorageError):
    """A read or truncation offset outside [log start, log end] (OFFSET_OUT_OF_RANGE, 1)."""


class LogStorageError(StorageError):
    """An I/O failure such as a full disk (KAFKA_STORAGE_ERROR, 56); the append did not happen."""
