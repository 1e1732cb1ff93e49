"""UDP ingest: every datagram becomes one record of ``udp.topic``.

Framing (``udp.format``):
- ``raw``: the whole datagram is the value; no key; timestamp = receive time.
- ``tsv``: ``key<TAB>timestamp_ms<TAB>value``. An empty key is a null key, an
  empty timestamp means the receive time, the value is everything after the
  second tab (it may contain tabs). One trailing ``\\n`` is stripped so lines
  from a file or ``echo`` work unchanged.
- ``json``: an object ``{"key": str|null, "timestamp": int|null, "value":
  str|null|<any JSON>, "headers": {str: str|null}}``; every member is optional.
  A non-string value is stored as its compact JSON text.

Invariants:
- A datagram that is larger than ``udp.max.datagram.bytes``, cannot be parsed,
  or carries a timestamp the topic would reject is counted
  (``chronolog_udp_datagrams_dropped_total{reason=...}``) and dropped alone;
  nothing a sender does can stop the receive loop or fail a whole batch.
- Datagrams are gathered per partition and appended as one record batch per
  partition per flush (every ``udp.linger.ms``, or at once when
  ``udp.batch.bytes`` are pending), so the log's append path stays per-batch.
  A batch never exceeds the topic's ``max.message.bytes``.
- Pending data is bounded (4 x ``udp.batch.bytes``); beyond that datagrams are
  dropped with reason ``overflow`` rather than growing memory without limit.
- ``close()`` stops receiving first, then appends everything still pending.
- Partitioning: ``hash`` sends every datagram from one source address (ip and
  port) to the same partition (CRC-32 of ``ip:port`` modulo the partition
  count); ``round-robin`` cycles through the partitions datagram by datagram.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import socket
import time
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import asyncio_dgram

from broker.metrics import METRICS

log = logging.getLogger(__name__)

# Per-record overhead on top of key+value bytes in a v2 batch, an upper bound
# for the small records UDP carries (length, attributes, deltas, lengths).
_RECORD_OVERHEAD = 24
_BATCH_OVERHEAD = 61


class UdpRecord(NamedTuple):
    """The record-like shape ``storage.records.build_batch`` consumes."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class MalformedDatagram(ValueError):
    """A datagram that does not follow the configured ``udp.format``."""


def parse_raw(data: bytes, now_ms: int) -> UdpRecord:
    return UdpRecord(now_ms, None, data, [])


def parse_tsv(data: bytes, now_ms: int) -> UdpRecord:
    if data.endswith(b"\n"):
        data = data[:-1]
    parts = data.split(b"\t", 2)
    if len(parts) != 3:
        raise MalformedDatagram("tsv datagram needs key<TAB>timestamp_ms<TAB>value")
    key_b, ts_b, value = parts
    if ts_b:
        if not ts_b.isdigit():
            raise MalformedDatagram(f"tsv timestamp is not a non-negative integer: {ts_b[:32]!r}")
        ts = int(ts_b)
    else:
        ts = now_ms
    return UdpRecord(ts, key_b or None, value, [])


def parse_json(data: bytes, now_ms: int) -> UdpRecord:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedDatagram(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise MalformedDatagram("json datagram must be an object")
    key = obj.get("key")
    if key is not None and not isinstance(key, str):
        raise MalformedDatagram("json 'key' must be a string or null")
    ts = obj.get("timestamp")
    if ts is None:
        ts = now_ms
    elif isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
        raise MalformedDatagram("json 'timestamp' must be a non-negative integer (ms)")
    value = obj.get("value")
    value_b: bytes | None
    if value is None:
        value_b = None
    elif isinstance(value, str):
        value_b = value.encode()
    else:
        value_b = json.dumps(value, separators=(",", ":")).encode()
    headers_obj = obj.get("headers") or {}
    if not isinstance(headers_obj, dict):
        raise MalformedDatagram("json 'headers' must be an object")
    headers: list[tuple[str, bytes | None]] = []
    for hk, hv in headers_obj.items():
        if hv is not None and not isinstance(hv, str):
            raise MalformedDatagram("json header values must be strings or null")
        headers.append((hk, hv.encode() if hv is not None else None))
    return UdpRecord(ts, key.encode() if key is not None else None, value_b, headers)


PARSERS: dict[str, Callable[[bytes, int], UdpRecord]] = {
    "raw": parse_raw,
    "tsv": parse_tsv,
    "json": parse_json,
}


def parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected host:port, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _cfg(config: object, name: str, default: Any) -> Any:
    value = getattr(config, name, None)
    return default if value is None else value


class _PartitionLog:
    """Adapter over the broker's partition manager: topic creation, counts, appends.

    The broker owns these operations; this class only finds them, so the UDP
    path appends through exactly the code the Produce handler uses.
    """

    def __init__(self, broker: object) -> None:
        self.broker = broker
        self.pm: Any = getattr(broker, "partitions", broker)

    async def ensure_topic(self, topic: str, partitions: int) -> None:
        pm = self.pm
        if await self.partition_count(topic) > 0:
            return
        for name in ("ensure_topic", "create_topic", "get_or_create_topic"):
            fn = getattr(pm, name, None)
            if fn is None:
                continue
            try:
                result = fn(topic, partitions)
            except TypeError:
                result = fn(topic, num_partitions=partitions)
            if inspect.isawaitable(result):
                await result
            return
        raise RuntimeError("the partition manager has no way to create the UDP topic")

    async def partition_count(self, topic: str) -> int:
        pm = self.pm
        for name in ("partition_count", "num_partitions"):
            fn = getattr(pm, name, None)
            if callable(fn):
                try:
                    result = fn(topic)
                    if inspect.isawaitable(result):
                        result = await result
                    return int(result or 0)
                except (KeyError, LookupError):
                    return 0
                except Exception as exc:
                    if type(exc).__name__ in ("UnknownTopicOrPartition", "KafkaError"):
                        return 0
                    raise
        topics = getattr(pm, "topics", None)
        if callable(topics):
            topics = topics()
        if isinstance(topics, dict):
            info = topics.get(topic)
            if info is None:
                return 0
            if isinstance(info, int):
                return info
            for attr in ("partitions", "num_partitions", "partition_count"):
                v = getattr(info, attr, None)
                if isinstance(v, int):
                    return v
                if v is not None:
                    return len(v)
            try:
                return len(info)
            except TypeError:
                return 0
        return 0

    async def max_timestamp_bounds(self, topic: str) -> tuple[int, int]:
        """(before.max.ms, after.max.ms) that the topic applies to CreateTime records."""
        config = getattr(self.broker, "config", None)
        before = int(_cfg(config, "log_message_timestamp_before_max_ms", (1 << 63) - 1))
        after = int(_cfg(config, "log_message_timestamp_after_max_ms", 3_600_000))
        for name in ("log_config", "topic_log_config", "log_config_for"):
            fn = getattr(self.pm, name, None)
            if callable(fn):
                try:
                    lc = fn(topic)
                    if inspect.isawaitable(lc):
                        lc = await lc
                except Exception:
                    continue
                before = int(getattr(lc, "message_timestamp_before_max_ms", before))
                after = int(getattr(lc, "message_timestamp_after_max_ms", after))
                if getattr(lc, "message_timestamp_type", "CreateTime") == "LogAppendTime":
                    return (1 << 63) - 1, (1 << 63) - 1
                break
        return before, after

    async def append(self, topic: str, partition: int, batch: bytes) -> None:
        pm = self.pm
        fn = getattr(pm, "append", None) or getattr(pm, "append_batch", None)
        if fn is None:
            raise RuntimeError("the partition manager has no append method")
        result = fn(topic, partition, batch)
        if inspect.isawaitable(result):
            await result


class UdpIngest:
    """Receives datagrams on every ``udp.listeners`` address and appends them in batches."""

    def __init__(self, broker: object) -> None:
        config = getattr(broker, "config", None)
        self.topic: str = str(_cfg(config, "udp_topic", "udp"))
        self.partitioning: str = str(_cfg(config, "udp_partitioning", "hash"))
        fmt = str(_cfg(config, "udp_format", "raw"))
        if fmt not in PARSERS:
            raise ValueError(f"udp.format must be one of {sorted(PARSERS)}, not {fmt!r}")
        self.format = fmt
        self._parse = PARSERS[fmt]
        self.linger_s: float = int(_cfg(config, "udp_linger_ms", 5)) / 1000.0
        self.batch_bytes: int = int(_cfg(config, "udp_batch_bytes", 1 << 20))
        self.max_datagram: int = int(_cfg(config, "udp_max_datagram_bytes", 65507))
        self.rcvbuf: int = int(_cfg(config, "udp_socket_receive_buffer_bytes", 4 << 20))
        self.max_batch_bytes: int = int(_cfg(config, "message_max_bytes", 1048588))
        self.num_partitions_default: int = int(_cfg(config, "num_partitions", 1))
        listeners = str(_cfg(config, "udp_listeners", ""))
        self.addresses = [parse_host_port(x) for x in listeners.split(",") if x.strip()]
        self._log = _PartitionLog(broker)
        self._streams: list[Any] = []
        self._recv_tasks: list[asyncio.Task[None]] = []
        self._flush_task: asyncio.Task[None] | None = None
        self._flush_event = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._pending: dict[int, list[UdpRecord]] = {}
        self._pending_bytes = 0
        self._pending_limit = 4 * self.batch_bytes
        self._partitions = 1
        self._rr = 0
        self._hash_cache: dict[Any, int] = {}
        self._ts_before = (1 << 63) - 1
        self._ts_after = (1 << 63) - 1
        self._closed = False
        self._flush_lock = asyncio.Lock()

    @property
    def bound_addresses(self) -> list[tuple[str, int]]:
        """The (host, port) each listener is bound to (useful with port 0)."""
        return [tuple(s.sockname[:2]) for s in self._streams]

    async def start(self) -> UdpIngest:
        await self._log.ensure_topic(self.topic, self.num_partitions_default)
        await self._refresh_topic()
        for host, port in self.addresses:
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                                 socket.SOCK_DGRAM)
            try:
                if self.rcvbuf > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
                sock.bind((host, port))
                sock.setblocking(False)
                stream = await asyncio_dgram.from_socket(sock)
            except BaseException:
                sock.close()
                await self.close()
                raise
            got = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            if self.rcvbuf > 0 and got < self.rcvbuf:
                log.warning(
                    "UDP receive buffer smaller than asked (raise net.core.rmem_max)",
                    extra={"asked": self.rcvbuf, "got": got},
                )
            self._streams.append(stream)
            self._recv_tasks.append(asyncio.create_task(self._recv_loop(stream),
                                                        name=f"udp-recv-{host}:{port}"))
            log.info("UDP ingest listening", extra={
                "address": f"{host}:{stream.sockname[1]}", "topic": self.topic,
                "format": self.format, "partitioning": self.partitioning, "rcvbuf": got,
            })
        self._flush_task = asyncio.create_task(self._flush_loop(), name="udp-flush")
        return self

    async def _refresh_topic(self) -> None:
        n = await self._log.partition_count(self.topic)
        if n > 0:
            if n != self._partitions:
                self._hash_cache.clear()
            self._partitions = n
        self._ts_before, self._ts_after = await self._log.max_timestamp_bounds(self.topic)

    async def _recv_loop(self, stream: Any) -> None:
        on_datagram = self.on_datagram
        while True:
            try:
                data, addr = await stream.recv()
            except asyncio_dgram.TransportClosed:
                return
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                # ICMP errors and the like surface here; they concern one peer only.
                log.debug("UDP receive error", extra={"error": str(exc)})
                continue
            try:
                on_datagram(data, addr)
            except Exception:
                METRICS.udp_dropped("internal", 1)
                log.exception("UDP datagram could not be handled")

    def on_datagram(self, data: bytes, addr: Any) -> None:
        """Parse one datagram and queue it for its partition (synchronous, no I/O)."""
        METRICS.udp_received(1)
        size = len(data)
        if size > self.max_datagram:
            METRICS.udp_dropped("oversized", 1)
            return
        if self._pending_bytes + size > self._pending_limit:
            METRICS.udp_dropped("overflow", 1)
            self._flush_event.set()
            return
        now_ms = int(time.time() * 1000)
        try:
            rec = self._parse(data, now_ms)
        except MalformedDatagram:
            METRICS.udp_dropped("malformed", 1)
            return
        if rec.timestamp < now_ms - self._ts_before or rec.timestamp > now_ms + self._ts_after:
            METRICS.udp_dropped("timestamp", 1)
            return
        rec_size = size + _RECORD_OVERHEAD + sum(len(k) + len(v or b"") + 10
                                                   for k, v in rec.headers)
        if rec_size + _BATCH_OVERHEAD > self.max_batch_bytes:
            METRICS.udp_dropped("oversized", 1)
            return
        if self.partitioning == "round-robin":
            part = self._rr % self._partitions
            self._rr = part + 1
        else:
            part = self._hash_cache.get(addr, -1)
            if part < 0:
                if len(self._hash_cache) > 65536:
                    self._hash_cache.clear()
                part = zlib.crc32(f"{addr[0]}:{addr[1]}".encode()) % self._partitions
                self._hash_cache[addr] = part
        bucket = self._pending.get(part)
        if bucket is None:
            bucket = self._pending[part] = []
        bucket.append(rec)
        first = self._pending_bytes == 0
        self._pending_bytes += rec_size
        if self._pending_bytes >= self.batch_bytes:
            self._flush_event.set()
        elif first:
            if self.linger_s <= 0:
                self._flush_event.set()
            else:
                self._timer = asyncio.get_running_loop().call_later(
                    self.linger_s, self._flush_event.set)

    async def _flush_loop(self) -> None:
        while True:
            await self._flush_event.wait()
            self._flush_event.clear()
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("UDP flush failed")

    async def flush(self) -> None:
        """Append everything pending: one batch per partition (split at max.message.bytes)."""
        async with self._flush_lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            pending, self._pending = self._pending, {}
            self._pending_bytes = 0
            if not pending:
                return
            from storage.records import build_batch

            for part, records in pending.items():
                for chunk in self._chunks(records):
                    try:
                        batch = build_batch(chunk)
                        await self._log.append(self.topic, part, batch)
                    except Exception as exc:
                        METRICS.udp_dropped("append_failed", len(chunk))
                        log.warning("UDP batch append failed; its datagrams are dropped",
                                    extra={"topic": self.topic, "partition": part,
                                           "records": len(chunk), "error": repr(exc)})
                        continue
                    METRICS.udp_appended(len(chunk))
            try:
                await self._refresh_topic()
            except Exception:
                log.exception("UDP ingest could not refresh the topic's partition count")

    def _chunks(self, records: list[UdpRecord]) -> list[list[UdpRecord]]:
        limit = self.max_batch_bytes - _BATCH_OVERHEAD
        out: list[list[UdpRecord]] = []
        cur: list[UdpRecord] = []
        size = 0
        for rec in records:
            n = (len(rec.key or b"") + len(rec.value or b"") + _RECORD_OVERHEAD
                 + sum(len(k) + len(v or b"") + 10 for k, v in rec.headers))
            if cur and size + n > limit:
                out.append(cur)
                cur, size = [], 0
            cur.append(rec)
            size += n
        if cur:
            out.append(cur)
        return out

    async def close(self) -> None:
        """Stop receiving, then append what is still pending."""
        if self._closed:
            return
        self._closed = True
        for stream in self._streams:
            stream.close()
        for task in self._recv_tasks:
            task.cancel()
        for task in self._recv_tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self._flush_task is not None:
            self._flush_task.cancel()
            try:
                await self._flush_task
            except (asyncio.CancelledError, Exception):
                pass
        await self.flush()


async def start_udp_ingest(broker: object) -> UdpIngest:
    """Bind every ``udp.listeners`` address on the running loop and start ingesting."""
    return await UdpIngest(broker).start()
