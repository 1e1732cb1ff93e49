"""A tiny Kafka-speaking listener on 127.0.0.1 that records what real clients send.

It answers with our own encoders, just enough for clients to go on to their
next request: ApiVersions, Metadata (one topic, ``golden``, one partition led by
this listener), Produce (keeps the batches in memory, assigning offsets),
ListOffsets (offset 0), Fetch (everything produced so far), FindCoordinator, OffsetFetch (no
committed offset), OffsetCommit, CreateTopics, DeleteTopics and InitProducerId. Every frame is recorded byte for byte.
Anything else is recorded and the connection is closed, as a broker closes on
what it does not serve.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

from protocol.api import (
    ApiKey,
    UnsupportedVersionError,
    advertised_api_keys,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)
from tests.helpers.listen import accept_until_stopped

TOPIC = "golden"


@dataclass
class CaptureServer:
    frames: list[bytes] = field(default_factory=list)
    port: int = 0
    next_offset: int = 0
    api_versions_max: int = 4  # play an older broker: newer ApiVersions get error 35
    log: bytearray = field(default_factory=bytearray)

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
        self._accept = threading.Thread(target=accept_until_stopped,
                                        args=(self._sock, self._stop, self._start_handler), daemon=True)
        self._accept.start()

    def _start_handler(self, conn: socket.socket) -> None:
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
                try:
                    conn.sendall(reply)
                except OSError:  # the client hung up first (aiokafka does at close)
                    return

    def _reply(self, frame: bytes) -> bytes | None:
        try:
            req = decode_request(frame)
        except UnsupportedVersionError as exc:
            if exc.api_key == ApiKey.API_VERSIONS:
                return unsupported_api_versions_response(exc.correlation_id)
            return None
        if req.api_key == ApiKey.API_VERSIONS:
            if req.api_version > self.api_versions_max:
                return unsupported_api_versions_response(req.correlation_id, self.api_versions_max)
            keys = [k if k["api_key"] != ApiKey.API_VERSIONS else {**k, "max_version": self.api_versions_max}
                    for k in advertised_api_keys()]
            return encode_response(req.api_key, req.api_version, req.correlation_id, {"api_keys": keys})
        body = self._body(req.api_key, req.api_version, req.body)
        if body is None:
            return None
        return encode_response(req.api_key, req.api_version, req.correlation_id, body)

    def _body(self, key: ApiKey, version: int, req: Any) -> dict[str, Any] | None:
        me = {"node_id": 1, "host": "127.0.0.1", "port": self.port}
        if key == ApiKey.METADATA:
            return {
                "brokers": [me],
                "cluster_id": "capture",
                "controller_id": 1,
                "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                     "replica_nodes": [1], "isr_nodes": [1]}]}],
            }
        if key == ApiKey.PRODUCE:
            return {"responses": [
                {"name": t.name, "partition_responses": [
                    {"index": p.index, "base_offset": self._append(p.records)} for p in t.partition_data]}
                for t in req.topic_data]}
        if key == ApiKey.LIST_OFFSETS:
            return {"topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "timestamp": -1, "offset": 0,
                     "old_style_offsets": [0]} for p in t.partitions]}
                for t in req.topics]}
        if key == ApiKey.FETCH:
            return {"responses": [
                {"topic": t.topic, "partitions": [
                    {"partition_index": p.partition, "high_watermark": self.next_offset,
                     "last_stable_offset": self.next_offset, "log_start_offset": 0,
                     "records": memoryview(self.log) if p.fetch_offset < self.next_offset else b""}
                    for p in t.partitions]}
                for t in req.topics]}
        if key == ApiKey.FIND_COORDINATOR:
            if version >= 4:
                return {"coordinators": [{"key": k, **me} for k in req.coordinator_keys]}
            return dict(me)
        if key == ApiKey.OFFSET_FETCH:
            def partitions(topics: Any) -> list[dict[str, Any]]:
                return [{"name": t.name, "partitions": [
                    {"partition_index": i, "committed_offset": -1, "metadata": ""}
                    for i in t.partition_indexes]} for t in topics or []]
            if version >= 8:
                return {"groups": [{"group_id": g.group_id, "topics": partitions(g.topics)} for g in req.groups]}
            return {"topics": partitions(req.topics)}
        if key == ApiKey.CREATE_TOPICS:
            return {"topics": [{"name": t.name, "num_partitions": max(t.num_partitions, 1),
                                "replication_factor": 1, "configs": []} for t in req.topics]}
        if key == ApiKey.DELETE_TOPICS:
            names = req.topic_names if version < 6 else [t.name for t in req.topics]
            return {"responses": [{"name": n} for n in names]}
        if key == ApiKey.OFFSET_COMMIT:
            return {"topics": [{"name": t.name, "partitions": [
                {"partition_index": p.partition_index} for p in t.partitions]} for t in req.topics]}
        if key == ApiKey.INIT_PRODUCER_ID:
            return {"producer_id": 1000, "producer_epoch": 0}
        return None

    def _append(self, records: Any) -> int:
        """Keep a produced batch (magic 2) with its base offset assigned, as a log would."""
        base = self.next_offset
        batch = bytearray(records)
        pos = 0
        while pos + 61 <= len(batch):
            length = struct.unpack_from(">i", batch, pos + 8)[0]
            last_delta = struct.unpack_from(">i", batch, pos + 23)[0]
            struct.pack_into(">q", batch, pos, self.next_offset)
            self.next_offset += last_delta + 1
            pos += length + 12
        self.log += batch
        return base

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._accept.join(2)
        for t in self._threads:
            t.join(2)

    def snapshot(self) -> list[bytes]:
        with self._lock:
            return list(self.frames)
