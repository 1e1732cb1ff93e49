"""``chronolog consume TOPIC``: print records from a time or an offset, up to a time.

Range semantics (exact, per partition):
- start = ``--from-offset`` O, or the first offset whose timestamp >= ``--from-time``
  (ListOffsets), or the log start when neither is given;
- end (exclusive) = the first offset whose timestamp >= ``--until``, or the high
  watermark at start-up; with ``--follow`` and no ``--until`` it never ends.
Partitions are printed one after the other in ascending order (``--partition``
picks one), each in offset order; ``--max N`` stops after N records in total.
With ``--follow`` all partitions are followed at once and records print as
they arrive (each partition still in offset order); a partition that had no
record at or after ``--until`` yet ends at the first one that arrives.

Formats: ``text`` writes each value's raw bytes and a newline (``--print-timestamp``
and ``--print-key`` put the ISO timestamp and the key in front, tab-separated);
``json`` writes one
object per line with topic, partition, offset, timestamp (epoch ms and ISO),
key, value and headers — as UTF-8 strings when they decode, otherwise under
``key_base64`` / ``value_base64``, so no byte is lost.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from collections.abc import AsyncGenerator
from typing import Any

from client.aio import Client, Record
from client.cli._common import (
    add_bootstrap,
    add_command,
    allow_relative_times,
    connect,
    progress,
    require_topic,
    run,
    time_arg,
)
from client.timeparse import format_time
from protocol.errors import ErrorCode, KafkaError

ISOLATION = {"read_uncommitted": 0, "read_committed": 1}


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "consume", "print records from a time or offset, up to a time", __doc__)
    p.add_argument("topic")
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--from-time", type=time_arg, metavar="TIME",
        help="ISO-8601 with zone, epoch ms, or relative (-15m, -2h, -1d, now)",
    )
    start.add_argument("--from-offset", type=int, metavar="OFFSET", help="start at this offset")
    p.add_argument("--until", type=time_arg, metavar="TIME",
                   help="stop before the first record with timestamp >= TIME")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--print-timestamp", action="store_true",
                   help="text format: prefix each value with its ISO timestamp and a tab")
    p.add_argument("--print-key", action="store_true",
                   help="text format: prefix each value with its key and a tab")
    p.add_argument("--max", type=int, metavar="N", help="stop after N records")
    p.add_argument("--follow", action="store_true",
                   help="keep waiting for new records (until --until or Ctrl-C)")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.add_argument("--isolation", choices=sorted(ISOLATION), default="read_committed",
                   help="read_committed (default, as librdkafka): stop at the last stable "
                   "offset and skip aborted transactions; read_uncommitted: everything")
    add_bootstrap(p)
    allow_relative_times(p)
    p.set_defaults(func=lambda a: run(lambda: _consume(a)))


def _text_field(d: dict[str, Any], name: str, data: bytes | None) -> None:
    if data is None:
        d[name] = None
        return
    try:
        d[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        d[f"{name}_base64"] = base64.b64encode(data).decode("ascii")


def record_json(r: Record) -> str:
    """One record as a JSON line (see the module docstring for the byte rules)."""
    d: dict[str, Any] = {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_iso": format_time(r.timestamp),
    }
    _text_field(d, "key", r.key)
    _text_field(d, "value", r.value)
    headers = []
    for k, v in r.headers:
        h: dict[str, Any] = {"key": k}
        _text_field(h, "value", v)
        headers.append(h)
    d["headers"] = headers
    return json.dumps(d, ensure_ascii=False)


def text_line(r: Record, with_timestamp: bool, with_key: bool) -> bytes:
    """The raw value and a newline, optionally after the ISO timestamp and the key (tabs)."""
    line = (r.value or b"") + b"\n"
    if with_key:
        line = (r.key or b"") + b"\t" + line
    if with_timestamp:
        line = format_time(r.timestamp).encode("ascii") + b"\t" + line
    return line


async def plan(
    client: Client,
    topic: str,
    partitions: list[int],
    from_time: int | None,
    from_offset: int | None,
    until: int | None,
    follow: bool,
    isolation_level: int = 0,
) -> dict[int, tuple[int, int | None]]:
    """Per partition, the exact ``[start, end)`` to read (end None = follow forever); times
    and the end are resolved under ``isolation_level``."""
    earliest = await client.earliest(topic, partitions)
    latest = await client.latest(topic, partitions, isolation_level)
    starts: dict[int, int]
    if from_time is not None:
        found = await client.offsets_for_times(topic, from_time, partitions, isolation_level)
        starts = {}
        for p in partitions:
            hit = found[p]
            starts[p] = latest[p] if hit is None else hit[0]
    elif from_offset is not None:
        starts = {}
        for p in partitions:
            if from_offset < earliest[p]:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"partition {p}: offset {from_offset} is below the log start {earliest[p]}",
                )
            starts[p] = min(from_offset, latest[p]) if not follow else from_offset
    else:
        starts = dict(earliest)
    ends: dict[int, int | None]
    if until is not None:
        found = await client.offsets_for_times(topic, until, partitions, isolation_level)
        ends = {}
        for p in partitions:
            hit = found[p]
            ends[p] = hit[0] if hit is not None else (None if follow else latest[p])
    else:
        ends = {p: None if follow else latest[p] for p in partitions}
    return {p: (starts[p], ends[p]) for p in partitions}


async def _one_after_another(
    client: Client, topic: str, ranges: dict[int, tuple[int, int | None]],
    isolation_level: int = 0,
) -> AsyncGenerator[list[Record], None]:
    for p, (start, end) in sorted(ranges.items()):
        if end is not None and start >= end:
            continue
        async for chunk in client.consume_chunks(topic, p, start, end, follow=False,
                                                 isolation_level=isolation_level):
            yield chunk


async def _follow_all(
    client: Client, topic: str, ranges: dict[int, tuple[int, int | None]], until: int | None,
    isolation_level: int = 0,
) -> AsyncGenerator[list[Record], None]:
    """Follow every partition at once, yielding chunks as they arrive.

    A partition whose end was unknown at start-up (no record at or after
    ``--until`` yet) ends at the first record that arrives with a timestamp
    >= ``until``: that record's offset is by definition the range's end.
    """
    # Chunks wait for one of 64 slots (back-pressure); end markers and errors never
    # wait, so a cancelled follower always finishes.
    queue: asyncio.Queue[list[Record] | BaseException | None] = asyncio.Queue()
    slots = asyncio.Semaphore(64)

    async def put(chunk: list[Record]) -> None:
        await slots.acquire()
        queue.put_nowait(chunk)

    async def follow(p: int, start: int, end: int | None) -> None:
        try:
            async for chunk in client.consume_chunks(topic, p, start, end, follow=True,
                                                     isolation_level=isolation_level):
                if until is not None and end is None:
                    cut = next((i for i, r in enumerate(chunk) if r.timestamp >= until), None)
                    if cut is not None:
                        if cut:
                            await put(chunk[:cut])
                        return
                await put(chunk)
        except Exception as e:  # handed to the printer, which raises it
            queue.put_nowait(e)
        finally:
            queue.put_nowait(None)

    tasks = [
        asyncio.ensure_future(follow(p, s, e))
        for p, (s, e) in sorted(ranges.items())
        if e is None or s < e
    ]
    running = len(tasks)
    try:
        while running:
            item = await queue.get()
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                slots.release()
                yield item
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _consume(args: argparse.Namespace) -> int:
    if args.max is not None and args.max < 0:
        raise ValueError(f"--max must be >= 0, got {args.max}")
    out = sys.stdout.buffer
    as_json = args.format == "json"
    count = 0
    async with await connect(args) as client:
        parts = await require_topic(client, args.topic)
        if args.partition is not None:
            if args.partition not in parts:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {args.topic!r} has no partition {args.partition}",
                )
            parts = [args.partition]
        isolation = ISOLATION[args.isolation]
        ranges = await plan(
            client, args.topic, parts, args.from_time, args.from_offset, args.until, args.follow,
            isolation,
        )
        known = [e - s for s, e in ranges.values() if e is not None]
        total = sum(known) if len(known) == len(ranges) else None
        if args.max is not None and total is not None:
            total = min(total, args.max)
        bar = progress(total, "rec", f"consume {args.topic}", not args.no_progress)
        source = (
            _follow_all(client, args.topic, ranges, args.until, isolation)
            if args.follow
            else _one_after_another(client, args.topic, ranges, isolation)
        )
        try:
            async for chunk in source:
                if args.max is not None:
                    chunk = chunk[: args.max - count]
                if as_json:
                    out.write("".join(record_json(r) + "\n" for r in chunk).encode("utf-8"))
                else:
                    out.write(b"".join(text_line(r, args.print_timestamp, args.print_key)
                                       for r in chunk))
                if args.follow:
                    out.flush()
                count += len(chunk)
                bar.update(len(chunk))
                if args.max is not None and count >= args.max:
                    break
        finally:
            await source.aclose()
            bar.close()
            out.flush()
    print(f"Consumed {count} record(s) from {args.topic}.", file=sys.stderr)
    return 0
