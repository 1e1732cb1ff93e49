"""Parse what Kafka's DumpLogSegments prints, so a test can compare it with an oracle.

One ``Dumping <path>`` header per file; under a ``.log`` one line per batch
(``baseOffset: … isvalid: true``) and, with ``--deep-iteration``, one ``| offset: …``
line per record; under an index one line per entry. Every line is ``name: value``
pairs with single-token values, which holds for the ASCII keys and values the
tests produce.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PAIR = re.compile(r"(\w+): (\[[^\]]*\]|\S+)")

# What DumpLogSegments prints when a segment's files disagree with Kafka's rules
# (core/src/main/scala/kafka/tools/DumpLogSegments.scala, 4.1).
ERROR_MARKERS = (
    "Mismatches in",
    "not found in the log",
    "timestamp mismatch",
    "out of order timestamp",
    "invalid bytes",
    "failed sanity check",
    "isvalid: false",
    "Exception",
)


def pairs(line: str) -> dict[str, str]:
    return dict(_PAIR.findall(line))


@dataclass
class DumpedFile:
    path: str
    batches: list[dict[str, str]] = field(default_factory=list)
    records: list[dict[str, str]] = field(default_factory=list)
    entries: list[dict[str, str]] = field(default_factory=list)
    other: list[str] = field(default_factory=list)


def parse(output: str) -> dict[str, DumpedFile]:
    """Per dumped file (its path), the batches, records and index entries printed."""
    files: dict[str, DumpedFile] = {}
    cur: DumpedFile | None = None
    for line in output.splitlines():
        if line.startswith("Dumping "):
            path = line[len("Dumping "):].strip()
            cur = files.setdefault(path, DumpedFile(path))
        elif cur is None:
            continue
        elif line.startswith("baseOffset:"):
            cur.batches.append(pairs(line))
        elif line.startswith("| offset:"):
            cur.records.append(pairs(line[2:]))
        elif line.startswith(("offset:", "timestamp:", "version:")):
            cur.entries.append(pairs(line))
        else:
            cur.other.append(line)
    return files


def errors(output: str) -> list[str]:
    """Lines in which DumpLogSegments reports a broken rule."""
    return [line for line in output.splitlines() if any(m in line for m in ERROR_MARKERS)]
