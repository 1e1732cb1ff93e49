"""What the compaction tests with real clients share: fast cleaner settings and the
cleaner's checkpoint as written on disk.
"""

from __future__ import annotations

from pathlib import Path

OVERRIDES = {
    "log.cleaner.backoff.ms": "50",
    "log.retention.check.interval.ms": "3600000",
}


def cleaned_upto(data_dir: Path, topic: str) -> int:
    text = (data_dir / "cleaner-offset-checkpoint").read_text().split("\n")
    for line in text[2:]:
        parts = line.split()
        if parts and parts[0] == topic:
            return int(parts[2])
    raise AssertionError("no cleaner checkpoint for the topic")
