"""The one raw-socket Kafka helper: exact frames out, frames in, responses decoded with
``protocol.api``.

Used where a real client would hide what is being tested (pipelining, retried batches,
malformed frames, specific API versions, the SASL handshake). The functions work on any
socket (plain or TLS); ``KafkaSocket`` is a connection with correlation ids.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

from protocol import api
from storage.records import Record, build_batch

TIMEOUT = 10.0


def size_prefixed(payload: bytes) -> bytes:
    """``payload`` as a frame: its int32 size, then the bytes."""
    return struct.pack(">i", len(payload)) + payload


def request_frame(api_key: int, version: int, body: dict[str, Any], correlation_id: int = 1,
                  client_id: str = "raw") -> bytes:
    """One whole request frame (size prefix included)."""
    return api.encode_request(api_key, version, correlation_id, client_id, body)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly n bytes from sock; ConnectionError if the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    """One frame's payload (without its size); ConnectionError if the peer closes first."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def read_frame_or_none(sock: socket.socket) -> bytes | None:
    """One frame's payload, or None when the peer closed the connection first."""
    try:
        return read_frame(sock)
    except ConnectionResetError:
        raise
    except ConnectionError:
        return None


def split_frames(sock: socket.socket) -> Iterator[bytes]:
    """Every whole frame (size prefix included) the peer sends, as it arrives, until it
    closes; for relays that pass frames on unchanged."""
    buf = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError:
            return
        if not chunk:
            return
        buf += chunk
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
            n = 4 + struct.unpack_from(">i", buf)[0]
            yield buf[:n]
            buf = buf[n:]


def closed_by_peer(sock: socket.socket, timeout: float = TIMEOUT) -> bool:
    """True when the peer closes (or resets) the connection without sending anything."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


class KafkaSocket:
    """A blocking Kafka-protocol connection to 127.0.0.1:``port``: send frames, read
    frames, or one request and its decoded answer."""

    def __init__(self, port: int, timeout: float = TIMEOUT, client_id: str = "chronolog-test") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0
        self.sent: dict[int, tuple[int, int]] = {}
        self._peeked = b""

    def __enter__(self) -> KafkaSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def frame(self, key: int, version: int, body: dict[str, Any]) -> tuple[int, bytes]:
        """The next correlation id and its request frame, remembered for ``read``."""
        self.correlation_id += 1
        cid = self.correlation_id
        self.sent[cid] = (key, version)
        return cid, api.encode_request(key, version, cid, self.client_id, body)

    def send(self, *frames: bytes) -> None:
        self.sock.sendall(b"".join(frames))

    def recv_exact(self, n: int) -> bytes:
        return recv_exact(self.sock, n)

    def read_frame(self) -> bytes:
        return read_frame(self.sock)

    def read(self) -> tuple[int, Any]:
        """The next response, decoded as the answer to the request it correlates with."""
        frame = self.read_frame()
        (cid,) = struct.unpack_from(">i", frame)
        key, version = self.sent[cid]
        return api.decode_response(key, version, frame)

    def request(self, key: int, version: int, body: dict[str, Any]) -> Any:
        """Send one request and return the decoded response body."""
        cid, data = self.frame(key, version, body)
        self.send(data)
        got, resp = self.read()
        assert got == cid
        return resp

    # The name tests/ecosystem (not edited on this branch) calls it by.
    call = request

    def closed_by_peer(self, timeout: float = TIMEOUT) -> bool:
        return closed_by_peer(self.sock, timeout)

    def outcome(self, wait: float = 0.5) -> str:
        """'answered', 'closed' or 'pending': what the broker did with what was sent."""
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return "pending"
        except ConnectionResetError:
            return "closed"
        self._peeked = data
        return "answered" if data else "closed"

    def read_frame_after_partial(self) -> bytes:
        """The first response frame, when ``outcome`` already consumed its first bytes."""
        data = self._peeked
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed in the middle of a response")
            data += chunk
        (size,) = struct.unpack_from(">i", data)
        return data[4 : 4 + size]


# ---- requests several test areas build -------------------------------------------------


def api_versions(raw: KafkaSocket) -> Any:
    return raw.request(18, 3, {"client_software_name": "core-test", "client_software_version": "1.0"})


def create_topic(raw: KafkaSocket, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> Any:
    resp = raw.request(19, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 5000, "validate_only": False,
    })
    assert resp.topics[0].error_code == 0, resp
    return resp


def produce_frame(raw: KafkaSocket, topic: str, values: list[bytes], acks: int = 1,
                  ts: int | None = None) -> tuple[int, bytes]:
    now = int(time.time() * 1000) if ts is None else ts
    batch = build_batch([Record(0, now + i, None, v, []) for i, v in enumerate(values)])
    return raw.frame(0, 9, {
        "transactional_id": None, "acks": acks, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })


def fetch_body(topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1) -> dict[str, Any]:
    return {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }


def create_topics(raw: KafkaSocket, version: int, topics: list[dict[str, Any]], validate_only: bool = False) -> list[Any]:
    body_topics = [{"name": t["name"], "num_partitions": t.get("num_partitions", 1),
                    "replication_factor": t.get("replication_factor", 1),
                    "assignments": t.get("assignments", []),
                    "configs": [{"name": k, "value": v} for k, v in t.get("configs", {}).items()]}
                   for t in topics]
    resp = raw.request(19, version, {"topics": body_topics, "timeout_ms": 5000,
                                  "validate_only": validate_only})
    return list(resp.topics)


def metadata(raw: KafkaSocket, version: int, names: list[str] | None, auto: bool = True) -> Any:
    topics = None if names is None else [{"name": n, "topic_id": bytes(16)} for n in names]
    return raw.request(3, version, {"topics": topics, "allow_auto_topic_creation": auto,
                                 "include_cluster_authorized_operations": False,
                                 "include_topic_authorized_operations": False})
