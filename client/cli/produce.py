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
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

from client.aio import COMPRESSION_CODECS, Client, ProducerRecord
from client.cli._common import add_bootstrap, add_command, config_arg, progress, run
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


async def read_lines(source: BinaryIO, block: int = 1 << 16) -> AsyncIterator[bytes]:
    """Lines of ``source`` (each with its ending), read off the event loop.

    Reading happens in a worker thread, a block of whatever is available at a
    time (``read1``), so a slow pipe (``tail -f log | chronolog produce``) never
    stalls the loop: lingering batches are still sent while input waits.
    """
    loop = asyncio.get_running_loop()
    read1 = getattr(source, "read1", source.read)
    rest = b""
    while True:
        chunk: bytes = await loop.run_in_executor(None, read1, block)
        if not chunk:
            if rest:
                yield rest
            return
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
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
    sent = 0
    async with await Client.connect(
        args.bootstrap_server, client_id="chronolog-cli", request_timeout=args.request_timeout
    ) as client:
        await client.partitions_for(args.topic)  # fail fast on an unknown topic
        producer = Producer(
            client,
            linger_ms=args.linger_ms,
            batch_bytes=args.batch_bytes,
            acks=args.acks,
            compression=args.compression,
            idempotent=args.idempotent,
        )
        futures = []
        keep = args.print_offsets
        bar = progress(total, "B", f"produce {args.topic}", not args.no_progress)
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
                if keep:
                    futures.append(fut)
                sent += 1
                bar.update(len(line))
            await producer.flush()
        except KafkaError as e:
            error = error or e
        finally:
            bar.close()
            if source is not sys.stdin.buffer:
                source.close()
        if error is None and keep:
            out = sys.stdout
            for fut in futures:
                md = fut.result()
                out.write(f"{md.partition}\t{md.offset}\n")
    if error is not None:
        acked = sent if isinstance(error, ValueError) else 0
        print(
            f"error: {error}" + (f" ({acked} record(s) before it were produced)" if acked else ""),
            file=sys.stderr,
        )
        return 2 if isinstance(error, ValueError) else 1
    print(f"Produced {sent} record(s) to {args.topic}.", file=sys.stderr)
    return 0

