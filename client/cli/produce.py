"""``chronolog produce TOPIC``: one record per input line, from stdin or ``--file``.

Without column options the whole line (without its line ending) is the value.
With ``--key-column`` and/or ``--timestamp-column`` the line is split on
``--separator`` (default a tab); columns are numbered from 1 like ``cut -f``;
the key and timestamp columns are taken out and the remaining columns, joined
by the separator again, are the value (or ``--value-column`` picks one).
Timestamps are anything ``client.timeparse`` accepts (ISO-8601 with zone or
epoch milliseconds); without a timestamp column each record gets the
producer's clock at the time it is read.

Invariants: bytes are passed through untouched (no decoding of keys or
values); input is read off the event loop, so records from a slow pipe are
sent within ``--linger-ms`` of arriving; lines are sent in input order, so records of one partition get
increasing offsets in line order; a line that cannot be parsed stops the
command with its line number, after flushing what came before (which stays
acknowledged and is counted in the message).

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
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

from client.aio import COMPRESSION_CODECS, Client, Placement, ProducerRecord, ProduceWindow
from client.cli._common import add_bootstrap, add_command, config_arg, connect, progress, run
from client.producer import Producer
from client.timeparse import TimeParseError, parse_time
from protocol.errors import KafkaError


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "produce", "produce lines from stdin or a file as records", __doc__)
    p.add_argument("topic")
    p.add_argument("--file", "-f", metavar="PATH", help="read lines from PATH instead of stdin")
    p.add_argument("--separator", default="\t", help="column separator (default: tab)")
    p.add_argument("--key-column", type=int, metavar="N", help="column N (from 1) is the key")
    p.add_argument(
        "--timestamp-column",
        type=int,
        metavar="N",
        help="column N (from 1) is the timestamp: ISO-8601 with zone or epoch ms",
    )
    p.add_argument(
        "--value-column", type=int, metavar="N", help="column N is the value (default: the rest)"
    )
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


class LineParser:
    """Turns one input line into a ProducerRecord according to the column options."""

    def __init__(
        self,
        separator: bytes,
        key_column: int | None,
        timestamp_column: int | None,
        value_column: int | None,
        headers: list[tuple[str, bytes]],
    ) -> None:
        for name, col in (("key", key_column), ("timestamp", timestamp_column),
                          ("value", value_column)):
            if col is not None and col < 1:
                raise ValueError(f"--{name}-column counts from 1, got {col}")
        if not separator:
            raise ValueError("--separator must not be empty")
        self.sep = separator
        self.key_col = key_column
        self.ts_col = timestamp_column
        self.value_col = value_column
        self.headers = headers
        self.split = any(c is not None for c in (key_column, timestamp_column, value_column))
        used = [c for c in (key_column, timestamp_column, value_column) if c is not None]
        if len(set(used)) != len(used):
            raise ValueError("key, timestamp and value columns must differ")
        self.need = max(used, default=0)

    def parse(self, line: bytes, lineno: int) -> ProducerRecord:
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if not self.split:
            return ProducerRecord(value=line, headers=self.headers)
        cols = line.split(self.sep)
        if len(cols) < self.need:
            raise ValueError(
                f"line {lineno}: has {len(cols)} column(s), column {self.need} is needed"
            )
        key = cols[self.key_col - 1] if self.key_col else None
        ts: int | None = None
        if self.ts_col:
            raw = cols[self.ts_col - 1]
            try:
                ts = parse_time(raw.decode("ascii", "replace"))
            except TimeParseError as e:
                raise ValueError(f"line {lineno}: bad timestamp: {e}") from None
        if self.value_col:
            value = cols[self.value_col - 1]
        else:
            skip = {c - 1 for c in (self.key_col, self.ts_col) if c}
            value = self.sep.join(c for i, c in enumerate(cols) if i not in skip)
        return ProducerRecord(key=key, value=value, headers=self.headers, timestamp=ts)


    def parse_block(
        self, lines: list[bytes], first_lineno: int, has_cr: bool = True
    ) -> tuple[list[bytes | None] | None, list[bytes], list[int | None] | None, ValueError | None]:
        """Columns (keys, values, timestamps) of whole lines without their ``\\n``.

        Keys/timestamps are None when those columns are not used. A line that
        does not parse ends the block: the columns hold the lines before it and
        its error is returned. ``has_cr=False`` says no line holds a ``\\r`` (no CRLF to strip).
        """
        if not self.split:
            values = lines
            if has_cr and any(line.endswith(b"\r") for line in lines):
                values = [line[:-1] if line.endswith(b"\r") else line for line in lines]
            return None, values, None, None
        keys: list[bytes | None] = []
        vals: list[bytes] = []
        stamps: list[int | None] = []
        for i, line in enumerate(lines):
            try:
                r = self.parse(line, first_lineno + i)
            except ValueError as e:
                return keys, vals, stamps, e
            keys.append(r.key)  # type: ignore[arg-type]  # parse keeps bytes
            vals.append(r.value)  # type: ignore[arg-type]
            stamps.append(r.timestamp)
        return (keys if self.key_col else None), vals, (stamps if self.ts_col else None), None


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


async def read_lines(source: BinaryIO, block: int = 1 << 16) -> AsyncIterator[bytes]:
    """Lines of ``source`` (each with its ending, as read), off the event loop (see read_blocks).

    Reading happens in a worker thread, a block of whatever is available at a
    time, so a slow pipe (``tail -f log | chronolog produce``) never stalls the
    loop: lingering batches are still sent while input waits.
    """
    async for lines, nbytes, _ in read_blocks(source, block):
        if nbytes == len(lines[0]) and len(lines) == 1:  # the last line, without a newline
            yield lines[0]
            continue
        for line in lines:
            yield line + b"\n"


async def _produce(args: argparse.Namespace) -> int:
    sep = args.separator
    if "\\" in sep:  # let users type --separator '\t' or ',' alike
        sep = codecs.decode(sep, "unicode_escape")
    parser = LineParser(
        sep.encode("utf-8"),
        args.key_column,
        args.timestamp_column,
        args.value_column,
        [(k, v.encode("utf-8")) for k, v in args.header],
    )
    source: BinaryIO = open(args.file, "rb") if args.file else sys.stdin.buffer
    total = None
    if args.file:
        total = os.path.getsize(args.file)
    async with await connect(args) as client:
        await client.partitions_for(args.topic)  # fail fast on an unknown topic
        bar = progress(total, "B", f"produce {args.topic}", not args.no_progress)
        try:
            if args.idempotent:
                sent, error, placed = await _produce_records(client, args, parser, source, bar)
            else:
                sent, error, placed = await _produce_blocks(client, args, parser, source, bar)
        finally:
            bar.close()
            if source is not sys.stdin.buffer:
                source.close()
        if error is None and args.print_offsets:
            out = sys.stdout
            for parts, offsets in placed:
                out.writelines(f"{p}\t{o}\n" for p, o in zip(parts.tolist(), offsets.tolist(),
                                                               strict=True))
    if error is not None:
        acked = sent if isinstance(error, ValueError) else 0
        print(
            f"error: {error}" + (f" ({acked} record(s) before it were produced)" if acked else ""),
            file=sys.stderr,
        )
        return 2 if isinstance(error, ValueError) else 1
    print(f"Produced {sent} record(s) to {args.topic}.", file=sys.stderr)
    return 0


async def _produce_blocks(
    client: Client, args: argparse.Namespace, parser: LineParser, source: BinaryIO, bar: Any
) -> tuple[int, Exception | None, list[Placement]]:
    """Each block of lines as columns through one ProduceWindow (order kept across blocks)."""
    window = ProduceWindow(client)
    headers = parser.headers or None
    placed: list[Placement] = []
    sent = 0
    lineno = 1
    error: Exception | None = None
    try:
        async for lines, nbytes, has_cr in read_blocks(source):
            keys, values, stamps, error = parser.parse_block(lines, lineno, has_cr)
            if values:
                where = await client.produce_columns(
                    args.topic, values, keys, stamps,
                    [headers] * len(values) if headers else None,
                    partition=args.partition, acks=args.acks, compression=args.compression,
                    max_batch_bytes=args.batch_bytes, window=window,
                )
                if args.print_offsets:
                    placed.append(where)
                sent += len(values)
            if error is not None:
                break
            lineno += len(lines)
            bar.update(nbytes)
        await window.drain()
    except KafkaError as e:
        error = error or e
    finally:
        await window.abandon()
    return sent, error, placed


async def _produce_records(
    client: Client, args: argparse.Namespace, parser: LineParser, source: BinaryIO, bar: Any
) -> tuple[int, Exception | None, list[Placement]]:
    """Line by line through the idempotent batching Producer."""
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
    error: Exception | None = None
    try:
        lineno = 0
        async for line in read_lines(source):
            lineno += 1
            try:
                record = parser.parse(line, lineno)
            except ValueError as e:
                error = e
                break
            fut = await producer.send(args.topic, record, partition=args.partition)
            if args.print_offsets:
                futures.append(fut)
            sent += 1
            bar.update(len(line))
        await producer.flush()
    except KafkaError as e:
        error = error or e
    placed = []
    if error is None and futures:
        import numpy as np

        metas = [f.result() for f in futures]
        placed.append(Placement(np.array([m.partition for m in metas], dtype=np.int64),
                                np.array([m.offset for m in metas], dtype=np.int64)))
    return sent, error, placed
