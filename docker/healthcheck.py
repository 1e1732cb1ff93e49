"""Container health check: the broker is healthy when it answers ApiVersions.

Speaks one ApiVersions v0 request over the Kafka protocol (the request every
Kafka client sends first) and exits 0 only on a well-formed reply with
error_code 0 for the same correlation id. It is written with ``struct`` on
purpose: the check must not depend on the code it is checking, and ApiVersions
v0 is frozen in Kafka's protocol.

Usage: ``python healthcheck.py [HOST:PORT]`` (default ``$CHRONOLOG_HEALTHCHECK_ADDRESS``,
else ``127.0.0.1:$CHRONOLOG_PORT``, the port docker/entrypoint.py listens on, else
``127.0.0.1:9092``).
"""

from __future__ import annotations

import os
import socket
import struct
import sys

API_VERSIONS = 18
CORRELATION_ID = 0x0C0FFEE


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf


def check(host: str, port: int, timeout: float = 3.0) -> str:
    """Return a one-line description of the broker's answer; raise if unhealthy."""
    client_id = b"chronolog-healthcheck"
    header = struct.pack(">hhih", API_VERSIONS, 0, CORRELATION_ID, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(header)) + header)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 10 <= size <= 1 << 20:
            raise ValueError(f"implausible response size {size}")
        body = _recv_exact(sock, size)
    correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
    if correlation_id != CORRELATION_ID:
        raise ValueError(f"correlation id {correlation_id} != {CORRELATION_ID}")
    if error_code != 0:
        raise ValueError(f"ApiVersions error_code {error_code}")
    if count <= 0 or size < 10 + 6 * count:
        raise ValueError(f"ApiVersions lists {count} APIs in {size} bytes")
    return f"ok: {count} APIs advertised"


def main(argv: list[str]) -> int:
    target = argv[1] if len(argv) > 1 else os.environ.get(
        "CHRONOLOG_HEALTHCHECK_ADDRESS", f"127.0.0.1:{os.environ.get('CHRONOLOG_PORT', '9092')}")
    host, _, port = target.rpartition(":")
    try:
        print(check(host or "127.0.0.1", int(port)))
    except (OSError, ValueError, struct.error) as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
