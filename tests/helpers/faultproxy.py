"""A small HTTP-aware TCP proxy in front of an S3 endpoint that injects faults.

It parses each HTTP/1.1 request and response just enough to know where one ends
(Content-Length or chunked bodies), so faults hit one request of a keep-alive
connection, not a whole connection. Faults are queued rules: each matches requests
by method and answers ``times`` of them with

- ``status``: an S3 error document (e.g. 503 SlowDown) instead of forwarding;
- ``truncate``: the real response's head and the first half of its body, then the
  connection is closed (a body cut mid-way);
- ``drop``: the request is read and the connection closed without any answer (a
  reset in the middle of an upload).

Everything else is forwarded unchanged. ``log`` records (method, target, what
happened) for every request, so a test can count the retries a client made.
The proxy runs its own asyncio loop in a daemon thread: the store under test is
blocking and calls it from the test's thread.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

_ERROR_BODY = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
               "<Message>{message}</Message><RequestId>faultproxy</RequestId></Error>")


@dataclass
class Fault:
    kind: str                 # "status", "truncate" or "drop"
    times: int
    method: str | None = None  # None: any method
    status: int = 503
    code: str = "SlowDown"
    message: str = "Please reduce your request rate."


class FaultProxy:
    """``FaultProxy(upstream_port)``; ``.port`` is where clients connect."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.log: list[tuple[str, str, str]] = []
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        started.wait(10)
        assert self._server is not None, "the fault proxy did not start"
        self.port: int = self._server.sockets[0].getsockname()[1]

    # -- the test's side ---------------------------------------------------------------
    def fail(self, times: int, *, method: str | None = None, status: int = 503,
             code: str = "SlowDown", message: str = "Please reduce your request rate.") -> None:
        """Answer the next ``times`` matching requests with an S3 error ``status``/``code``."""
        with self._lock:
            self._faults.append(Fault("status", times, method, status, code, message))

    def truncate(self, times: int, *, method: str | None = "GET") -> None:
        """Cut the body of the next ``times`` matching responses in half, then close."""
        with self._lock:
            self._faults.append(Fault("truncate", times, method))

    def drop(self, times: int, *, method: str | None = "PUT") -> None:
        """Close the connection without answering the next ``times`` matching requests."""
        with self._lock:
            self._faults.append(Fault("drop", times, method))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self.log.clear()

    def outcomes(self, method: str | None = None) -> list[str]:
        """What happened to each request (optionally of one method), in order."""
        with self._lock:
            return [what for m, _, what in self.log if method is None or m == method]

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # -- the proxy's side --------------------------------------------------------------
    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0))
        started.set()
        self._loop.run_forever()

    def _take(self, method: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and fault.method in (None, method):
                    fault.times -= 1
                    return fault
        return None

    def _record(self, method: str, target: str, what: str) -> None:
        with self._lock:
            self.log.append((method, target, what))

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                head = await _read_head(client_r)
                if head is None:
                    return
                method, target = head.split(b" ", 2)[:2]
                m, t = method.decode(), target.decode()
                body = await _read_body(client_r, head, is_response=False)
                fault = self._take(m)
                if fault is not None and fault.kind == "drop":
                    self._record(m, t, "dropped")
                    return
                if fault is not None and fault.kind == "status":
                    self._record(m, t, f"{fault.status} {fault.code}")
                    doc = _ERROR_BODY.format(code=fault.code, message=fault.message).encode()
                    client_w.write(
                        f"HTTP/1.1 {fault.status} {fault.code}\r\nContent-Type: application/xml\r\n"
                        f"Content-Length: {len(doc)}\r\nConnection: close\r\n\r\n".encode() + doc)
                    await client_w.drain()
                    return
                if upstream is None:
                    upstream = await asyncio.open_connection(*self.upstream)
                up_r, up_w = upstream
                up_w.write(head + body)
                await up_w.drain()
                resp_head = await _read_head(up_r)
                if resp_head is None:
                    self._record(m, t, "upstream closed")
                    return
                resp_body = await _read_body(up_r, resp_head, is_response=True, method=m)
                status = resp_head.split(b" ", 2)[1].decode()
                if fault is not None and fault.kind == "truncate" and len(resp_body) > 1:
                    self._record(m, t, f"{status} truncated {len(resp_body) // 2}/{len(resp_body)}")
                    client_w.write(resp_head + resp_body[:len(resp_body) // 2])
                    await client_w.drain()
                    return
                self._record(m, t, status)
                client_w.write(resp_head + resp_body)
                await client_w.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            client_w.close()
            if upstream is not None:
                upstream[1].close()


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial:
            raise
        return None


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


async def _read_body(reader: asyncio.StreamReader, head: bytes, *, is_response: bool,
                     method: str = "") -> bytes:
    """The body that follows ``head`` (raw, chunk framing kept)."""
    if is_response:
        status = int(head.split(b" ", 2)[1])
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return b""
    length = _header(head, b"content-length")
    if length is not None:
        return await reader.readexactly(int(length))
    if (_header(head, b"transfer-encoding") or b"").lower() == b"chunked":
        out = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            out += size_line
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                out += await reader.readuntil(b"\r\n")  # trailers end with an empty line
                return bytes(out)
            out += await reader.readexactly(size + 2)
    if is_response:
        return await reader.read()  # body ends when the server closes
    return b""
