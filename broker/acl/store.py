"""The durable ACL set: ``<data>/__chronolog/acls.json``.

Invariants:
- Every change is written whole (temp file, fsync, rename, fsync of the directory)
  before it is applied in memory and acknowledged, so a crash leaves the old or the
  new set and an acknowledged CreateAcls/DeleteAcls survives a restart.
- A file that does not parse stops the broker with a message naming it: starting
  with no ACLs would silently open everything that was closed.
"""

from __future__ import annotations

import json
from pathlib import Path

from broker.acl.authorizer import AclBinding, Authorizer, InvalidAcl, validate
from storage.fsutil import atomic_write_text

FILE_NAME = "acls.json"
_FIELDS = AclBinding._fields


def load(path: Path) -> list[AclBinding]:
    """The persisted bindings (none if the file does not exist yet)."""
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text())
        out = [AclBinding(*(row[f] for f in _FIELDS)) for row in doc["acls"]]
        for b in out:
            validate(b)
    except (ValueError, KeyError, TypeError, InvalidAcl) as exc:
        raise RuntimeError(f"ACL file {path} is unreadable: {exc}") from exc
    return out


def save(path: Path, acls: list[AclBinding]) -> None:
    rows = [b._asdict() for b in sorted(acls)]
    atomic_write_text(path, json.dumps({"version": 1, "acls": rows}, indent=1) + "\n")


class AclStore:
    """An :class:`Authorizer` whose changes are made durable first."""

    def __init__(self, state_dir: Path, authorizer: Authorizer) -> None:
        self.path = state_dir / FILE_NAME
        self.authorizer = authorizer
        for b in load(self.path):
            authorizer.add(b)

    def add(self, bindings: list[AclBinding]) -> None:
        new = set(self.authorizer.acls()) | set(bindings)
        save(self.path, list(new))
        for b in bindings:
            self.authorizer.add(b)

    def remove(self, bindings: list[AclBinding]) -> None:
        gone = set(bindings)
        save(self.path, [b for b in self.authorizer.acls() if b not in gone])
        for b in gone:
            self.authorizer.remove(b)
