"""Topic ids and the ``partition.metadata`` file Kafka keeps in every partition directory.

Kafka (KIP-516) gives every topic a random 128-bit id when it is created and
writes it into each of the topic's partition directories, as text::

    version: 0
    topic_id: <id>

where ``<id>`` is Kafka's ``Uuid.toString()``: the 16 bytes in URL-safe base64
without padding (22 characters). Clients that receive assignments by topic id
(KIP-848) resolve them through Metadata, so the id must never change while the
topic lives, and a topic deleted and created again gets a new one.

Invariants:
- An id is never all zeros (Kafka's "no id") nor ``Uuid.ONE_UUID`` (reserved for
  the metadata topic), and its text form never starts with ``-`` (Kafka redraws
  those so the id cannot be mistaken for a command-line option).
- The file is replaced atomically (temp, fsync, rename, fsync of the directory),
  so a crash leaves the old file, the new file, or none — never half of one.
- A file that does not parse reads as "no id" (the directory then gets one
  assigned, as a directory without the file would).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path

from storage.fsutil import atomic_write_text

PARTITION_METADATA_FILE = "partition.metadata"
CURRENT_VERSION = 0
ZERO_ID = bytes(16)
ONE_ID = bytes(15) + b"\x01"
_LINE = re.compile(r"^\s*([a-z_]+)\s*:\s+(\S+)\s*$")


def id_to_str(topic_id: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    if len(topic_id) != 16:
        raise ValueError(f"a topic id is 16 bytes, not {len(topic_id)}")
    return base64.urlsafe_b64encode(topic_id).decode("ascii").rstrip("=")


def id_from_str(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``; raises ValueError for anything but 22 base64url chars."""
    if len(text) != 22:
        raise ValueError(f"a topic id is 22 base64url characters, not {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"topic id {text!r} is not base64url: {exc}") from None
    if id_to_str(raw) != text:
        raise ValueError(f"topic id {text!r} is not in canonical form")
    return raw


def new_topic_id() -> bytes:
    """A random id as Kafka's ``Uuid.randomUuid`` draws it (see the invariants)."""
    while True:
        raw = os.urandom(16)
        if raw not in (ZERO_ID, ONE_ID) and not id_to_str(raw).startswith("-"):
            return raw


def read_topic_id(partition_dir: str | os.PathLike[str]) -> bytes | None:
    """The id in ``partition_dir``'s ``partition.metadata``; None if missing or unreadable."""
    path = Path(partition_dir) / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            fields[m.group(1)] = m.group(2)
    if fields.get("version") != str(CURRENT_VERSION) or "topic_id" not in fields:
        return None
    try:
        topic_id = id_from_str(fields["topic_id"])
    except ValueError:
        return None
    return None if topic_id == ZERO_ID else topic_id


def write_topic_id(partition_dir: str | os.PathLike[str], topic_id: bytes) -> None:
    """Write (or replace) ``partition.metadata`` in ``partition_dir``, durably."""
    if topic_id == ZERO_ID:
        raise ValueError("the zero id means 'no topic id' and is never written")
    text = f"version: {CURRENT_VERSION}\ntopic_id: {id_to_str(topic_id)}"
    atomic_write_text(Path(partition_dir) / PARTITION_METADATA_FILE, text)
