"""``chronolog dump-log``: show and verify segment files, like Kafka's DumpLogSegments.

This module also holds the read-only inspection that ``doctor`` and
``describe`` share: walking a ``.log`` file batch by batch, reading the raw
``.index``/``.timeindex`` entries, and checking both indexes against the log.

Invariants:
- Nothing here writes, truncates, renames or locks a file: the tools read what
  is on disk exactly, so they are safe on a crashed data dir and never "fix"
  the evidence. Files are read through a read-only mmap.
- Index entries are the file length / entry size, as Kafka reads them; only an
  all-zero suffix after the first entry is set aside as preallocation padding
  (a real entry past the first is never all zeros, offsets strictly increase).
- An index is consistent with its log when (Kafka's DumpLogSegments rules plus
  the running-max rule lookups rely on):
  * offset index: relative offsets strictly increase, positions strictly
    increase, each position is the start of a batch and that batch's last
    offset is the entry's offset;
  * time index: timestamps strictly increase, offsets never decrease, each
    offset is the last offset of a batch whose max record timestamp equals the
    entry's timestamp, and that timestamp is the running max of all records up
    to and including that batch; in a sealed segment the last entry is the
    segment's max timestamp;
  * Kafka's ``sanityCheck``: file length a multiple of the entry size, last
    offset >= base offset, last timestamp >= first timestamp.
"""

from __future__ import annotations

import argparse
import mmap
import os
import re
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from storage import txnindex
from storage.errors import StorageError
from storage.records import (
    BatchHeader,
    crc_ok,
    decode_batch,
    iter_batches,
    scan_timestamps,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
_SEGMENT_RE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)$")
_PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)$")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@dataclass(frozen=True)
class Finding:
    """One thing a check found; ``problem`` findings make the tools exit non-zero."""

    path: Path
    message: str
    problem: bool = True

    def line(self) -> str:
        return f"{'PROBLEM' if self.problem else 'WARNING'} {self.path}: {self.message}"


@dataclass
class SegmentFiles:
    base_offset: int
    log: Path
    index: Path
    timeindex: Path


@dataclass
class BatchInfo:
    position: int
    header: BatchHeader
    crc_valid: bool
    min_timestamp: int
    max_timestamp: int
    error: str | None = None  # records that do not decode

    @property
    def end(self) -> int:
        return self.position + self.header.size


@dataclass
class LogScan:
    """Everything learned from one pass over a ``.log`` file."""

    path: Path
    base_offset: int
    file_size: int
    batches: list[BatchInfo] = field(default_factory=list)
    valid_bytes: int = 0
    corrupt_at: int | None = None  # position of a batch whose header is invalid
    corrupt_reason: str = ""

    @property
    def torn_bytes(self) -> int:
        """Bytes after the last whole batch that are not a whole batch (0 if corrupt)."""
        return 0 if self.corrupt_at is not None else self.file_size - self.valid_bytes

    @property
    def next_offset(self) -> int:
        return self.batches[-1].header.last_offset + 1 if self.batches else self.base_offset

    @property
    def max_timestamp(self) -> int:
        return max((b.max_timestamp for b in self.batches), default=-1)

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        prev_last = self.base_offset - 1
        for b in self.batches:
            h = b.header
            if not b.crc_valid:
                out.append(Finding(self.path, f"batch at position {b.position} (offsets "
                                   f"{h.base_offset}..{h.last_offset}) fails its CRC-32C "
                                   f"(stored {h.crc:#010x})"))
            if b.error:
                out.append(Finding(self.path, f"batch at position {b.position}: {b.error}"))
            if h.base_offset <= prev_last:
                what = ("below the segment's base offset" if prev_last == self.base_offset - 1
                        else f"not above the previous batch's last offset {prev_last}")
                out.append(Finding(self.path, f"batch at position {b.position} has base offset "
                                   f"{h.base_offset}, {what}"))
            if h.last_offset - self.base_offset > 0x7FFFFFFF:
                out.append(Finding(self.path, f"batch at position {b.position} ends at offset "
                                   f"{h.last_offset}, beyond a relative int32 of the base"))
            prev_last = max(prev_last, h.last_offset)
        if self.corrupt_at is not None:
            out.append(Finding(self.path, f"corrupt batch header at position {self.corrupt_at}: "
                               f"{self.corrupt_reason}; {self.file_size - self.corrupt_at} "
                               f"bytes from there cannot be read"))
        elif self.torn_bytes:
            out.append(Finding(self.path, f"torn tail: {self.torn_bytes} bytes after the last "
                               f"complete batch (ending at position {self.valid_bytes}) are not a "
                               f"whole batch; recovery truncates them"))
        return out


@dataclass
class IndexRead:
    path: Path
    exists: bool
    file_size: int = 0
    entries: list[tuple[int, int]] = field(default_factory=list)  # raw (a, b) as stored
    padding_entries: int = 0


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            yield memoryview(b"")
            return
        mm = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)
        view = memoryview(mm)
        try:
            yield view
        finally:
            view.release()
            try:
                mm.close()
            except BufferError:
                pass  # a slice still refers to it; the mapping goes with the last reference


def base_offset_of(path: Path) -> int:
    stem = path.name.split(".", 1)[0]
    if not stem.isdigit():
        raise ValueError(f"{path.name} is not named after a base offset (20 digits)")
    return int(stem)


def scan_log(path: Path, *, check_records: bool = True) -> LogScan:
    """Walk every batch of a ``.log`` file: header, CRC, record timestamps."""
    base = base_offset_of(path)
    size = path.stat().st_size
    scan = LogScan(path, base, size)
    with _mapped(path) as buf:
        pos = 0
        try:
            for pos, h in iter_batches(buf):
                crc = crc_ok(buf, pos, h)
                mn, mx, err = h.base_timestamp, h.max_timestamp, None
                if check_records and crc:
                    try:
                        s = scan_timestamps(buf, pos, h)
                        mn, mx = s.min_timestamp, s.max_timestamp
                    except StorageError as exc:
                        err = f"records do not decode: {exc}"
                scan.batches.append(BatchInfo(pos, h, crc, mn, mx, err))
                scan.valid_bytes = pos + h.size
        except StorageError as exc:
            scan.corrupt_at = scan.valid_bytes
            scan.corrupt_reason = str(exc)
    return scan


def read_index(path: Path, time_index: bool) -> IndexRead:
    """Raw entries of an index file: (relative offset, position) or (timestamp, relative offset)."""
    if not path.exists():
        return IndexRead(path, False)
    entry = _TIME_ENTRY if time_index else _OFFSET_ENTRY
    with _mapped(path) as buf:
        size = len(buf)
        n = size // entry.size
        entries = [entry.unpack_from(buf, i * entry.size) for i in range(n)]
    zero = (0, 0)
    count = len(entries)
    while count > 1 and entries[count - 1] == zero:
        count -= 1
    if count == 1 and entries[0] == zero and (not time_index or len(entries) > 1):
        # An offset index never holds (0, 0): the first batch is never indexed. A time
        # index may (records at the epoch), but an all-zero file longer than one entry
        # is a preallocated file with no entries yet (the active segment of a live or
        # crashed broker).
        count = 0
    return IndexRead(path, True, size, entries[:count], len(entries) - count)


def segments_in(directory: Path) -> list[SegmentFiles]:
    """The segments of one partition directory, by base offset (from ``.log`` files)."""
    out = []
    for p in directory.iterdir():
        m = _SEGMENT_RE.match(p.name)
        if m and m.group(2) == "log":
            base = int(m.group(1))
            stem = directory / m.group(1)
            out.append(SegmentFiles(base, p, stem.with_suffix(INDEX_SUFFIX),
                                    stem.with_suffix(TIMEINDEX_SUFFIX)))
    return sorted(out, key=lambda s: s.base_offset)


def is_partition_dir(path: Path) -> bool:
    return path.is_dir() and _PARTITION_DIR_RE.match(path.name) is not None


def _index_file_findings(idx: IndexRead, entry_size: int, sealed: bool) -> list[Finding]:
    """What is wrong with an index file as a whole: its length, and (sealed) untrimmed padding."""
    out: list[Finding] = []
    if idx.file_size % entry_size:
        out.append(Finding(idx.path, f"length {idx.file_size} is not a multiple of {entry_size} "
                           "(Kafka's sanityCheck fails)"))
    if idx.padding_entries and sealed:
        out.append(Finding(idx.path, f"{idx.padding_entries} zero-filled entries after the "
                           "last real entry: the index was not trimmed when the segment "
                           "was sealed (KAFKA-10207)", problem=False))
    return out


def verify_indexes(seg: SegmentFiles, scan: LogScan, *, sealed: bool) -> list[Finding]:
    """Check both index files of one segment against its scanned log (see module doc)."""
    out: list[Finding] = []
    base = seg.base_offset
    by_position = {b.position: b for b in scan.batches}
    by_last_offset = {b.header.last_offset: i for i, b in enumerate(scan.batches)}
    running: list[int] = []
    mx = -1
    for b in scan.batches:
        mx = max(mx, b.max_timestamp)
        running.append(mx)

    oi = read_index(seg.index, time_index=False)
    if oi.exists:
        out += _index_file_findings(oi, _OFFSET_ENTRY.size, sealed)
        prev_rel, prev_pos = -1, -1
        for i, (rel, pos) in enumerate(oi.entries):
            where = f"entry {i} (offset {base + rel} -> position {pos})"
            if rel < 0:
                out.append(Finding(oi.path, f"{where}: negative relative offset "
                                   "(last offset below the base offset)"))
            if rel <= prev_rel or pos <= prev_pos:
                out.append(Finding(oi.path, f"{where}: not above the previous entry "
                                   f"(offset {base + prev_rel}, position {prev_pos})"))
            batch = by_position.get(pos)
            if batch is None:
                if pos >= scan.valid_bytes:
                    msg = f"position is beyond the log's {scan.valid_bytes} valid bytes"
                else:
                    msg = "no batch starts at that position"
                out.append(Finding(oi.path, f"{where}: {msg}"))
            elif batch.header.last_offset != base + rel:
                out.append(Finding(oi.path, f"{where}: index offset {base + rel} but the batch "
                                   f"there ends at log offset {batch.header.last_offset}"))
            prev_rel, prev_pos = max(prev_rel, rel), max(prev_pos, pos)
    elif scan.batches:
        out.append(Finding(seg.index, "offset index is missing (recovery rebuilds it)"))

    ti = read_index(seg.timeindex, time_index=True)
    if ti.exists:
        out += _index_file_findings(ti, _TIME_ENTRY.size, sealed)
        if ti.entries and ti.entries[-1][0] < ti.entries[0][0]:
            out.append(Finding(ti.path, f"last timestamp {ti.entries[-1][0]} is below the first "
                               f"{ti.entries[0][0]} (Kafka's sanityCheck fails)"))
        prev_ts, prev_rel = None, -1
        for i, (ts, rel) in enumerate(ti.entries):
            where = f"entry {i} (timestamp {ts} -> offset {base + rel})"
            if rel < 0:
                out.append(Finding(ti.path, f"{where}: negative relative offset"))
            if prev_ts is not None and ts <= prev_ts:
                out.append(Finding(ti.path, f"{where}: timestamp not above the previous "
                                   f"entry's {prev_ts}"))
            if rel < prev_rel:
                out.append(Finding(ti.path, f"{where}: offset below the previous entry's "
                                   f"{base + prev_rel}"))
            k = by_last_offset.get(base + rel)
            if k is None:
                out.append(Finding(ti.path, f"{where}: no batch ends at that offset"))
            else:
                bmax = scan.batches[k].max_timestamp
                if bmax != ts:
                    out.append(Finding(ti.path, f"{where}: the batch ending there has max "
                                       f"timestamp {bmax}"))
                elif running[k] != ts:
                    out.append(Finding(ti.path, f"{where}: records before it reach timestamp "
                                       f"{running[k]}, so lookups would skip them"))
            prev_ts, prev_rel = ts, max(prev_rel, rel)
        seg_max = scan.max_timestamp
        if scan.batches and seg_max >= 0:
            last_ts = ti.entries[-1][0] if ti.entries else -1
            if last_ts < seg_max:
                msg = (f"last entry's timestamp {last_ts} is below the segment's max timestamp "
                       f"{seg_max}")
                if sealed:
                    out.append(Finding(ti.path, msg + ": a sealed segment must end with its max"))
                else:
                    out.append(Finding(ti.path, msg + " (normal for the active segment of a "
                                       "running or crashed broker; close/recovery writes it)",
                                       problem=False))
    elif scan.batches:
        out.append(Finding(seg.timeindex, "time index is missing (recovery rebuilds it)"))
    return out


# ------------------------------------------------------------------ dumping


def _fmt_bytes(b: bytes | None, limit: int) -> str:
    if b is None:
        return "null"
    text = b[:limit].decode("utf-8", errors="backslashreplace")
    return text + ("..." if len(b) > limit else "")


def dump_log_file(path: Path, print_records: bool, max_bytes: int, out: list[str]) -> LogScan:
    scan = scan_log(path, check_records=True)
    out.append(f"Dumping {path}")
    out.append(f"Log starting offset: {scan.base_offset}")
    with _mapped(path) as buf:
        for b in scan.batches:
            h = b.header
            ts_type = "LogAppendTime" if h.timestamp_type else "CreateTime"
            last_seq = h.base_sequence + h.last_offset_delta if h.base_sequence >= 0 else -1
            out.append(
                f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {last_seq} "
                f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {str(h.is_transactional).lower()} "
                f"isControl: {str(h.is_control).lower()} position: {b.position} "
                f"{ts_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
                f"compresscodec: {_CODECS.get(h.compression, h.compression)} "
                f"crcValid: {str(b.crc_valid).lower()}"
            )
            if print_records:
                try:
                    records = decode_batch(buf, b.position)
                except StorageError as exc:
                    out.append(f"| records do not decode: {exc}")
                    continue
                if h.is_control and len(records) == 1 and records[0].key is not None \
                        and len(records[0].key) == 4 and records[0].value is not None \
                        and len(records[0].value) >= 6:
                    # Kafka's DumpLogSegments line for an end-transaction marker.
                    kind = int.from_bytes(records[0].key[2:4], "big")
                    coord = int.from_bytes(records[0].value[2:6], "big", signed=True)
                    out.append(f"| offset: {records[0].offset} {ts_type}: {records[0].timestamp} "
                               f"endTxnMarker: {'COMMIT' if kind == 1 else 'ABORT'} "
                               f"coordinatorEpoch: {coord}")
                    continue
                for r in records:
                    hdrs = ", ".join(f"{k}={_fmt_bytes(v, max_bytes)}" for k, v in r.headers)
                    out.append(
                        f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                        f"keySize: {-1 if r.key is None else len(r.key)} "
                        f"valueSize: {-1 if r.value is None else len(r.value)} "
                        f"headers: [{hdrs}] key: {_fmt_bytes(r.key, max_bytes)} "
                        f"payload: {_fmt_bytes(r.value, max_bytes)}"
                    )
    for f in scan.findings():
        out.append(f.line())
    return scan


def dump_index_file(path: Path, out: list[str]) -> None:
    time_index = path.suffix == TIMEINDEX_SUFFIX
    base = base_offset_of(path)
    idx = read_index(path, time_index)
    out.append(f"Dumping {path}")
    for a, b in idx.entries:
        if time_index:
            out.append(f"timestamp: {a} offset: {base + b}")
        else:
            out.append(f"offset: {base + a} position: {b}")
    if idx.padding_entries:
        out.append(f"({idx.padding_entries} zero-filled preallocated entries not shown)")


def dump_txnindex_file(path: Path, out: list[str]) -> None:
    """A ``.txnindex`` (aborted transactions), one line per entry as Kafka prints it."""
    data = path.read_bytes()
    entries = txnindex.decode(data)
    out.append(f"Dumping {path}")
    out += [f"version: {txnindex.VERSION} producerId: {e.producer_id} firstOffset: "
            f"{e.first_offset} lastOffset: {e.last_offset} lastStableOffset: "
            f"{e.last_stable_offset}" for e in entries]
    if len(data) != len(entries) * txnindex.ENTRY_SIZE:
        out.append(f"({len(data) - len(entries) * txnindex.ENTRY_SIZE} trailing bytes are not "
                   "a whole entry of version 0)")


def _segment_of(path: Path) -> SegmentFiles:
    base = base_offset_of(path)
    stem = path.parent / path.name.split(".", 1)[0]
    return SegmentFiles(base, stem.with_suffix(LOG_SUFFIX), stem.with_suffix(INDEX_SUFFIX),
                        stem.with_suffix(TIMEINDEX_SUFFIX))


def _is_sealed(seg: SegmentFiles) -> bool:
    """A segment is sealed when a later segment exists in the same directory."""
    return any(s.base_offset > seg.base_offset for s in segments_in(seg.log.parent))


def expand_paths(paths: list[Path]) -> list[Path]:
    """Files as given; a partition directory becomes its .log/.index/.timeindex (and
    .txnindex, where a segment has aborted transactions) files."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            for seg in segments_in(p):
                txn = seg.log.with_suffix(txnindex.SUFFIX)
                out += [f for f in (seg.log, seg.index, seg.timeindex, txn) if f.exists()]
        else:
            out.append(p)
    return out


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "dump-log",
        help="print the batches, records and index entries of segment files",
        description="Dump .log, .index, .timeindex and .txnindex files (or every segment of a partition "
        "directory), like Kafka's DumpLogSegments. Reads only; never modifies a file.",
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="segment files or partition directories")
    p.add_argument("--print-records", action="store_true",
                   help="print every record (offset, timestamp, headers, key, payload)")
    p.add_argument("--max-bytes", type=int, default=256,
                   help="print at most this many bytes of each key/value/header (default 256)")
    p.add_argument("--verify-index", action="store_true",
                   help="check both indexes against the log; exit 1 on any mismatch")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problems = 0
    lines: list[str] = []

    def flush() -> None:
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
            lines.clear()

    paths = expand_paths(args.paths)
    logs_given = {p.resolve() for p in paths if p.suffix == LOG_SUFFIX}
    for path in paths:
        if not path.exists():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
        try:
            if path.suffix == LOG_SUFFIX:
                scan = dump_log_file(path, args.print_records, args.max_bytes, lines)
                findings = scan.findings()
                if args.verify_index:
                    seg = _segment_of(path)
                    findings = findings + verify_indexes(seg, scan, sealed=_is_sealed(seg))
                    for f in findings[len(scan.findings()):]:
                        lines.append(f.line())
                    problems += sum(1 for f in findings if f.problem)
            elif path.suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
                dump_index_file(path, lines)
                seg = _segment_of(path)
                # An index whose .log is also being dumped was verified with it.
                if args.verify_index and seg.log.resolve() not in logs_given:
                    if not seg.log.exists():
                        lines.append(f"PROBLEM {path}: no {seg.log.name} to verify against")
                        problems += 1
                    else:
                        found = [f for f in verify_indexes(seg, scan_log(seg.log),
                                                           sealed=_is_sealed(seg))
                                 if f.path == path]
                        lines += [f.line() for f in found]
                        problems += sum(1 for f in found if f.problem)
            elif path.suffix == txnindex.SUFFIX:
                dump_txnindex_file(path, lines)
            else:
                lines.append(f"Skipping {path}: not a .log, .index, .timeindex or .txnindex file")
        except (OSError, ValueError) as exc:
            flush()
            print(f"{path}: {exc}", file=sys.stderr)
            return 2
        flush()
    if args.verify_index:
        print(f"verify-index: {problems} mismatch(es)" if problems else "verify-index: ok")
    return 1 if problems else 0

