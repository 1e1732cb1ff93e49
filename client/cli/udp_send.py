"""``chronolog udp-send``: send test datagrams to a broker's UDP ingest at a set rate.

Invariants:
- Pacing is by elapsed time, not by sleeping per datagram: after ``t`` seconds
  exactly ``min(count, rate * t)`` datagrams have been handed to the kernel, so
  the achieved rate does not drift when the process is briefly descheduled.
- Generated datagrams are exactly ``--size`` bytes (when the framing fits) and
  numbered: the value starts with the sequence number, so a receiver can tell
  which ones were lost. With ``tsv``/``json`` the key is ``k<seq % 1000>`` and
  the timestamp is the send time in ms.
- ``--file`` sends each line (without its newline) as one datagram, cycling
  through the file until ``--count`` datagrams were sent (default: once).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class SendStats:
    sent: int  # handed to the kernel
    errors: int  # send() failures; those datagrams were not sent
    seconds: float

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else 0.0


def make_datagram(seq: int, size: int, fmt: str, now_ms: int) -> bytes:
    """A numbered datagram of ``size`` bytes in ``fmt`` framing (longer if the framing needs it)."""
    head = str(seq).encode()
    if fmt == "raw":
        return (head + b" " + b"x" * max(0, size - len(head) - 1))[:max(size, len(head))]
    key = f"k{seq % 1000}"
    if fmt == "tsv":
        prefix = f"{key}\t{now_ms}\t".encode()
        room = size - len(prefix) - len(head) - 1
        return prefix + head + b" " + b"x" * max(0, room)
    if fmt == "json":
        skeleton = json.dumps({"key": key, "timestamp": now_ms, "value": ""},
                              separators=(",", ":"))
        room = size - len(skeleton) - len(head) - 1
        value = head.decode() + " " + "x" * max(0, room)
        return json.dumps({"key": key, "timestamp": now_ms, "value": value},
                          separators=(",", ":")).encode()
    raise ValueError(f"unknown format {fmt!r}")


def _file_lines(path: str) -> list[bytes]:
    with open(path, "rb") as fh:
        return [line.rstrip(b"\r\n") for line in fh if line.strip()]


def send_datagrams(
    host: str,
    port: int,
    *,
    rate: float = 0.0,
    count: int = 1000,
    size: int = 200,
    fmt: str = "raw",
    lines: list[bytes] | None = None,
) -> SendStats:
    """Send ``count`` datagrams at ``rate``/s (0 = as fast as possible)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.connect((host, port))
    send = sock.send
    errors = 0
    sent = 0
    source: Iterator[bytes]
    if lines is not None:
        if not lines:
            return SendStats(0, 0, 0.0)
        source = (lines[i % len(lines)] for i in range(count))
    else:
        # Pre-build one template per format; only the sequence number changes.
        source = (make_datagram(i, size, fmt, int(time.time() * 1000)) for i in range(count))
    start = time.perf_counter()
    try:
        while sent + errors < count:
            if rate > 0:
                due = min(count, int((time.perf_counter() - start) * rate) + 1)
                if due <= sent + errors:
                    time.sleep(0.0002)
                    continue
                n = due - sent - errors
            else:
                n = count - sent - errors
            for _ in range(n):
                data = next(source)
                try:
                    send(data)
                    sent += 1
                except OSError:
                    # ENOBUFS, or ECONNREFUSED reported for an earlier datagram (then
                    # this one was not sent either): count it and go on.
                    errors += 1
    finally:
        sock.close()
    return SendStats(sent, errors, time.perf_counter() - start)


def parse_rate(text: str) -> float:
    """``50000``, ``50000/s`` or ``50k/s`` → datagrams per second."""
    t = text.strip().lower().removesuffix("/s")
    mult = 1
    if t.endswith("k"):
        t, mult = t[:-1], 1000
    elif t.endswith("m"):
        t, mult = t[:-1], 1_000_000
    try:
        value = float(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"rate must look like 50000/s or 50k/s, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("rate must be >= 0")
    return value


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "udp-send",
        help="send test datagrams to a broker's UDP ingest",
        description="Send numbered test datagrams (or the lines of a file) to HOST:PORT.",
    )
    p.add_argument("address", type=_host_port, metavar="HOST:PORT")
    p.add_argument("--rate", type=parse_rate, default=0.0,
                   help="datagrams per second, e.g. 50k/s (default: as fast as possible)")
    p.add_argument("--count", type=int, default=None,
                   help="datagrams to send (default 1000, or one pass over --file)")
    p.add_argument("--size", type=int, default=200, help="bytes per generated datagram")
    p.add_argument("--format", choices=("raw", "tsv", "json"), default="raw",
                   help="framing of generated datagrams (match the broker's udp.format)")
    p.add_argument("--file", default=None, help="send each line of this file as a datagram")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    host, port = args.address
    lines = _file_lines(args.file) if args.file else None
    count = args.count if args.count is not None else (len(lines) if lines is not None else 1000)
    stats = send_datagrams(host, port, rate=args.rate, count=count, size=args.size,
                           fmt=args.format, lines=lines)
    print(f"sent {stats.sent} datagrams in {stats.seconds:.3f} s "
          f"({stats.rate:,.0f}/s), {stats.errors} send errors", file=sys.stdout)
    return 0 if stats.errors == 0 else 1
