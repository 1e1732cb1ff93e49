"""A tiny Kafka-speaking listener on 127.0.0.1 that records what real clients send.

It answers ApiVersions and Metadata with our own encoders (so clients go on to
send their next request) and records every frame, byte for byte. Anything else
is recorded and the connection is closed, as a broker closes on what it does
not serve.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field

from protocol.api import (
    ApiKey,
    UnsupportedVersionError,
    advertised_api_keys,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)


@dataclass
class CaptureServer:
    frames: list[bytes] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _recv_exact(self, conn: socket.socket, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = conn.recv(n - len(buf))
            except TimeoutError:
                if self._stop.is_set():
                    return None
                continue
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        with conn:
            while not self._stop.is_set():
                head = self._recv_exact(conn, 4)
                if head is None:
                    return
                frame = self._recv_exact(conn, struct.unpack(">i", head)[0])
                if frame is None:
                    return
                with self._lock:
                    self.frames.append(frame)
                reply = self._reply(frame)
                if reply is None:
                    return
                conn.sendall(reply)

    def _reply(self, frame: bytes) -> bytes | None:
        try:
            req = decode_request(frame)
        except UnsupportedVersionError as exc:
            if exc.api_key == ApiKey.API_VERSIONS:
                return unsupported_api_versions_response(exc.correlation_id)
            return None
        if req.api_key == ApiKey.API_VERSIONS:
            return encode_response(req.api_key, req.api_version, req.correlation_id,
                                   {"api_keys": advertised_api_keys()})
        if req.api_key == ApiKey.METADATA:
            body = {
                "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "capture",
                "controller_id": 1,
                "topics": [],
            }
            return encode_response(req.api_key, req.api_version, req.correlation_id, body)
        return None

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._accept.join(2)
        for t in self._threads:
            t.join(2)

    def snapshot(self) -> list[bytes]:
        with self._lock:
            return list(self.frames)
