"""``chronolog describe TOPIC``: per-partition offsets, timestamps and sizes.

Two sources, same columns:
- ``--data-dir D`` reads a (stopped or running) broker's files read-only: log
  start (the log-start-offset checkpoint, else the first segment's base), log
  end, segment count, bytes, and first/last/max timestamps from the batch
  headers plus the first and last batch's records;
- ``--bootstrap-server HOST:PORT`` (the default, from ``$CHRONOLOG_BOOTSTRAP_SERVER``
  else 127.0.0.1:9092, as every client command) asks a running broker over the Kafka
  protocol (ListOffsets EARLIEST/LATEST/MAX_TIMESTAMP and two Fetches), which
  works against any Kafka broker; segment count and bytes are not part of
  that protocol and show as ``-``.

Invariant: "first"/"last" are the timestamps of the records at the log start
and at log end - 1 (offset order), "max" is the largest timestamp in the
partition: with CreateTime these differ whenever producers send out of order,
which is exactly what a person debugging a time lookup needs to see.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from client.cli._common import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    client_security,
    missing_topic_message,
    require_topic,
)
from client.cli.doctor import LOG_START_CHECKPOINT, read_checkpoint
from client.cli.dump_log import LogScan, _mapped, is_partition_dir, scan_log, segments_in
from client.timeparse import format_time
from protocol.errors import KafkaError
from storage.errors import StorageError
from storage.records import decode_batch

if TYPE_CHECKING:
    from client.security import ClientSecurity


@dataclass
class PartitionInfo:
    partition: int
    log_start_offset: int
    log_end_offset: int
    segments: int | None
    bytes: int | None
    first_timestamp: int | None
    last_timestamp: int | None
    max_timestamp: int | None


def describe_offline(data_dir: Path, topic: str) -> list[PartitionInfo]:
    starts: dict[tuple[str, int], int] = {}
    cp = data_dir / LOG_START_CHECKPOINT
    if cp.exists():
        starts, _ = read_checkpoint(cp)
    out = []
    for d in sorted(data_dir.iterdir()):
        if not is_partition_dir(d):
            continue
        name, _, part_s = d.name.rpartition("-")
        if name != topic:
            continue
        part = int(part_s)
        segs = segments_in(d)
        scans = [scan_log(s.log, check_records=False) for s in segs]
        base = segs[0].base_offset if segs else 0
        start = max(starts.get((topic, part), base), base)
        end = base
        for sc in scans:
            if sc.batches:
                end = sc.next_offset
        first_ts = last_ts = max_ts = None
        for sc in scans:
            for b in sc.batches:
                if b.header.last_offset >= start:
                    max_ts = b.max_timestamp if max_ts is None else max(max_ts, b.max_timestamp)
        first_ts = _record_ts(scans, start, first=True)
        last_ts = _record_ts(scans, end - 1, first=False) if end > start else None
        out.append(PartitionInfo(part, start, end, len(segs), sum(sc.file_size for sc in scans),
                                 first_ts, last_ts, max_ts))
    out.sort(key=lambda p: p.partition)
    return out


def _record_ts(scans: list[LogScan], offset: int, *, first: bool) -> int | None:
    """Timestamp of the record at ``offset`` (first: the first record at or after it)."""
    for sc in scans:
        for b in sc.batches:
            if b.header.last_offset < offset:
                continue
            try:
                with _mapped(sc.path) as buf:
                    recs = decode_batch(buf, b.position)
            except (StorageError, OSError):
                return None
            for r in recs:
                if (first and r.offset >= offset) or r.offset == offset:
                    return r.timestamp
            return None
    return None


async def describe_online(bootstrap: str, topic: str,
                          security: ClientSecurity | None = None) -> list[PartitionInfo]:
    from client.aio import Client

    client = await Client.connect(bootstrap, client_id="chronolog-describe", security=security)
    try:
        parts = await require_topic(client, topic)
        starts = await client.earliest(topic, parts)
        ends = await client.latest(topic, parts)
        maxes = await client.max_timestamp(topic, parts)
        out = []
        for p in parts:
            first = last = None
            if ends[p] > starts[p]:
                recs, _ = await client.fetch(topic, p, starts[p], 1 << 20)
                first = recs[0].timestamp if recs else None
                recs, _ = await client.fetch(topic, p, ends[p] - 1, 1 << 20)
                last = next((r.timestamp for r in recs if r.offset == ends[p] - 1), None)
            mx = maxes[p]
            out.append(PartitionInfo(p, starts[p], ends[p], None, None, first, last,
                                     mx[1] if mx is not None else None))
        return out
    finally:
        await client.close()


def _ts(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    try:
        return f"{format_time(ms)} ({ms})"
    except (ValueError, OverflowError):
        return str(ms)


def render(topic: str, infos: list[PartitionInfo]) -> str:
    headers = ("partition", "log start", "log end", "segments", "bytes", "first timestamp",
               "last timestamp", "max timestamp")
    rows = [(str(i.partition), str(i.log_start_offset), str(i.log_end_offset),
             "-" if i.segments is None else str(i.segments),
             "-" if i.bytes is None else f"{i.bytes:,}",
             _ts(i.first_timestamp), _ts(i.last_timestamp), _ts(i.max_timestamp))
            for i in infos]
    widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h)
              for k, h in enumerate(headers)]
    lines = [f"Topic: {topic}  partitions: {len(infos)}",
             "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(ln.rstrip() for ln in lines)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "describe",
        help="per-partition log start/end, segments, first/last/max timestamp, bytes",
        description="Describe a topic's partitions from a data directory (offline, read-only) "
        "or from a running broker.",
    )
    p.add_argument("topic", nargs="?", help="the topic (as in `topics describe TOPIC`)")
    p.add_argument("--topic", dest="topic_option", metavar="TOPIC",
                   help="the same, as an option (the older form)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--data-dir", type=Path, help="read the broker's files (read-only)")
    src.add_argument("--bootstrap-server", metavar="HOST:PORT",
                     help=f"ask a running broker (the default: ${BOOTSTRAP_ENV}, "
                     f"else {DEFAULT_BOOTSTRAP})")
    p.add_argument("--client-config", default=None, metavar="FILE",
                   help="with --bootstrap-server: client properties with Kafka/librdkafka "
                   "names (security.protocol, ssl.*, sasl.*; other settings ignored)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.topic and args.topic_option and args.topic != args.topic_option:
        print(f"describe: two topics given ({args.topic!r} and --topic {args.topic_option!r})",
              file=sys.stderr)
        return 2
    args.topic = args.topic or args.topic_option
    if not args.topic:
        print("describe: which topic? chronolog describe TOPIC", file=sys.stderr)
        return 2
    if args.data_dir is None and args.bootstrap_server is None:
        args.bootstrap_server = os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
    try:
        if args.data_dir is not None:
            if not args.data_dir.is_dir():
                print(f"{args.data_dir}: not a directory", file=sys.stderr)
                return 2
            infos = describe_offline(args.data_dir, args.topic)
        else:
            infos = asyncio.run(describe_online(args.bootstrap_server, args.topic,
                                                client_security(args.client_config)))
    except KafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # one clear line for the operator, not a traceback
        print(f"describe: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if not infos:
        if args.data_dir is not None:
            print(f"describe: topic {args.topic!r} not found in {args.data_dir}", file=sys.stderr)
        else:
            print(f"error: {missing_topic_message(args.topic)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"topic": args.topic, "partitions": [asdict(i) for i in infos]},
                         indent=1))
    else:
        print(render(args.topic, infos))
    return 0
