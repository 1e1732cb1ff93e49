"""``chronolog produce TOPIC``: one record per input line, from stdin or ``--file``.

``--input-format lines`` (the default): without column options the whole line
(without its line ending) is the value. With ``--key-column`` and/or
``--timestamp-column`` the line is split on ``--separator`` (default a tab);
columns are numbered from 1 like ``cut -f``; the key and timestamp columns are
taken out and the remaining columns, joined by the separator again, are the
value (or ``--value-column`` picks one). ``--input-format jsonl`` (one JSON
object per line) and ``csv`` (a header row, then Python's csv rules) take
``--key-field``, ``--timestamp-field`` and ``--value-field`` by name; the value
is the whole line (row) unless ``--value-field`` picks one. Timestamps follow
``--timestamp-format`` (default ``auto``: ISO-8601 with a zone, epoch ms, a JSON
number as epoch ms); a time without a zone is read in ``--timezone`` (default UTC
for jsonl, csv and an explicit format; the tab-separated format without either
option refuses it, as ``--time`` does). Without a timestamp each record gets the
producer's clock at the time it is read.

Invariants: bytes are passed through untouched (no decoding of keys or
values); input is read off the event loop, so records from a slow pipe are
sent within ``--linger-ms`` of arriving; lines are sent in input order, so records of one partition get
increasing offsets in line order; a line that cannot be parsed stops the
command with its line number, after flushing what came before (which stays
acknowledged and is counted in the message), or with ``--on-error skip`` is
left out and counted on stderr at the end.

Speed: input is read in blocks (up to 1 MiB, or whatever a pipe has) and split
into lines in bulk; each block's lines become key/value/timestamp columns and
go out through ``Client.produce_columns`` (batches built column-wise, several
Produce requests in flight across blocks), never one Python record per line.
``--idempotent`` goes through the batching :class:`client.producer.Producer`
(record by record), whose retries keep sequence numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, tzinfo
from typing import Any, BinaryIO

from client.aio import COMPRESSION_CODECS, Client, Placement, ProducerRecord, ProduceWindow
from client.cli._common import (
    add_bootstrap,
    add_command,
    config_arg,
    connect,
    progress,
    require_topic,
    run,
)
from client.cli._input import (
    TIMESTAMP_FORMATS,
    CsvParser,
    InputParser,
    JsonLinesParser,
    LineParser,
    Parsed,
    TimestampReader,
)
from client.producer import Producer
from protocol.errors import KafkaError

__all__ = ["LineParser", "read_blocks", "register"]

#: How many skipped lines ``--on-error skip`` describes one by one before only counting.
SHOWN_SKIPS = 10


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "produce", "produce lines from stdin or a file as records", __doc__)
    p.add_argument("topic")
    p.add_argument("--file", "-f", metavar="PATH", help="read lines from PATH instead of stdin")
    p.add_argument("--input-format", choices=["lines", "jsonl", "csv"], default="lines",
                   help="lines: a line (or its --separator columns) per record (default); "
                   "jsonl: a JSON object per line; csv: a header row, then a record per row")
    p.add_argument("--separator", default=None,
                   help="column separator (default: tab; for csv a comma)")
    p.add_argument("--key-column", type=int, metavar="N", help="column N (from 1) is the key")
    p.add_argument(
        "--timestamp-column",
        type=int,
        metavar="N",
        help="column N (from 1) is the timestamp (see --timestamp-format)",
    )
    p.add_argument(
        "--value-column", type=int, metavar="N", help="column N is the value (default: the rest)"
    )
    p.add_argument("--key-field", metavar="NAME", help="jsonl/csv: field NAME is the key")
    p.add_argument("--timestamp-field", metavar="NAME",
                   help="jsonl/csv: field NAME is the timestamp (see --timestamp-format)")
    p.add_argument("--value-field", metavar="NAME",
                   help="jsonl/csv: field NAME is the value (default: the whole line or row)")
    p.add_argument(
        "--timestamp-format", default=None, metavar="FORMAT",
        help=f"{'|'.join(TIMESTAMP_FORMATS)}|a strftime pattern such as '%%d/%%m/%%Y %%H:%%M' "
        "(default auto: ISO-8601 with a zone, epoch ms, or a JSON number as epoch ms)",
    )
    p.add_argument(
        "--timezone", default=None, metavar="ZONE",
        help="IANA zone (Europe/Paris) for times without a zone; default UTC for jsonl, "
        "csv and an explicit --timestamp-format (the tab-separated format refuses them)",
    )
    p.add_argument("--on-error", choices=["stop", "skip"], default="stop",
                   help="a malformed line: stop there (default; earlier lines stay produced) "
                   "or skip it and count it on stderr")
    p.add_argument(
        "--header",
        type=config_arg,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="add this header to every record (repeatable)",
    )
    p.add_argument("--partition", type=int, help="send everything to this partition")
    p.add_argument(
        "--acks", type=int, choices=[-1, 0, 1], default=1, help="-1 = all, 0 = none, 1 = leader"
    )
    p.add_argument("--compression", choices=sorted(COMPRESSION_CODECS), default=None)
    p.add_argument(
        "--idempotent",
        action="store_true",
        help="Kafka's idempotent producer: re-send a batch whose answer was lost, "
        "stored at most once (needs --acks -1 or 1)",
    )
    p.add_argument("--linger-ms", type=float, default=5.0, help="batching delay (default 5)")
    p.add_argument(
        "--batch-bytes", type=int, default=1024 * 1024, help="batch size limit (default 1 MiB)"
    )
    p.add_argument(
        "--print-offsets",
        action="store_true",
        help="print 'partition<TAB>offset' for every line, in input order",
    )
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    add_bootstrap(p)
    p.set_defaults(func=lambda a: run(lambda: _produce(a)))


async def read_blocks(
    source: BinaryIO, block: int = 1 << 20
) -> AsyncIterator[tuple[list[bytes], int, bool]]:
    """Whole lines of ``source`` (without their ``\\n``) a block at a time, with the
    bytes they took and whether those hold a ``\\r``; read off the event loop,
    whatever is available (``read1``), so a slow pipe's lines are handed on as they
    arrive."""
    loop = asyncio.get_running_loop()
    read1 = getattr(source, "read1", source.read)
    rest = b""
    while True:
        chunk: bytes = await loop.run_in_executor(None, read1, block)
        if not chunk:
            if rest:
                yield [rest], len(rest), b"\r" in rest
            return
        data = rest + chunk if rest else chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            rest = data
            continue
        rest = data[cut:]
        whole = data[: cut - 1]
        yield whole.split(b"\n"), cut, b"\r" in whole


def make_parser(args: argparse.Namespace) -> InputParser:
    """The input parser the options describe; contradictory options are a ValueError."""
    fmt = args.input_format
    columns = {"--key-column": args.key_column, "--timestamp-column": args.timestamp_column,
               "--value-column": args.value_column}
    fields = {"--key-field": args.key_field, "--timestamp-field": args.timestamp_field,
              "--value-field": args.value_field}
    if fmt == "lines":
        if given := [k for k, v in fields.items() if v is not None]:
            raise ValueError(f"{given[0]} needs --input-format jsonl or csv "
                             "(tab-separated lines take --key-column and the like)")
    elif given := [k for k, v in columns.items() if v is not None]:
        raise ValueError(f"{given[0]} is for --input-format lines; {fmt} input names fields "
                         f"(--{given[0][2:].replace('column', 'field')} NAME)")
    has_ts = args.timestamp_column is not None or args.timestamp_field is not None
    if not has_ts and (args.timestamp_format or args.timezone):
        opt = "--timestamp-format" if args.timestamp_format else "--timezone"
        raise ValueError(f"{opt} needs a timestamp: --timestamp-"
                         f"{'column N' if fmt == 'lines' else 'field NAME'}")
    zone = _zone(args.timezone) if args.timezone else None
    if zone is None and (fmt != "lines" or args.timestamp_format):
        zone = UTC
    timestamps = TimestampReader(args.timestamp_format or "auto", zone)
    headers = [(k, v.encode("utf-8")) for k, v in args.header]
    sep = args.separator
    if sep is not None and "\\" in sep:  # let users type --separator '\t' or ',' alike
        sep = codecs.decode(sep, "unicode_escape")
    if fmt == "jsonl":
        if sep is not None:
            raise ValueError("--separator does not apply to jsonl input")
        return JsonLinesParser(args.key_field, args.timestamp_field, args.value_field, headers,
                               timestamps)
    if fmt == "csv":
        return CsvParser(args.key_field, args.timestamp_field, args.value_field, headers,
                         timestamps, "," if sep is None else sep)
    return LineParser(("\t" if sep is None else sep).encode("utf-8"), args.key_column,
                      args.timestamp_column, args.value_column, headers, timestamps)


def _zone(name: str) -> tzinfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"--timezone {name!r} is not an IANA time zone name such as UTC, "
                         "Europe/Paris or America/New_York") from None


class _Skips:
    """``--on-error skip``: the first few skipped lines are named on stderr, all counted."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, errors: list[ValueError]) -> None:
        for e in errors:
            self.count += 1
            if self.count <= SHOWN_SKIPS:
                print(f"skipped {e}", file=sys.stderr)
            elif self.count == SHOWN_SKIPS + 1:
                print("skipping more malformed lines (counted at the end)", file=sys.stderr)


async def parsed_blocks(
    parser: InputParser, source: BinaryIO, skips: _Skips | None
) -> AsyncIterator[tuple[Parsed, int, ValueError | None]]:
    """Each block's parsed columns, the bytes it took, and the error that stops the
    input (None while it goes on); with ``skips`` bad lines are counted there instead."""
    lineno = 1
    skip = skips is not None
    async for lines, nbytes, has_cr in read_blocks(source):
        parsed = parser.parse_block(lines, lineno, has_cr, skip)
        lineno += len(lines)
        if parsed.errors and skips is None:
            yield parsed, nbytes, parsed.errors[0]
            return
        if skips is not None:
            skips.add(parsed.errors)
        yield parsed, nbytes, None
    parsed = parser.finish(skip)
    if parsed.errors and skips is None:
        yield parsed, 0, parsed.errors[0]
        return
    if skips is not None:
        skips.add(parsed.errors)
    yield parsed, 0, None


async def _produce(args: argparse.Namespace) -> int:
    parser = make_parser(args)
    skips = _Skips() if args.on_error == "skip" else None
    source: BinaryIO = open(args.file, "rb") if args.file else sys.stdin.buffer
    total = None
    if args.file:
        total = os.path.getsize(args.file)
    async with await connect(args) as client:
        await require_topic(client, args.topic)  # fail fast on an unknown topic
        bar = progress(total, "B", f"produce {args.topic}", not args.no_progress)
        blocks = parsed_blocks(parser, source, skips)
        try:
            if args.idempotent:
                sent, error, placed = await _produce_records(client, args, blocks, bar)
            else:
                sent, error, placed = await _produce_blocks(client, args, parser, blocks, bar)
        finally:
            bar.close()
            if source is not sys.stdin.buffer:
                source.close()
        if error is None and args.print_offsets:
            out = sys.stdout
            for parts, offsets in placed:
                out.writelines(f"{p}\t{o}\n" for p, o in zip(parts.tolist(), offsets.tolist(),
                                                               strict=True))
    suspects = parser.timestamps.suspects
    if suspects > 1:
        print(f"warning: {suspects} timestamps had ten digits and were read as milliseconds "
              "(1970); --timestamp-format epoch-s reads seconds", file=sys.stderr)
    if error is not None:
        acked = sent if isinstance(error, ValueError) else 0
        print(
            f"error: {error}" + (f" ({acked} record(s) before it were produced)" if acked else ""),
            file=sys.stderr,
        )
        if isinstance(error, ValueError) and args.on_error == "stop":
            print("(--on-error skip leaves malformed lines out and goes on)", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1
    if skips is not None and skips.count:
        print(f"Skipped {skips.count} malformed line(s).", file=sys.stderr)
    print(f"Produced {sent} record(s) to {args.topic}.", file=sys.stderr)
    return 0


async def _produce_blocks(
    client: Client, args: argparse.Namespace, parser: InputParser,
    blocks: AsyncIterator[tuple[Parsed, int, ValueError | None]], bar: Any,
) -> tuple[int, Exception | None, list[Placement]]:
    """Each block of lines as columns through one ProduceWindow (order kept across blocks)."""
    window = ProduceWindow(client)
    headers = parser.headers or None
    placed: list[Placement] = []
    sent = 0

    async def send(parsed: Parsed) -> None:
        nonlocal sent
        values = parsed.values
        if values:
            where = await client.produce_columns(
                args.topic, values, parsed.keys, parsed.stamps,
                [headers] * len(values) if headers else None,
                partition=args.partition, acks=args.acks, compression=args.compression,
                max_batch_bytes=args.batch_bytes, window=window,
            )
            if args.print_offsets:
                placed.append(where)
            sent += len(values)

    try:
        error = await _feed(blocks, bar, send, window.drain)
    finally:
        await window.abandon()
    return sent, error, placed


async def _feed(
    blocks: AsyncIterator[tuple[Parsed, int, ValueError | None]], bar: Any,
    send: Callable[[Parsed], Awaitable[None]], finish: Callable[[], Awaitable[object]],
) -> Exception | None:
    """``send`` each block of parsed lines (and advance ``bar``), then ``finish``; the
    error that stopped it: a malformed line's (its block's good lines are still sent
    first), else the KafkaError of sending, else None."""
    error: Exception | None = None
    try:
        async for parsed, nbytes, error in blocks:
            await send(parsed)
            if error is not None:
                break
            bar.update(nbytes)
        await finish()
    except KafkaError as e:
        error = error or e
    return error


async def _produce_records(
    client: Client, args: argparse.Namespace,
    blocks: AsyncIterator[tuple[Parsed, int, ValueError | None]], bar: Any,
) -> tuple[int, Exception | None, list[Placement]]:
    """Record by record through the idempotent batching Producer."""
    producer = Producer(
        client,
        linger_ms=args.linger_ms,
        batch_bytes=args.batch_bytes,
        acks=args.acks,
        compression=args.compression,
        idempotent=args.idempotent,
    )
    futures = []
    sent = 0
    headers = [(k, v.encode("utf-8")) for k, v in args.header]

    async def send(parsed: Parsed) -> None:
        nonlocal sent
        n = len(parsed.values)
        keys = parsed.keys or [None] * n
        stamps = parsed.stamps or [None] * n
        for key, value, ts in zip(keys, parsed.values, stamps, strict=True):
            record = ProducerRecord(key=key, value=value, headers=headers, timestamp=ts)
            fut = await producer.send(args.topic, record, partition=args.partition)
            if args.print_offsets:
                futures.append(fut)
            sent += 1

    error = await _feed(blocks, bar, send, producer.flush)
    placed = []
    if error is None and futures:
        import numpy as np

        metas = [f.result() for f in futures]
        placed.append(Placement(np.array([m.partition for m in metas], dtype=np.int64),
                                np.array([m.offset for m in metas], dtype=np.int64)))
    return sent, error, placed
