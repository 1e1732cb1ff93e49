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
  A batch never exceeds what the log can append: the topic's
  ``max.message.bytes`` and its ``segment.bytes`` (a batch larger than a
  segment is RecordListTooLarge); a fuller batch is sealed and the datagram
  starts the next one.
- Pending data is bounded (4 x ``udp.batch.bytes``); beyond that datagrams are
  dropped with reason ``overflow`` rather than growing memory without limit.
- ``close()`` stops receiving first, then appends everything still pending.
- ``udp.topic`` exists while ingest runs: it is created at start-up and again
  at the next flush if it was deleted (with ``num.partitions`` partitions).
- Partitioning: ``hash`` sends every datagram from one source address (ip and
  port) to the same partition (CRC-32 of ``ip:port`` modulo the partition
  count); ``round-robin`` cycles through the partitions datagram by datagram.

The hot path (measured in bench/bench_udp.py): each parsed datagram is appended
to its partition's pending columns (:class:`PendingBatch`, no encoding per
datagram), and a burst of datagrams already queued by the transport is drained
without an ``await`` per datagram. A batch is built at flush from its columns by
``storage.columnar.build_batch_columns`` (the codec shared with the client and
the Spark sink, byte-for-byte ``storage.records.build_batch``); its size is
capped beforehand with the codec's per-record upper bound, so a sealed batch
always fits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import socket
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import asyncio_dgram

from broker.metrics import METRICS
from storage.columnar import RECORD_BOUND, build_batch_columns, warm_up
from storage.records import HEADER_SIZE

log = logging.getLogger(__name__)

_LONG_MAX = (1 << 63) - 1


class PendingBatch:
    """A partition's datagrams since the last flush, as columns, and an upper bound of
    the batch they will make (``HEADER_SIZE`` plus each record's
    ``RECORD_BOUND`` + key, value and header bytes)."""

    __slots__ = ("keys", "values", "timestamps", "headers", "has_headers", "bound", "built")

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []
        self.has_headers = False
        self.bound = HEADER_SIZE
        self.built: bytes | None = None  # a lone record measured exactly (see on_datagram)

    @property
    def count(self) -> int:
        return len(self.values)

    @staticmethod
    def record_bound(key: bytes | None, value: bytes | None,
                     headers: list[tuple[str, bytes | None]] | None) -> int:
        n = RECORD_BOUND + (len(key) if key else 0) + (len(value) if value else 0)
        if headers:
            n += 5 + sum(10 + len(k.encode()) + len(v or b"") for k, v in headers)
        return n

    def add(self, ts: int, key: bytes | None, value: bytes | None,
            headers: list[tuple[str, bytes | None]] | None, bound: int) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.timestamps.append(ts)
        self.headers.append(headers)
        if headers:
            self.has_headers = True
        self.bound += bound

    def build(self) -> bytes:
        if self.built is not None:
            return self.built
        return build_batch_columns(self.keys, self.values, self.timestamps,
                                   self.headers if self.has_headers else None)


class UdpRecord(NamedTuple):
    """One parsed datagram (the record-like shape ``storage.records.build_batch`` reads)."""

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
    elif isinstance(ts, bool) or not isinstance(ts, int) or not 0 <= ts <= _LONG_MAX:
        raise MalformedDatagram("json 'timestamp' must be a non-negative integer (ms)")
    value = obj.get("value")
    value_b: bytes | None
    try:
        if value is None:
            value_b = None
        elif isinstance(value, str):
            value_b = value.encode()
        else:
            value_b = json.dumps(value, separators=(",", ":")).encode()
        key_b = key.encode() if key is not None else None
    except UnicodeEncodeError:
        raise MalformedDatagram("json text with a lone surrogate cannot be UTF-8") from None
    headers_obj = obj.get("headers")
    if headers_obj is None:
        headers_obj = {}
    elif not isinstance(headers_obj, dict):
        raise MalformedDatagram("json 'headers' must be an object")
    headers: list[tuple[str, bytes | None]] = []
    for hk, hv in headers_obj.items():
        if hv is not None and not isinstance(hv, str):
            raise MalformedDatagram("json header values must be strings or null")
        try:
            hk.encode()
            headers.append((hk, hv.encode() if hv is not None else None))
        except UnicodeEncodeError:
            raise MalformedDatagram("json header with a lone surrogate cannot be UTF-8") from None
    return UdpRecord(ts, key_b, value_b, headers)


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
    """The broker's partition manager as UDP ingest uses it: topic, counts, limits, appends.

    Appends go through ``PartitionManager.append``, exactly the code path the
    Produce handler uses (validation, indexes, metrics, fetch wake-ups).
    """

    def __init__(self, broker: object) -> None:
        self.broker = broker
        self.pm: Any = getattr(broker, "partitions", broker)

    async def ensure_topic(self, topic: str) -> None:
        result = self.pm.ensure_topic(topic)
        if inspect.isawaitable(result):
            await result

    def partition_count(self, topic: str) -> int:
        return int(self.pm.partition_count(topic) or 0)

    def limits(self, topic: str) -> tuple[int, int, int]:
        """(before.max.ms, after.max.ms, largest batch the log appends) for the topic:
        the batch limit is the smaller of max.message.bytes and segment.bytes."""
        lc = self.pm.log_config(topic)
        if getattr(lc, "message_timestamp_type", "CreateTime") == "LogAppendTime":
            before = after = _LONG_MAX
        else:
            before = int(lc.message_timestamp_before_max_ms)
            after = int(lc.message_timestamp_after_max_ms)
        return before, after, min(int(lc.max_message_bytes), int(lc.segment_bytes))

    async def append(self, topic: str, partition: int, batch: bytes) -> None:
        result = self.pm.append(topic, partition, batch)
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
        listeners = str(_cfg(config, "udp_listeners", ""))
        self.addresses = [parse_host_port(x) for x in listeners.split(",") if x.strip()]
        self._log = _PartitionLog(broker)
        self._streams: list[Any] = []
        self._recv_tasks: list[asyncio.Task[None]] = []
        self._flush_task: asyncio.Task[None] | None = None
        self._flush_event = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._open: dict[int, PendingBatch] = {}  # partition -> batch being filled
        self._sealed: list[tuple[int, PendingBatch]] = []  # full batches awaiting the flush
        self._pending_bytes = 0
        self._pending_limit = 4 * self.batch_bytes
        self._partitions = 1
        self._rr = 0
        self._hash_cache: dict[Any, int] = {}
        self._ts_before = _LONG_MAX
        self._ts_after = _LONG_MAX
        self._max_batch = 1048588
        self._closed = False
        self._flush_lock = asyncio.Lock()
        self._builder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="udp-build")

    @property
    def bound_addresses(self) -> list[tuple[str, int]]:
        """The (host, port) each listener is bound to (useful with port 0)."""
        return [tuple(s.sockname[:2]) for s in self._streams]

    async def start(self) -> UdpIngest:
        warm_up()  # the codec's one-time set-up, before datagrams can queue behind it
        await self._log.ensure_topic(self.topic)
        self._refresh_topic()
        for host, port in self.addresses:
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                                 socket.SOCK_DGRAM)
            try:
                if self.rcvbuf > 0:
                    _raise_rcvbuf(sock, self.rcvbuf)
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

    def _refresh_topic(self) -> None:
        n = self._log.partition_count(self.topic)
        if n > 0 and n != self._partitions:
            self._hash_cache.clear()
            self._partitions = n
        self._ts_before, self._ts_after, self._max_batch = self._log.limits(self.topic)

    async def _recv_loop(self, stream: Any) -> None:
        # asyncio-dgram 3.0 queues datagrams in ``_recvq``; draining a burst from it
        # without one await per datagram is what lets one core keep up at 100k/s.
        queue: asyncio.Queue[tuple[bytes | None, Any]] | None = getattr(stream, "_recvq", None)
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
            now_ms = int(time.time() * 1000)
            n = 1
            self._handle_safely(data, addr, now_ms)
            if queue is not None:
                while not queue.empty():
                    item, addr = queue.get_nowait()
                    if item is None:  # the transport closed
                        METRICS.udp_received(n)
                        return
                    self._handle_safely(item, addr, now_ms)
                    n += 1
            METRICS.udp_received(n)

    def _handle_safely(self, data: bytes, addr: Any, now_ms: int) -> None:
        try:
            self.on_datagram(data, addr, now_ms)
        except Exception:
            # A bug must cost one datagram, never the receive loop.
            METRICS.udp_dropped("internal", 1)
            log.exception("UDP datagram could not be handled")

    def on_datagram(self, data: bytes, addr: Any, now_ms: int) -> None:
        """Parse one datagram and encode it into its partition's pending batch (no I/O)."""
        size = len(data)
        if size > self.max_datagram:
            METRICS.udp_dropped("oversized", 1)
            return
        if self._pending_bytes + size > self._pending_limit:
            METRICS.udp_dropped("overflow", 1)
            self._flush_event.set()
            return
        ts: int
        key: bytes | None
        value: bytes | None
        headers: list[tuple[str, bytes | None]] | None
        if self.format == "raw":
            ts, key, value, headers = now_ms, None, data, None
        else:
            try:
                ts, key, value, headers = self._parse(data, now_ms)
            except MalformedDatagram:
                METRICS.udp_dropped("malformed", 1)
                return
            if ts != now_ms and (ts < now_ms - self._ts_before or ts > now_ms + self._ts_after):
                METRICS.udp_dropped("timestamp", 1)
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
        pending = self._open.get(part)
        if pending is None:
            pending = self._open[part] = PendingBatch()
        bound = PendingBatch.record_bound(key, value, headers)
        if pending.bound + bound > self._max_batch:
            if pending.count:
                # Seal this partition's batch; the record starts the next one.
                self._sealed.append((part, pending))
                pending = self._open[part] = PendingBatch()
            if pending.bound + bound > self._max_batch:
                # Alone, only its exact size can tell whether it fits: build it now.
                pending.add(ts, key, value, headers, bound)
                built = pending.build()
                del self._open[part]
                if len(built) > self._max_batch:
                    METRICS.udp_dropped("oversized", 1)
                    return
                pending.built = built
                self._sealed.append((part, pending))
                bound = len(built) - HEADER_SIZE
            else:
                pending.add(ts, key, value, headers, bound)
        else:
            pending.add(ts, key, value, headers, bound)
        added = bound
        first = self._pending_bytes == 0
        self._pending_bytes += added
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
        """Append everything pending: one batch per partition (more only past max.message.bytes)."""
        async with self._flush_lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batches = self._sealed + list(self._open.items())
            self._sealed, self._open = [], {}
            self._pending_bytes = 0
            if batches and self._log.partition_count(self.topic) == 0:
                # The topic was deleted under us: ingest keeps it, as auto-create would.
                try:
                    await self._log.ensure_topic(self.topic)
                    log.warning("UDP topic was deleted; recreated it", extra={"topic": self.topic})
                except Exception:
                    log.exception("UDP ingest could not recreate its topic")
            for part, pending in batches:
                if pending.count == 0:
                    continue
                try:
                    # Built in a worker thread: NumPy and Arrow let the receive loop
                    # keep draining the socket meanwhile (the build is ~1 ms a batch).
                    batch = await asyncio.get_running_loop().run_in_executor(
                        self._builder, pending.build)
                    await self._log.append(self.topic, part, batch)
                except Exception as exc:
                    METRICS.udp_dropped("append_failed", pending.count)
                    log.warning("UDP batch append failed; its datagrams are dropped",
                                extra={"topic": self.topic, "partition": part,
                                       "records": pending.count, "error": repr(exc)})
                    continue
                METRICS.udp_appended(pending.count)
            try:
                self._refresh_topic()
            except Exception:
                log.exception("UDP ingest could not refresh the topic's settings")

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
        self._builder.shutdown(wait=True)


def _raise_rcvbuf(sock: socket.socket, size: int) -> None:
    """Ask for ``size`` bytes of receive buffer; past net.core.rmem_max only a privileged
    process gets it (SO_RCVBUFFORCE), others get the cap and a warning at start-up."""
    force = getattr(socket, "SO_RCVBUFFORCE", 33 if sys.platform.startswith("linux") else None)
    if force is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
            return
        except OSError:
            pass
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


async def start_udp_ingest(broker: object) -> UdpIngest:
    """Bind every ``udp.listeners`` address on the running loop and start ingesting."""
    return await UdpIngest(broker).start()
