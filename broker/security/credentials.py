"""SCRAM credentials in the data directory, and the data directory's lock.

Invariants:
- ``<data dir>/__chronolog/scram-credentials.json`` maps user -> mechanism -> Kafka's
  credential text (salt, StoredKey, ServerKey, iterations); never a password. Written
  with write-then-rename, so a crash leaves the old or the new file whole.
- A running broker holds an exclusive ``flock`` on ``<data dir>/.lock`` (Kafka's name);
  offline user changes take the same lock and are refused while a broker holds it.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from protocol.scram import ScramCredential
from storage.fsutil import atomic_write_text

STATE_DIR = "__chronolog"
FILE = "scram-credentials.json"
LOCK_FILE = ".lock"


class DataDirLocked(OSError):
    """Another process (a running broker) holds the data directory."""


class DataDirLock:
    """An exclusive lock on a data directory for as long as this object is held."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise DataDirLocked(f"{data_dir} is in use by a running broker") from None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class CredentialStore:
    """user -> mechanism -> credential, persisted in the data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / STATE_DIR / FILE
        self._creds: dict[str, dict[str, ScramCredential]] = {}
        self.load()

    def load(self) -> None:
        try:
            raw = json.loads(self.path.read_text())
            self._creds = {u: {m: ScramCredential.from_text(t) for m, t in ms.items()}
                           for u, ms in raw.items()}
        except FileNotFoundError:
            self._creds = {}
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            raise OSError(f"{self.path} is not a valid SCRAM credentials file "
                          f"({type(exc).__name__})") from None

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        raw = {u: {m: c.to_text() for m, c in sorted(ms.items())}
               for u, ms in sorted(self._creds.items())}
        atomic_write_text(self.path, json.dumps(raw, indent=1) + "\n")

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._creds.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(ms) for u, ms in self._creds.items()}

    def apply(self, upserts: list[tuple[str, str, ScramCredential]],
              deletions: list[tuple[str, str]]) -> None:
        """Apply a set of changes and persist them once."""
        for user, mech in deletions:
            ms = self._creds.get(user, {})
            ms.pop(mech, None)
            if not ms:
                self._creds.pop(user, None)
        for user, mech, cred in upserts:
            self._creds.setdefault(user, {})[mech] = cred
        self._save()
