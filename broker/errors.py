"""Storage exceptions and handler failures to Kafka error codes, in one place.

Invariants:
- ``code_for(exc)`` is the only place an exception becomes an ``ErrorCode``:
  ``KafkaError`` carries its own code, each ``storage.errors`` class maps to the
  code named in its docstring, anything else is UNKNOWN_SERVER_ERROR.
- ``PartitionError`` is what per-partition response fields are filled from:
  the code, the message (Produce v8+ ``ErrorMessage``) and, for INVALID_TIMESTAMP,
  the per-record ``RecordErrors``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from protocol.errors import ErrorCode, KafkaError
from storage import errors as se
from storage.remote.store import RemoteStorageError

log = logging.getLogger("chronolog.broker")

_STORAGE_CODES: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (se.CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (se.InvalidRecordError, ErrorCode.INVALID_RECORD),
    (se.RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (se.RecordListTooLargeError, ErrorCode.RECORD_LIST_TOO_LARGE),
    (se.UnsupportedCompressionError, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (se.InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    (se.OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (se.LogStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    # The object store of the remote tier failed (KIP-405: Kafka answers a remote read
    # or lookup that failed with KAFKA_STORAGE_ERROR too).
    (RemoteStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
)

EXPECTED = (KafkaError, se.StorageError)


def code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code for an exception raised while serving a partition."""
    if isinstance(exc, KafkaError):
        return exc.code
    for cls, code in _STORAGE_CODES:
        if isinstance(exc, cls):
            return code
    if isinstance(exc, OSError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass
class PartitionError:
    """A partition's error as responses carry it."""

    code: ErrorCode
    message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)


def partition_error(exc: BaseException, where: str) -> PartitionError:
    """Turn an exception into the per-partition error, logging the unexpected ones with a traceback."""
    code = code_for(exc)
    if not isinstance(exc, EXPECTED):
        log.error("unexpected error serving %s", where, exc_info=exc)
    message = str(exc) or None
    if isinstance(exc, KafkaError):
        message = exc.message or None
    records = list(getattr(exc, "record_errors", []) or [])
    return PartitionError(code, message, records)
