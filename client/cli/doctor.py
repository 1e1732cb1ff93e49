"""``chronolog doctor DATA_DIR``: check a data directory offline, read-only.

What it checks, per partition directory (``<topic>-<partition>``):
- every batch of every ``.log``: header, CRC-32C, records decode, offsets
  strictly increasing within and across segments, batches at or above their
  segment's base offset, a torn tail (a partial batch at the end of a file);
- both indexes against the log (the rules in ``client.cli.dump_log``,
  including Kafka's ``sanityCheck``), orphan index files and leftover
  ``.deleted``/``.cleaned``/``.swap`` files;
and for the data directory: ``recovery-point-offset-checkpoint`` and
``log-start-offset-checkpoint`` (format, known partitions, offsets within the
log), and whether the last shutdown was clean (``.kafka_cleanshutdown``).

Invariants: nothing is modified (a doctor that "repairs" destroys the evidence;
the broker's recovery is the repair). Every finding is one line naming the file
it concerns; the exit status is 1 when any PROBLEM line was printed, 0 when
only warnings (or nothing) were found, 2 when the directory cannot be read.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from client.cli.dump_log import (
    Finding,
    LogScan,
    is_partition_dir,
    scan_log,
    segments_in,
    verify_indexes,
)

RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
_SEGMENT_FILE_RE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)"
                              r"(\.deleted|\.cleaned|\.swap)?$")


@dataclass
class PartitionReport:
    topic: str
    partition: int
    path: Path
    scans: list[LogScan] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def log_end_offset(self) -> int:
        for scan in reversed(self.scans):
            if scan.batches:
                return scan.next_offset
        return self.scans[-1].base_offset if self.scans else 0

    @property
    def first_offset(self) -> int:
        return self.scans[0].base_offset if self.scans else 0


def parse_partition_dir(path: Path) -> tuple[str, int]:
    topic, _, part = path.name.rpartition("-")
    return topic, int(part)


def check_partition(path: Path) -> PartitionReport:
    topic, part = parse_partition_dir(path)
    report = PartitionReport(topic, part, path)
    segs = segments_in(path)
    bases = {s.base_offset for s in segs}
    for p in sorted(path.iterdir()):
        m = _SEGMENT_FILE_RE.match(p.name)
        if m is None:
            continue
        if m.group(3):
            report.findings.append(Finding(p, f"leftover {m.group(3)} file (an interrupted "
                                           "delete, clean or swap; the broker finishes it)",
                                           problem=False))
        elif m.group(2) in ("index", "timeindex") and int(m.group(1)) not in bases:
            report.findings.append(Finding(p, "index file without a .log segment (orphan; the "
                                           "broker deletes it on load)", problem=False))
    prev_next: int | None = None
    for i, seg in enumerate(segs):
        try:
            scan = scan_log(seg.log)
        except OSError as exc:
            report.findings.append(Finding(seg.log, f"cannot read: {exc}"))
            continue
        report.scans.append(scan)
        report.findings += scan.findings()
        if prev_next is not None and seg.base_offset < prev_next:
            report.findings.append(Finding(seg.log, f"segment base offset {seg.base_offset} "
                                           f"overlaps the previous segment, which ends at offset "
                                           f"{prev_next - 1}"))
        if scan.batches:
            prev_next = scan.next_offset
        elif prev_next is None:
            prev_next = seg.base_offset
        sealed = i < len(segs) - 1
        if sealed and not scan.batches:
            report.findings.append(Finding(seg.log, "sealed segment holds no batches",
                                           problem=False))
        try:
            report.findings += verify_indexes(seg, scan, sealed=sealed)
        except OSError as exc:
            report.findings.append(Finding(seg.index, f"cannot read: {exc}"))
    return report


def read_checkpoint(path: Path) -> tuple[dict[tuple[str, int], int], list[Finding]]:
    """Parse Kafka's offset checkpoint text (version 0, count, ``topic partition offset``)."""
    findings: list[Finding] = []
    entries: dict[tuple[str, int], int] = {}
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        return entries, [Finding(path, f"cannot read: {exc}")]
    if len(lines) < 2:
        return entries, [Finding(path, "truncated: needs a version line and a count line")]
    if lines[0].strip() != "0":
        findings.append(Finding(path, f"unknown checkpoint version {lines[0].strip()!r} "
                                "(expected 0)"))
        return entries, findings
    try:
        count = int(lines[1].strip())
    except ValueError:
        return entries, [Finding(path, f"count line {lines[1]!r} is not a number")]
    body = [ln for ln in lines[2:] if ln.strip()]
    if count != len(body):
        findings.append(Finding(path, f"declares {count} entries but holds {len(body)}"))
    for n, ln in enumerate(body, start=3):
        parts = ln.split()
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].lstrip("-").isdigit():
            findings.append(Finding(path, f"line {n} {ln!r} is not 'topic partition offset'"))
            continue
        key = (parts[0], int(parts[1]))
        if key in entries:
            findings.append(Finding(path, f"line {n}: {parts[0]}-{parts[1]} listed twice"))
        entries[key] = int(parts[2])
    return entries, findings


def check_checkpoints(data_dir: Path, parts: dict[tuple[str, int], PartitionReport]) -> list[Finding]:
    out: list[Finding] = []
    for name in (RECOVERY_CHECKPOINT, LOG_START_CHECKPOINT):
        path = data_dir / name
        if not path.exists():
            if parts:
                out.append(Finding(path, "missing (written every "
                                   "log.flush.offset.checkpoint.interval.ms; recovery then "
                                   "starts from each log's first segment)", problem=False))
            continue
        entries, found = read_checkpoint(path)
        out += found
        for (topic, part), offset in sorted(entries.items()):
            rep = parts.get((topic, part))
            if rep is None:
                out.append(Finding(path, f"{topic}-{part} has no partition directory",
                                   problem=False))
                continue
            leo = rep.log_end_offset
            if offset < 0:
                out.append(Finding(path, f"{topic}-{part}: negative offset {offset}"))
            elif offset > leo:
                out.append(Finding(path, f"{topic}-{part}: offset {offset} is beyond the log "
                                   f"end offset {leo}"))
            elif name == LOG_START_CHECKPOINT and offset < rep.first_offset:
                out.append(Finding(path, f"{topic}-{part}: log start offset {offset} is below "
                                   f"the first segment's base offset {rep.first_offset}",
                                   problem=False))
    return out


def run_doctor(data_dir: Path) -> tuple[list[Finding], list[PartitionReport]]:
    reports = {}
    findings: list[Finding] = []
    for p in sorted(data_dir.iterdir()):
        if is_partition_dir(p):
            rep = check_partition(p)
            reports[(rep.topic, rep.partition)] = rep
            findings += rep.findings
    findings += check_checkpoints(data_dir, reports)
    return findings, list(reports.values())


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check a data directory offline (CRCs, torn tails, indexes, checkpoints)",
        description="Read-only health check of a stopped broker's data directory. Prints one "
        "line per finding; exits 1 if any PROBLEM is found.",
    )
    p.add_argument("data_dir", type=Path, metavar="DATA_DIR")
    p.add_argument("--quiet", action="store_true", help="print problems only, no warnings")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    if not data_dir.is_dir():
        print(f"{data_dir}: not a directory", file=sys.stderr)
        return 2
    try:
        findings, reports = run_doctor(data_dir)
    except OSError as exc:
        print(f"{data_dir}: {exc}", file=sys.stderr)
        return 2
    for f in findings:
        if f.problem or not args.quiet:
            print(f.line())
    problems = sum(1 for f in findings if f.problem)
    warnings = len(findings) - problems
    segments = sum(len(r.scans) for r in reports)
    batches = sum(len(s.batches) for r in reports for s in r.scans)
    clean = (data_dir / CLEAN_SHUTDOWN).exists()
    if clean and any(f.problem and f.path.parent != data_dir for f in findings):
        # The marker makes the next start skip recovery, which is what would repair
        # torn tails and indexes: say how to get it to run.
        print(Finding(data_dir / CLEAN_SHUTDOWN, "present, so the next start skips recovery and "
                      "will not repair the problems above; delete this file to force recovery",
                      problem=False).line())
    print(f"checked {len(reports)} partitions, {segments} segments, {batches} batches; "
          f"last shutdown {'clean' if clean else 'not marked clean (recovery will run)'}; "
          f"{problems} problem(s), {warnings} warning(s)")
    return 1 if problems else 0
