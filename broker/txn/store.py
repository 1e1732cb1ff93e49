"""The transaction coordinator's durable state: an append-only log in the data dir.

``__chronolog/transactions.log`` holds one JSON line per state change of a
transactional id (the ``TxnMetadata`` record, as Kafka's compacted
``__transaction_state`` holds one value per key); the last line of an id wins.

Invariants:
- a change is written (``os.write`` of one whole line, O_APPEND) before the coordinator
  acts on it, so it survives kill -9 (the page cache outlives the process). A torn
  last line (the process died mid-write) is ignored on load: the change it carried
  was never acted on. Like Kafka's ``__transaction_state`` (a log under the broker's
  flush policy), the file is fsynced only once ``log.flush.interval.messages``
  changes are unsynced (default: never), so by default power loss is not covered;
  Kafka covers it with replication, which one node does not have
  (docs/transactions.md). With ``log.flush.interval.messages=1`` every change is on
  disk before the coordinator acts on it.
- on open, and whenever the lines written since the last compaction exceed
  ``COMPACT_MIN_LINES`` and ten times the number of ids, the log is compacted: the
  current state of every id is rewritten to a new file that atomically replaces the
  old one (fsync + rename), so the file stays proportional to the live ids.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from broker.txn.coordinator import TxnMetadata
from storage.config import LONG_MAX
from storage.fsutil import atomic_write_text

log = logging.getLogger("chronolog.broker")

FILE = "transactions.log"
COMPACT_MIN_LINES = 10_000


class TransactionStore:
    def __init__(self, state_dir: Path | str,
                 live: Callable[[], Iterable[TxnMetadata]] | None = None,
                 flush_messages: Callable[[], int] = lambda: LONG_MAX) -> None:
        self.path = Path(state_dir) / FILE
        self._fd = -1
        self._live = live
        self._lines = 0
        self._flush_messages = flush_messages
        self._unsynced = 0

    def load(self) -> list[TxnMetadata]:
        """The last stored state of every transactional id; compacts the file."""
        latest: dict[str, TxnMetadata] = {}
        if self.path.exists():
            for n, line in enumerate(self.path.read_bytes().split(b"\n")):
                if not line.strip():
                    continue
                try:
                    meta = TxnMetadata.from_record(json.loads(line))
                except (ValueError, KeyError, TypeError, IndexError):
                    log.warning("%s line %d is torn or unreadable; ignored", self.path, n + 1)
                    continue
                latest[meta.transactional_id] = meta
        self._rewrite(latest.values())
        return list(latest.values())

    def _rewrite(self, metas: Iterable[TxnMetadata]) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        text = "".join(json.dumps(m.to_record(), separators=(",", ":")) + "\n" for m in metas)
        atomic_write_text(self.path, text)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lines = 0
        self._unsynced = 0

    def write(self, meta: TxnMetadata) -> None:
        line = (json.dumps(meta.to_record(), separators=(",", ":")) + "\n").encode()
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._fd, line)
        self._lines += 1
        self._unsynced += 1
        if self._unsynced >= self._flush_messages():
            os.fsync(self._fd)
            self._unsynced = 0
        if self._live is not None and self._lines >= COMPACT_MIN_LINES:
            live = list(self._live())
            if self._lines >= 10 * len(live):
                self._rewrite(live)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
