"""The asyncio Chronolog/Kafka client: topics, produce, time lookups, exact reads.

It speaks the Kafka wire protocol through ``protocol.api`` and builds/decodes
record batches with ``storage.records``, so it works against Chronolog and
against any Kafka broker that supports the same API versions.

Invariants:
- Each API is used at ``min(our max, broker's max)`` as negotiated by ApiVersions
  at connect time; an API the broker cannot serve in our range raises
  ``KafkaError(UNSUPPORTED_VERSION)`` naming it, before anything is sent.
- Every broker error reaches the caller as ``KafkaError`` with Kafka's code;
  nothing is silently skipped. "No record at or after T" is not an error: it is
  offset -1 in :meth:`Client.list_offsets` and ``None`` in :meth:`Client.offsets_for_times`.
- Reads are exact: :meth:`Client.consume` yields precisely the offsets in
  ``[start, end)`` that exist (compaction gaps and control batches are skipped,
  records before ``start`` in the first batch are dropped), in offset order.
- One TCP connection per broker, shared by all calls; requests pipeline on it.
  A dead connection is replaced on next use; reads (Metadata, ListOffsets,
  Fetch) are retried once on the new one, Produce never is (it could duplicate).
- Produce builds batches from columns (:mod:`storage.columnar`), never record by
  record, and keeps up to ``max_in_flight`` Produce requests on the wire at once;
  they are written and answered in order, so a partition's records get offsets
  in input order. If one fails, no further request is sent and the call raises;
  requests already in flight behind it may still have been appended (as with
  Kafka's ``max.in.flight.requests.per.connection`` > 1 without idempotence).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import msgspec

import protocol.api as api
import protocol.describe_configs as dc
from client._lazy import LazyModule
from client.connection import IDLE_POLL_US, BrokerConnection, parse_bootstrap, poll_window
from client.partitioner import StickyPartitioner, partitions_for_keys
from protocol import messages as m
from protocol.errors import ErrorCode, KafkaError
from storage import records as rec
from storage.errors import StorageError
from storage.planner import DisorderStats, PlannedRange

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

    from client.security import ClientSecurity
    from storage import columnar
else:  # imported on first use (see client._lazy)
    np = LazyModule("numpy")
    pa = LazyModule("pyarrow")
    columnar = LazyModule("storage.columnar")

__all__ = [
    "Client",
    "ConfigEntry",
    "ConfigSynonym",
    "FetchResult",
    "Placement",
    "ProduceWindow",
    "ProducerRecord",
    "Record",
    "TimeWindowPlan",
    "TopicPartition",
    "COMPRESSION_CODECS",
    "DEFAULT_MAX_IN_FLIGHT",
    "LATEST",
    "EARLIEST",
    "MAX_TIMESTAMP",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

# Kafka API keys used by the client.
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22
DESCRIBE_CONFIGS = 32
PLAN_TIME_WINDOW = 10000  # Chronolog's own (protocol/plan_time_window.py)
COUNT_TIME_WINDOWS = 10001  # Chronolog's own (protocol/count_time_windows.py)

#: Special ListOffsets timestamps (KIP-79, KIP-734) and the version each needs.
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
_SPECIAL_MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7}

#: The version window this client can use per API: below ``min`` our requests
#: lack a field we rely on; above ``max`` the API moves to topic ids, which a
#: name-based client does not use.
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 11),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 10),
    METADATA: (1, 12),
    API_VERSIONS: (0, 3),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    INIT_PRODUCER_ID: (0, 4),
    DESCRIBE_CONFIGS: (1, 4),
    PLAN_TIME_WINDOW: (0, 0),
    COUNT_TIME_WINDOWS: (0, 0),
}
_API_NAMES = {
    PRODUCE: "Produce",
    FETCH: "Fetch",
    LIST_OFFSETS: "ListOffsets",
    METADATA: "Metadata",
    API_VERSIONS: "ApiVersions",
    CREATE_TOPICS: "CreateTopics",
    DELETE_TOPICS: "DeleteTopics",
    INIT_PRODUCER_ID: "InitProducerId",
    DESCRIBE_CONFIGS: "DescribeConfigs",
    PLAN_TIME_WINDOW: "PlanTimeWindow",
    COUNT_TIME_WINDOWS: "CountTimeWindows",
}

#: DescribeConfigs resource names → Kafka's ConfigResource type ids.
_RESOURCE_TYPES = {"topic": dc.RESOURCE_TOPIC, "broker": dc.RESOURCE_BROKER}

#: Kafka's ``compression.type`` names → batch codec ids.
COMPRESSION_CODECS: dict[str, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

_DEFAULT_FETCH_BYTES = 4 * 1024 * 1024
#: Batches are kept under Kafka's default max.message.bytes (1048588) with room for overhead.
DEFAULT_MAX_BATCH_BYTES = 1_000_000
_RECORD_OVERHEAD = 24  # varints and attributes of one record, an upper-side estimate
#: Produce requests one call keeps on the wire before waiting for the oldest answer
#: (Kafka's max.in.flight.requests.per.connection default).
DEFAULT_MAX_IN_FLIGHT = 5
#: Smallest request a call's records are cut into for pipelining: smaller ones cost
#: more in per-request work on both sides than the overlap saves (10k x 100 B per call,
#: A/B on one broker: 256 KiB pieces +7 %, 512 KiB +18-24 % over no cutting).
_PIPELINE_BYTES = 512 * 1024
_MAX_FETCH_BYTES = 256 * 1024 * 1024


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class TimeWindowPlan(NamedTuple):
    """One partition's event-time plan (:meth:`Client.plan_time_window`).

    ``ranges``: the offset ranges [start, end) that may hold a record with
    T1 <= timestamp < T2 (a superset: none is missed), sorted, disjoint, with the
    bytes fetching each reads. ``disorder``: how many records in [log start, log end)
    arrived with a timestamp below the largest one before them, and the largest gap.
    """

    partition: int
    ranges: tuple[PlannedRange, ...]
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    disorder: DisorderStats

    @property
    def bytes(self) -> int:
        """What reading the whole plan fetches."""
        return sum(r.bytes for r in self.ranges)


class Placement(NamedTuple):
    """Where produced rows went: per input row, its partition and offset (-1 under acks=0)."""

    partitions: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]


class FetchResult(NamedTuple):
    """Raw Fetch answer for one partition: whole batches from the one holding the offset."""

    records_bytes: bytes
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int = -1
    # (producer id, first offset) of aborted transactions (read_committed only)
    aborted: tuple[tuple[int, int], ...] = ()


@dataclass(slots=True)
class Record(rec.Record):
    """A consumed record: ``storage.records.Record`` plus where it came from."""

    topic: str = ""
    partition: int = -1


class ConfigSynonym(NamedTuple):
    """Where a config's value may come from, highest priority first (DescribeConfigs v1+)."""

    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a topic or broker as DescribeConfigs reports it.

    ``source`` is Kafka's ConfigSource name (``DYNAMIC_TOPIC_CONFIG``,
    ``STATIC_BROKER_CONFIG``, ``DEFAULT_CONFIG``, ...); ``config_type`` is Kafka's
    type name (``INT``, ``LONG``, ...) or None when the broker answered below v3.
    """

    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    config_type: str | None = None
    documentation: str | None = None


class ProducerRecord(msgspec.Struct, gc=False):
    """A record to produce. ``str`` keys/values are UTF-8 encoded; ``timestamp`` None = now.

    A msgspec Struct that the garbage collector does not track (``gc=False``): making
    one costs about a fifth of a slotted dataclass's, and a list of 10k of them no
    longer sets off the collections that walked every object in the process. Fields,
    keywords, positional order, ``==`` and ``repr`` are a dataclass's; copy with
    ``msgspec.structs.replace``. The one rule it brings: no reference cycle through
    a record (e.g. a headers list holding the record itself) -- it would never be freed.
    """

    key: bytes | str | None = None
    value: bytes | str | None = None
    headers: Sequence[tuple[str, bytes | str | None]] = ()
    timestamp: int | None = None


@dataclass(slots=True)
class WireRecord:
    """A ProducerRecord normalised to what ``build_batch`` reads (bytes, a timestamp)."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


def _b(v: bytes | bytearray | memoryview | str | None) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def to_wire(r: ProducerRecord, now_ms: int | None = None) -> WireRecord:
    """Normalise a ProducerRecord (encode strings, fill a missing timestamp with now)."""
    ts = r.timestamp
    if ts is None:
        ts = _now_ms() if now_ms is None else now_ms
    if ts.__class__ is not int:
        ts = int(ts)
    if ts < 0:
        raise ValueError(f"record timestamp {ts} is negative; Kafka timestamps are epoch ms >= 0")
    headers = [(str(k), _b(v)) for k, v in r.headers] if r.headers else ()
    return WireRecord(ts, _b(r.key), _b(r.value), headers)


def compression_codec(compression: str | int | None) -> int:
    """``"gzip"`` → 1 etc.; None means no compression. Unknown names raise ValueError."""
    if compression is None:
        return 0
    if isinstance(compression, int):
        if compression not in COMPRESSION_CODECS.values():
            raise ValueError(f"unknown compression codec id {compression}")
        return compression
    try:
        return COMPRESSION_CODECS[compression.lower()]
    except KeyError:
        raise ValueError(
            f"unknown compression {compression!r}; use one of {', '.join(COMPRESSION_CODECS)}"
        ) from None


def record_size(w: WireRecord) -> int:
    """Estimated encoded size of one record (slightly above the true size)."""
    key, value = w.key, w.value
    n = _RECORD_OVERHEAD
    if key is not None:
        n += len(key)
    if value is not None:
        n += len(value)
    if w.headers:
        n += sum(len(k) + len(v or b"") + 10 for k, v in w.headers)
    return n


def _cut(
    idx: npt.NDArray[np.int64] | None, sizes: npt.NDArray[np.int64], limit: int, n: int
) -> list[npt.NDArray[np.int64] | slice]:
    """Cut a partition's records (``idx``; None = all n in order, cut into slices) into
    consecutive runs whose size bound stays within ``limit`` (at least one record each)."""
    s = sizes if idx is None else sizes[idx]
    cum = np.cumsum(s)
    out: list[npt.NDArray[np.int64] | slice] = []
    first = 0
    m = len(s)
    while first < m:
        base = int(cum[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(cum, base + limit, side="right")))
        out.append(slice(first, last) if idx is None else idx[first:last])
        first = last
    return out


def _int_column(col: Any) -> npt.NDArray[np.int64]:
    """An Arrow integer column as int64, nulls as -1."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if col.null_count:
        col = col.cast(pa.int64()).fill_null(-1)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)


def _header_lists(headers: Any) -> list[Any]:
    """Per-record header lists from a list, or from an Arrow list<struct<key, value>> column."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if isinstance(headers, pa.Array):
        return [[(h["key"], h["value"]) for h in row] if row else None
                for row in headers.to_pylist()]
    return list(headers)


def _header_sizes(hlist: list[Any] | None) -> npt.NDArray[np.int64] | None:
    """An upper bound of each record's header bytes beyond the empty count byte."""
    if hlist is None:
        return None

    def size(h: Any) -> int:
        if not h:
            return 0
        return 5 + sum(10 + len(str(k).encode()) + len(_b(v) or b"") for k, v in h)

    return np.fromiter(map(size, hlist), dtype=np.int64, count=len(hlist))


def _raise_for(code: int, what: str, message: str | None = None) -> None:
    if code != 0:
        try:
            ec = ErrorCode(code)
        except ValueError:
            ec = ErrorCode.UNKNOWN_SERVER_ERROR
            message = f"error code {code}" + (f": {message}" if message else "")
        raise KafkaError(ec, f"{what}: {message}" if message else what)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


#: Cached topic metadata is refreshed after this long (Kafka's metadata.max.age.ms).
METADATA_MAX_AGE_S = 300.0


@dataclass
class _TopicMeta:
    partitions: dict[int, int]  # partition -> leader node id
    fetched_at: float = field(default_factory=time.monotonic)


def _take(col: Any, idx: npt.NDArray[np.int64] | slice) -> Any:
    return col[idx] if isinstance(idx, slice) else col.take(columnar.numeric_array(idx))


class ProduceWindow:
    """Produce requests kept in flight, in order, across calls (see ``produce_columns``).

    At most ``max_in_flight`` requests are unanswered; sending one more first
    waits for the oldest. The first failure is raised by the ``send`` or
    ``drain`` that meets it; after it nothing more should be sent (requests
    already in flight behind it may still be appended).
    """

    def __init__(self, client: Client, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.client = client
        self.max_in_flight = max_in_flight
        self._pending: collections.deque[
            tuple[str, dict[int, bytes], list[Any], Callable[[dict[int, int]], None]]
        ] = collections.deque()

    async def send(self, topic: str, batches: dict[int, bytes], acks: int,
                   on_answer: Callable[[dict[int, int]], None]) -> None:
        """Write one request per leader for ``batches``; ``on_answer(base offsets)`` runs
        when they are answered."""
        while len(self._pending) >= self.max_in_flight:
            await self._finish_oldest()
        sent = await self.client._send_produce(topic, batches, acks)
        self._pending.append((topic, batches, sent, on_answer))

    async def _finish_oldest(self) -> None:
        topic, batches, sent, on_answer = self._pending.popleft()
        on_answer(await self.client._wait_produce(topic, batches, sent))

    async def drain(self) -> None:
        """Wait for every answer; raise the first error."""
        while self._pending:
            await self._finish_oldest()

    async def abandon(self) -> None:
        """Read (without raising) the answers still outstanding after a failure."""
        while self._pending:
            _, _, sent, _ = self._pending.popleft()
            for conn, fut in sent:
                with contextlib.suppress(KafkaError):
                    await conn.wait(fut)


class Client:
    """An asyncio client for one cluster; create it with :meth:`Client.connect`."""

    def __init__(self, bootstrap: str, client_id: str, request_timeout: float,
                 security: ClientSecurity | None = None,
                 idle_poll_us: int = IDLE_POLL_US) -> None:
        poll_window(idle_poll_us)  # refused before any connection is made
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.idle_poll_us = idle_poll_us
        self.security = security
        self._bootstrap_conn: BrokerConnection | None = None
        self._conns: dict[int, BrokerConnection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._versions: dict[int, int] = {}
        self._broker_ranges: dict[int, tuple[int, int]] = {}
        self._topics: dict[str, _TopicMeta] = {}
        self._sticky = StickyPartitioner()
        self._conn_lock = asyncio.Lock()

    # ------------------------------------------------------------ lifecycle

    @classmethod
    async def connect(
        cls,
        bootstrap: str = "127.0.0.1:9092",
        *,
        client_id: str = "chronolog",
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
        idle_poll_us: int = IDLE_POLL_US,
    ) -> Client:
        """Connect to the first reachable bootstrap server and negotiate API versions.

        ``security`` (a :class:`client.security.ClientSecurity`; None = PLAINTEXT) is
        used by every connection the client opens: bootstrap, partition leaders and
        coordinators. A refused login raises at once (SASL_AUTHENTICATION_FAILED);
        only an unreachable server moves on to the next bootstrap address.
        ``idle_poll_us``: how long the loop keeps polling for the answer to a small
        request (a time lookup, metadata, a group or admin call; never Produce or
        Fetch) before it sleeps; 0 = sleep at once (see docs/client.md).
        """
        self = cls(bootstrap, client_id, request_timeout, security, idle_poll_us)
        errors: list[str] = []
        for host, port in parse_bootstrap(bootstrap):
            try:
                conn = await self._open(host, port)
            except KafkaError as e:
                if e.code != ErrorCode.NETWORK_EXCEPTION:
                    raise
                errors.append(str(e))
                continue
            try:
                await self._negotiate(conn)
            except BaseException:
                await conn.close()
                raise
            self._bootstrap_conn = conn
            return self
        raise KafkaError(ErrorCode.NETWORK_EXCEPTION, "; ".join(errors))

    async def _open(self, host: str, port: int) -> BrokerConnection:
        """A new connection to ``host:port``, with TLS and SASL as ``self.security`` says."""
        sec = self.security
        if sec is None or sec.protocol == "PLAINTEXT":
            return await BrokerConnection.open(
                host, port, client_id=self.client_id, request_timeout=self.request_timeout,
                idle_poll_us=self.idle_poll_us,
            )
        from client.security import open_connection

        return await open_connection(host, port, sec, client_id=self.client_id,
                                     request_timeout=self.request_timeout,
                                     idle_poll_us=self.idle_poll_us)

    async def close(self) -> None:
        conns = list(self._conns.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._conns.clear()
        self._bootstrap_conn = None
        for c in {id(c): c for c in conns}.values():
            await c.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _negotiate(self, conn: BrokerConnection) -> None:
        # ApiVersions v0 is understood by every broker and is all we need (the key ranges).
        body = await conn.request(API_VERSIONS, 0, {})
        _raise_for(body["error_code"], f"ApiVersions from {conn.host}:{conn.port}")
        ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        self._broker_ranges = ranges
        for key, (lo, hi) in CLIENT_VERSIONS.items():
            codec = api.API_VERSIONS.get(key)  # type: ignore[call-overload]
            if codec is None:
                continue  # no schema for this API in protocol/: we cannot encode it
            lo, hi = max(lo, codec.min_version), min(hi, codec.max_version)
            if key in ranges:
                blo, bhi = ranges[key]
                v = min(hi, bhi)
                if v >= max(lo, blo):
                    self._versions[key] = v

    def api_version(self, api_key: int) -> int:
        """The negotiated version of ``api_key``; raises UNSUPPORTED_VERSION if there is none."""
        try:
            return self._versions[api_key]
        except KeyError:
            lo, hi = CLIENT_VERSIONS.get(api_key, (0, -1))
            broker = self._broker_ranges.get(api_key)
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"{_API_NAMES.get(api_key, api_key)}: client supports v{lo}-v{hi}, broker "
                + (f"v{broker[0]}-v{broker[1]}" if broker else "does not support it"),
            ) from None

    def supports(self, api_key: int) -> bool:
        return api_key in self._versions

    async def _any_conn(self) -> BrokerConnection:
        conn = self._bootstrap_conn
        if conn is None:
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, "client is closed")
        if conn.closed:
            async with self._conn_lock:
                if self._bootstrap_conn is conn:
                    host, port = conn.host, conn.port
                    self._bootstrap_conn = await self._open(host, port)
                if self._bootstrap_conn is None:
                    raise KafkaError(ErrorCode.NETWORK_EXCEPTION, "client is closed")
                conn = self._bootstrap_conn
        return conn

    async def _conn_for(self, node_id: int) -> BrokerConnection:
        """The connection to broker ``node_id``; the bootstrap one when it is that broker."""
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        addr = self._brokers.get(node_id)
        boot = await self._any_conn()
        if addr is None or (boot.host, boot.port) == addr:
            return boot
        async with self._conn_lock:
            conn = self._conns.get(node_id)
            if conn is None or conn.closed:
                conn = await self._open(addr[0], addr[1])
                self._conns[node_id] = conn
            return conn

    async def _request(self, api_key: int, body: dict[str, Any], node_id: int | None = None) -> Any:
        version = self.api_version(api_key)
        conn = await (self._any_conn() if node_id is None else self._conn_for(node_id))
        return await conn.request(api_key, version, body)

    # ------------------------------------------------------------ metadata

    async def _retry_read(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run a read-only request, once more on a fresh connection if the old one had died.

        A broker restart leaves a socket that fails only when next used; reads
        (Metadata, ListOffsets, Fetch) are safe to repeat, Produce is not, so only
        reads go through here.
        """
        try:
            return await make()
        except KafkaError as e:
            if e.code != ErrorCode.NETWORK_EXCEPTION or self._bootstrap_conn is None:
                raise
            log.info("retrying a read after: %s", e)
            return await make()

    async def _metadata(self, topics: Sequence[str] | None) -> dict[str, Any]:
        return await self._retry_read(lambda: self._metadata_once(topics))

    async def _metadata_once(self, topics: Sequence[str] | None) -> dict[str, Any]:
        version = self.api_version(METADATA)
        body: dict[str, Any] = {
            "topics": None if topics is None else [{"name": t, "topic_id": bytes(16)} for t in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        conn = await self._any_conn()
        resp: dict[str, Any] = await conn.request(METADATA, version, body)
        for b in resp["brokers"]:
            self._brokers[b["node_id"]] = (b["host"], b["port"])
        for t in resp["topics"]:
            if t["error_code"] == 0:
                self._topics[t["name"]] = _TopicMeta(
                    {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
                )
            else:
                self._topics.pop(t["name"], None)
        return resp

    async def _topic_meta(self, topic: str, *, refresh: bool = False) -> _TopicMeta:
        cached = self._topics.get(topic)
        if (
            refresh
            or cached is None
            or time.monotonic() - cached.fetched_at > METADATA_MAX_AGE_S
        ):
            resp = await self._metadata([topic])
            for t in resp["topics"]:
                if t["name"] == topic:
                    _raise_for(t["error_code"], f"topic {topic!r}")
        meta = self._topics.get(topic)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r}")
        return meta

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (raises UNKNOWN_TOPIC_OR_PARTITION if it does not exist)."""
        return sorted((await self._topic_meta(topic)).partitions)

    async def _leader(self, topic: str, partition: int) -> int:
        meta = await self._topic_meta(topic)
        if partition not in meta.partitions:
            meta = await self._topic_meta(topic, refresh=True)
        if partition not in meta.partitions:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic!r} has no partition {partition}"
            )
        return meta.partitions[partition]

    async def list_topics(self) -> dict[str, list[int]]:
        """Every topic and its partition ids (one Metadata request)."""
        resp = await self._metadata(None)
        return {
            t["name"]: sorted(p["partition_index"] for p in t["partitions"])
            for t in resp["topics"]
            if t["error_code"] == 0
        }

    # ------------------------------------------------------------ admin

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        replication_factor: int = 1,
    ) -> None:
        """Create ``name``; raises KafkaError (e.g. TOPIC_ALREADY_EXISTS, INVALID_CONFIG)."""
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": str(v)} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": int(self.request_timeout * 1000),
            "validate_only": False,
        }
        resp = await self._request(CREATE_TOPICS, body)
        for t in resp["topics"]:
            _raise_for(t["error_code"], f"create topic {name!r}", t.get("error_message"))
        self._topics.pop(name, None)

    async def delete_topic(self, name: str) -> None:
        """Delete ``name``; raises KafkaError (UNKNOWN_TOPIC_OR_PARTITION if absent)."""
        body = {
            "topic_names": [name],
            "topics": [{"name": name, "topic_id": bytes(16)}],
            "timeout_ms": int(self.request_timeout * 1000),
        }
        resp = await self._request(DELETE_TOPICS, body)
        for t in resp["responses"]:
            _raise_for(t["error_code"], f"delete topic {name!r}", t.get("error_message"))
        self._topics.pop(name, None)

    async def describe_configs(
        self, topic: str, keys: Sequence[str] | None = None
    ) -> dict[str, str | None] | None:
        """The topic's configs (name -> value) via DescribeConfigs, or None if the broker
        lacks that API; ``keys`` limits the answer to those names (None = every config)."""
        if not self.supports(DESCRIBE_CONFIGS):
            return None
        entries = await self.describe_config_entries(topic, keys=keys)
        return {name: e.value for name, e in entries.items()}

    async def describe_config_entries(
        self,
        name: str,
        *,
        resource: str = "topic",
        keys: Sequence[str] | None = None,
        synonyms: bool = False,
        documentation: bool = False,
    ) -> dict[str, ConfigEntry]:
        """Every config of a topic (``resource="topic"``) or broker (``"broker"``, name =
        its node id) with value, source and flags, via DescribeConfigs.

        ``keys`` limits the answer to those names (None = all); ``synonyms`` and
        ``documentation`` ask for those extras (documentation needs v3). Raises
        KafkaError with the broker's error for that resource (e.g.
        UNKNOWN_TOPIC_OR_PARTITION), or UNSUPPORTED_VERSION without the API.
        """
        try:
            rtype = _RESOURCE_TYPES[resource]
        except KeyError:
            raise ValueError(f"resource must be one of {sorted(_RESOURCE_TYPES)}, got {resource!r}") from None
        body = {
            "resources": [
                {"resource_type": rtype, "resource_name": name,
                 "configuration_keys": None if keys is None else list(keys)}
            ],
            "include_synonyms": synonyms,
            "include_documentation": documentation,
        }
        node = int(name) if rtype == dc.RESOURCE_BROKER and name.isdigit() else None
        resp = await self._retry_read(lambda: self._request(DESCRIBE_CONFIGS, body, node))
        out: dict[str, ConfigEntry] = {}
        for r in resp["results"]:
            _raise_for(r["error_code"], f"describe configs of {resource} {name!r}", r.get("error_message"))
            for c in r["configs"]:
                out[c["name"]] = ConfigEntry(
                    name=c["name"],
                    value=c["value"],
                    source=dc.SOURCE_NAMES.get(c["config_source"], "UNKNOWN"),
                    read_only=c["read_only"],
                    sensitive=c["is_sensitive"],
                    synonyms=tuple(
                        ConfigSynonym(s["name"], s["value"], dc.SOURCE_NAMES.get(s["source"], "UNKNOWN"))
                        for s in c["synonyms"]
                    ),
                    config_type=(dc.TYPE_NAMES.get(c["config_type"], "UNKNOWN")
                                 if self.api_version(DESCRIBE_CONFIGS) >= 3 else None),
                    documentation=c["documentation"],
                )
        return out

    # ------------------------------------------------------------ produce

    async def init_producer_id(self) -> tuple[int, int]:
        """A fresh idempotent producer id and epoch (InitProducerId, no transactional id)."""
        body = {
            "transactional_id": None,
            "transaction_timeout_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        resp = await self._request(INIT_PRODUCER_ID, body)
        _raise_for(resp["error_code"], "InitProducerId")
        return int(resp["producer_id"]), int(resp["producer_epoch"])

    async def produce(
        self,
        topic: str,
        records: Iterable[ProducerRecord],
        *,
        partition: int | None = None,
        acks: int = 1,
        compression: str | int | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> list[int]:
        """Produce ``records`` and return each one's offset, in input order.

        ``partition=None`` places records as Kafka's default partitioner does
        (murmur2 of the key; null keys stick to one partition per call, rotating).
        One batch per partition, all partitions in one Produce request per leader;
        a partition's records beyond ``max_batch_bytes`` (an upper bound of the
        encoded size, below Kafka's default max.message.bytes) go in following
        requests, up to ``max_in_flight`` of them on the wire at once (a call of
        1 MiB or more is cut into up to ``max_in_flight`` even requests of at least
        512 KiB, so the broker appends one while the next is encoded).
        With ``acks=0`` the broker sends no answer and the offsets are all -1.
        """
        items = records if isinstance(records, list) else list(records)
        if not items:
            return []
        # One attribute a pass, columns straight from the records: no per-record
        # object is made on the way (the records themselves are the GC's work).
        hdrs = [r.headers for r in items]
        placed = await self.produce_columns(
            topic, [r.value for r in items], [r.key for r in items],
            [r.timestamp for r in items], hdrs if any(hdrs) else None, partition=partition,
            acks=acks, compression=compression, max_batch_bytes=max_batch_bytes,
            max_in_flight=max_in_flight,
        )
        return placed.offsets.tolist()  # type: ignore[no-any-return]

    async def produce_arrow(
        self,
        topic: str,
        table: pa.Table | pa.RecordBatch,
        *,
        acks: int = 1,
        compression: str | int | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> Placement:
        """Bulk-produce an Arrow table; returns each row's partition and offset (input order).

        Columns: ``value`` (binary or string, required); optional ``key``,
        ``timestamp`` (epoch ms as int64, or any Arrow timestamp; null = now),
        ``partition`` (int; null or absent = the default partitioner) and
        ``headers`` (list<struct<key: string, value: binary>>). Others are ignored.
        """
        names = table.schema.names
        if "value" not in names:
            raise ValueError(f"produce_arrow needs a 'value' column; the table has {names}")

        def col(name: str) -> Any:
            return table.column(name) if name in names else None

        parts = col("partition")
        return await self.produce_columns(
            topic, col("value"), col("key"), col("timestamp"), col("headers"),
            partitions=None if parts is None else _int_column(parts),
            acks=acks, compression=compression, max_batch_bytes=max_batch_bytes,
            max_in_flight=max_in_flight,
        )

    async def produce_columns(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        timestamps: Any = None,
        headers: Any = None,
        *,
        partition: int | None = None,
        partitions: npt.NDArray[np.int64] | None = None,
        acks: int = 1,
        compression: str | int | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        window: ProduceWindow | None = None,
    ) -> Placement:
        """Produce records given as columns (see ``storage.columnar.build_batch_columns``
        for the accepted forms); returns each record's partition and offset in input order.

        ``partition`` sends every record there; otherwise ``partitions`` (-1 = let
        the default partitioner choose) and then the default partitioner place them.
        With a ``window`` (:class:`ProduceWindow`) the call returns once its requests
        are written: requests of successive calls share the window's in-flight
        bound and order, and the returned offsets are filled in as answers arrive
        (complete after ``await window.drain()``).
        """
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        vcol = columnar.binary_column(values)
        n = len(vcol)
        offsets = np.full(n, -1, dtype=np.int64)
        if n == 0:
            return Placement(offsets.copy(), offsets)
        kcol = columnar.binary_column(keys, n)
        ts = columnar.timestamp_column(timestamps, n, _now_ms())
        if len(kcol) != n or len(ts) != n:
            raise ValueError(f"columns differ in length: {n} values, {len(kcol)} keys, "
                             f"{len(ts)} timestamps")
        if bool((ts < 0).any()):
            ts_bad = int(ts[np.argmax(ts < 0)])
            raise ValueError(
                f"record timestamp {ts_bad} is negative; Kafka timestamps are epoch ms >= 0")
        hlist: list[Any] | None = None
        if headers is not None:
            hlist = _header_lists(headers)
            if len(hlist) != n:
                raise ValueError(f"{len(hlist)} header lists for {n} records")
        codec = compression_codec(compression)
        groups = await self._place(topic, kcol, n, partition, partitions)
        sizes = columnar.encoded_sizes(kcol, vcol, _header_sizes(hlist))
        limit = max(1, max_batch_bytes - rec.HEADER_SIZE)
        # Kafka takes one batch per partition per Produce, and a batch must fit
        # max.message.bytes: round r carries chunk r of every partition. A large
        # call is cut into up to max_in_flight even requests (of at least
        # _PIPELINE_BYTES) so the broker appends one while the next is built.
        total = int(sizes.sum())
        pieces = min(max_in_flight, total // _PIPELINE_BYTES)
        if pieces > 1:
            limit = min(limit, -(-total // pieces))
        chunks: dict[int, list[npt.NDArray[np.int64] | slice]] = {
            p: _cut(idx, sizes, limit, n) for p, idx in groups.items()}

        own = window is None
        win = ProduceWindow(self, max_in_flight) if window is None else window
        part_of = np.empty(n, dtype=np.int64)
        for p, members in groups.items():
            part_of[slice(None) if members is None else members] = p

        def fill(placed: dict[int, npt.NDArray[np.int64] | slice]) -> Callable[[dict[int, int]], None]:
            def done(bases: dict[int, int]) -> None:
                for p, base in bases.items():
                    if base >= 0:
                        idx = placed[p]
                        count = idx.stop - idx.start if isinstance(idx, slice) else len(idx)
                        offsets[idx] = np.arange(base, base + count)
            return done

        try:
            for r in range(max(len(c) for c in chunks.values())):
                batches: dict[int, bytes] = {}
                placed: dict[int, npt.NDArray[np.int64] | slice] = {}
                for p, cs in chunks.items():
                    if r < len(cs):
                        idx = cs[r]
                        hs = None
                        if hlist is not None:
                            hs = hlist[idx] if isinstance(idx, slice) else [hlist[i] for i in idx]
                        batches[p] = columnar.build_batch_columns(
                            _take(kcol, idx), _take(vcol, idx), ts[idx], hs, compression=codec)
                        placed[p] = idx
                await win.send(topic, batches, acks, fill(placed))
            if own:
                await win.drain()
        finally:
            if own:
                await win.abandon()
        return Placement(part_of, offsets)

    async def _place(
        self, topic: str, keys: pa.BinaryArray, n: int, partition: int | None,
        partitions: npt.NDArray[np.int64] | None,
    ) -> dict[int, npt.NDArray[np.int64] | None]:
        """Record indexes per partition (None = every record, in order)."""
        if partition is not None:
            return {partition: None}
        meta = await self._topic_meta(topic)
        num = len(meta.partitions)
        parts = partitions_for_keys(keys, num) if keys.null_count < n else np.full(n, -1, np.int64)
        if partitions is not None:
            parts = np.where(partitions >= 0, partitions, parts)
        unplaced = parts < 0
        if bool(unplaced.any()):
            parts = np.where(unplaced, self._sticky.partition(topic, num), parts)
            self._sticky.batch_closed(topic, num)
        first = int(parts[0])
        if bool((parts == first).all()):
            return {first: None}
        present = np.flatnonzero(np.bincount(parts, minlength=num))  # 0..num-1: count, don't sort
        return {int(p): np.flatnonzero(parts == p) for p in present.tolist()}

    async def produce_batch(
        self, topic: str, partition: int, batch: bytes, *, acks: int = 1
    ) -> int:
        """Append one pre-built ``storage.records`` batch; returns its base offset (-1 for acks=0)."""
        sent = await self._send_produce(topic, {partition: batch}, acks)
        return (await self._wait_produce(topic, {partition: batch}, sent))[partition]

    async def _send_produce(
        self, topic: str, batches: Mapping[int, bytes], acks: int
    ) -> list[tuple[BrokerConnection, asyncio.Future[Any]]]:
        """Write one Produce request per leader for ``batches``; returns what to wait on."""
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        by_leader: dict[int, dict[int, bytes]] = {}
        for p, b in batches.items():
            by_leader.setdefault(await self._leader(topic, p), {})[p] = b
        version = self.api_version(PRODUCE)
        pending = []
        for leader, parts in by_leader.items():
            body = m.ProduceRequest(
                transactional_id=None,
                acks=acks,
                timeout_ms=int(self.request_timeout * 1000),
                topic_data=[
                    m.ProduceRequestTopicData(
                        name=topic,
                        partition_data=[m.ProduceRequestTopicDataPartitionData(index=p, records=b)
                                        for p, b in parts.items()],
                    )
                ],
            )
            conn = await self._conn_for(leader)
            pending.append((conn, conn.send(PRODUCE, version, body, expect_response=acks != 0)))
        for conn, _ in pending:
            await conn.drain()
        return pending

    async def _wait_produce(
        self, topic: str, batches: Mapping[int, bytes],
        pending: list[tuple[BrokerConnection, asyncio.Future[Any]]],
    ) -> dict[int, int]:
        """The base offset per partition of a request from _send_produce (-1 for acks=0)."""
        out = {p: -1 for p in batches}
        error: KafkaError | None = None
        for conn, fut in pending:
            try:
                resp = await conn.wait(fut)
            except KafkaError as e:
                error = error or e
                continue
            if resp is None:
                continue
            for t in resp["responses"]:
                for pr in t["partition_responses"]:
                    msg = pr.get("error_message")
                    errs = pr.get("record_errors") or []
                    if errs and not msg:
                        detail = "; ".join(
                            f"record {e['batch_index']}: {e.get('batch_index_error_message')}"
                            for e in errs[:5]
                        )
                        msg = detail
                    if pr["error_code"] in (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ):
                        self._topics.pop(topic, None)
                    try:
                        _raise_for(pr["error_code"], f"produce to {topic}-{pr['index']}", msg)
                    except KafkaError as e:
                        error = error or e
                        continue
                    out[pr["index"]] = pr["base_offset"]
        if error is not None:
            raise error
        return out

    # ------------------------------------------------------------ offsets

    async def list_offsets(
        self, query: Mapping[TopicPartition, int], isolation_level: int = 0
    ) -> dict[TopicPartition, tuple[int, int]]:
        """One ListOffsets round for many partitions: ``{tp: (offset, timestamp)}``.

        ``timestamp`` may be epoch ms or LATEST (-1), EARLIEST (-2), MAX_TIMESTAMP (-3).
        No record at or after the time → ``(-1, -1)``. A partition error raises KafkaError.
        """
        return await self._retry_read(lambda: self._list_offsets_once(query, isolation_level))

    async def _list_offsets_once(
        self, query: Mapping[TopicPartition, int], isolation_level: int
    ) -> dict[TopicPartition, tuple[int, int]]:
        if not query:
            return {}
        version = self.api_version(LIST_OFFSETS)
        for ts in set(query.values()):
            need = _SPECIAL_MIN_VERSION.get(ts, 0) if ts < 0 else 0
            if ts < 0 and ts not in _SPECIAL_MIN_VERSION:
                raise ValueError(f"timestamp {ts}: only epoch ms >= 0, -1, -2, -3 are valid")
            if version < need:
                raise KafkaError(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"ListOffsets timestamp {ts} needs v{need}, broker allows v{version}",
                )
        by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for tp, ts in query.items():
            leader = await self._leader(tp.topic, tp.partition)
            by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append((tp.partition, ts))
        pending = []
        for leader, topics in by_leader.items():
            body = m.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[
                    m.ListOffsetsRequestTopics(
                        name=t,
                        partitions=[
                            m.ListOffsetsRequestTopicsPartitions(
                                partition_index=p,
                                current_leader_epoch=-1,
                                timestamp=ts,
                                max_num_offsets=1,
                            )
                            for p, ts in parts
                        ],
                    )
                    for t, parts in topics.items()
                ],
                timeout_ms=int(self.request_timeout * 1000),
            )
            conn = await self._conn_for(leader)
            pending.append((conn, conn.send(LIST_OFFSETS, version, body)))
        for conn, _ in pending:
            await conn.drain()
        out: dict[TopicPartition, tuple[int, int]] = {}
        for conn, fut in pending:
            resp = await conn.wait(fut, poll=True)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    _raise_for(p["error_code"], f"list offsets of {tp.topic}-{tp.partition}")
                    out[tp] = (p["offset"], p["timestamp"])
        missing = [tp for tp in query if tp not in out]
        if missing:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no ListOffsets answer for {missing}")
        return out

    async def _per_partition(
        self, topic: str, ts: int, partitions: Iterable[int] | None, isolation_level: int = 0
    ) -> dict[int, tuple[int, int]]:
        parts = await self.partitions_for(topic) if partitions is None else list(partitions)
        res = await self.list_offsets({TopicPartition(topic, p): ts for p in parts},
                                      isolation_level)
        return {tp.partition: v for tp, v in sorted(res.items())}

    async def offsets_for_times(
        self, topic: str, ts_ms: int, partitions: Iterable[int] | None = None,
        isolation_level: int = 0,
    ) -> dict[int, tuple[int, int] | None]:
        """Per partition, the first ``(offset, timestamp)`` with timestamp >= ``ts_ms``, else None
        (under read_committed, isolation_level 1, also None at or past the last stable offset)."""
        if ts_ms < 0:
            raise ValueError(f"timestamp {ts_ms} is negative; use earliest()/latest() for specials")
        res = await self._per_partition(topic, ts_ms, partitions, isolation_level)
        return {p: (None if off < 0 else (off, ts)) for p, (off, ts) in res.items()}

    async def earliest(self, topic: str, partitions: Iterable[int] | None = None) -> dict[int, int]:
        """Per partition, the log start offset."""
        return {p: o for p, (o, _) in (await self._per_partition(topic, EARLIEST, partitions)).items()}

    async def latest(self, topic: str, partitions: Iterable[int] | None = None,
                     isolation_level: int = 0) -> dict[int, int]:
        """Per partition, the high watermark (the offset the next record will get); under
        read_committed (isolation_level 1) the last stable offset."""
        res = await self._per_partition(topic, LATEST, partitions, isolation_level)
        return {p: o for p, (o, _) in res.items()}

    async def max_timestamp(
        self, topic: str, partitions: Iterable[int] | None = None
    ) -> dict[int, tuple[int, int] | None]:
        """Per partition, ``(offset, timestamp)`` of the record with the largest timestamp, else None."""
        res = await self._per_partition(topic, MAX_TIMESTAMP, partitions)
        return {p: (None if off < 0 else (off, ts)) for p, (off, ts) in res.items()}

    # ------------------------------------------------------------ fetch

    async def fetch_raw(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = _DEFAULT_FETCH_BYTES,
        *,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        isolation_level: int = 0,
        timeout: float | None = None,
    ) -> FetchResult:
        """One Fetch for one partition: the raw batches from the one holding ``offset``.

        The bytes may start before ``offset`` and end with a torn batch (both are
        Kafka's Fetch semantics); :func:`storage.records.iter_batches` handles both.
        ``timeout`` defaults to ``request_timeout`` plus the long-poll wait.
        """
        return await self._retry_read(
            lambda: self._fetch_raw_once(
                topic, partition, offset, max_bytes, max_wait_ms, min_bytes, isolation_level, timeout
            )
        )

    async def _fetch_raw_once(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        max_wait_ms: int,
        min_bytes: int,
        isolation_level: int,
        timeout: float | None,
    ) -> FetchResult:
        version = self.api_version(FETCH)
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "topic_id": bytes(16),
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        leader = await self._leader(topic, partition)
        conn = await self._conn_for(leader)
        if timeout is None:
            timeout = self.request_timeout + max_wait_ms / 1000
        fut = conn.send(FETCH, version, body)
        await conn.drain()
        resp = await conn.wait(fut, timeout)
        _raise_for(resp.get("error_code", 0), f"fetch {topic}-{partition}")
        for t in resp["responses"]:
            for p in t["partitions"]:
                if p["partition_index"] != partition:
                    continue
                if p["error_code"] in (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ):
                    self._topics.pop(topic, None)
                _raise_for(p["error_code"], f"fetch {topic}-{partition} at offset {offset}")
                return FetchResult(
                    bytes(p["records"] or b""), p["high_watermark"], p["log_start_offset"],
                    p.get("last_stable_offset", -1),
                    tuple((a["producer_id"], a["first_offset"])
                          for a in p.get("aborted_transactions") or ()),
                )
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"fetch response lacks {topic}-{partition}"
        )

    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int = _DEFAULT_FETCH_BYTES
    ) -> tuple[list[Record], int]:
        """Decoded records at offsets >= ``offset`` from one Fetch, and the high watermark."""
        res = await self.fetch_raw(topic, partition, offset, max_bytes)
        out, _ = decode_records(res.records_bytes, topic, partition, offset, None)
        return out, res.high_watermark

    def consume_chunks(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None = None,
        *,
        follow: bool = False,
        max_bytes: int = _DEFAULT_FETCH_BYTES,
        poll_ms: int = 500,
        isolation_level: int = 0,
    ) -> AsyncIterator[list[Record]]:
        """Lists of records covering exactly [start, end) in order (see :meth:`consume`).

        While one chunk is decoded the Fetch for the next one is already on the
        wire (its offset is known from a shallow walk of the batch headers), so
        the broker's read and our decode overlap. Under read_committed
        (``isolation_level`` 1) reading stops at the last stable offset and records of
        aborted transactions are dropped, as Kafka's consumer drops them.
        """
        return self._chunks(topic, partition, start_offset, end_offset, follow, max_bytes,
                            poll_ms, isolation_level, decode_records)

    def consume_arrow(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None = None,
        *,
        follow: bool = False,
        max_bytes: int = _DEFAULT_FETCH_BYTES,
        poll_ms: int = 500,
        isolation_level: int = 0,
    ) -> AsyncIterator[pa.RecordBatch]:
        """Arrow record batches covering exactly [start, end) in order, one per Fetch.

        Columns: ``key``, ``value`` (binary, null where the record's is),
        ``offset`` (int64), ``timestamp`` (int64 epoch ms, LogAppendTime applied),
        ``timestamp_type`` (int32: 0 CreateTime, 1 LogAppendTime) and ``headers``
        (list<struct<key: string, value: binary>>). Decoding is vectorised
        (:func:`storage.columnar.decode_columns`): no Python object per record.
        The same rows as :meth:`consume_chunks`, in the same order (and the same
        ``isolation_level``).
        """
        return self._chunks(topic, partition, start_offset, end_offset, follow, max_bytes,
                            poll_ms, isolation_level, decode_arrow)

    async def _chunks(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None,
        follow: bool,
        max_bytes: int,
        poll_ms: int,
        isolation_level: int,
        decode: Callable[[bytes, str, int, int, int | None, Sequence[tuple[int, int]]],
                         tuple[Any, int]],
        budget: int | None = None,
    ) -> AsyncIterator[Any]:
        """``budget``: the bytes planned for the whole span (a planned range); each
        Fetch asks for no more than what is left of it (a Fetch still answers at least
        one whole batch), so a span across segments does not read past its end."""
        committed = isolation_level == 1
        offset = start_offset

        def sized(received: int = 0) -> int:
            if budget is None:
                return max_bytes
            return max(1, min(max_bytes, budget - received))

        received = 0
        size = sized()
        empty = 0
        wait = poll_ms if follow else 0
        ahead: tuple[int, asyncio.Future[FetchResult]] | None = None
        try:
            while end_offset is None or offset < end_offset:
                if ahead is not None and ahead[0] == offset:
                    res = await ahead[1]
                else:
                    res = await self.fetch_raw(topic, partition, offset, size, max_wait_ms=wait,
                                               isolation_level=isolation_level)
                ahead = None
                received += len(res.records_bytes)
                end_of_data = res.last_stable_offset if committed else res.high_watermark
                nxt = _next_offset(res.records_bytes, offset)
                if nxt > offset and (end_offset is None or nxt < end_offset) and (
                    follow or nxt < end_of_data
                ):
                    ahead = (
                        nxt,
                        asyncio.ensure_future(
                            self.fetch_raw(topic, partition, nxt, sized(received),
                                           max_wait_ms=wait, isolation_level=isolation_level)
                        ),
                    )
                records, next_offset = decode(
                    res.records_bytes, topic, partition, offset, end_offset, res.aborted
                )
                if records:
                    yield records
                if next_offset > offset:
                    offset = next_offset
                    size = sized(received)
                    empty = 0
                    if not follow and offset >= end_of_data:
                        return
                    continue
                if offset >= end_of_data:
                    if not follow:
                        return
                    continue  # the long poll already waited poll_ms
                if res.records_bytes:
                    # Only a torn batch came back: it is larger than the byte limit.
                    if size >= _MAX_FETCH_BYTES:
                        raise KafkaError(
                            ErrorCode.RECORD_LIST_TOO_LARGE,
                            f"{topic}-{partition}: batch at offset {offset} exceeds {size} bytes",
                        )
                    size *= 2
                    continue
                empty += 1
                if empty >= 3 and not follow:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_SERVER_ERROR,
                        f"{topic}-{partition}: fetch at {offset} returned no data below "
                        f"high watermark {res.high_watermark}",
                    )
        finally:
            if ahead is not None:
                ahead[1].cancel()
                with contextlib.suppress(asyncio.CancelledError, KafkaError):
                    await ahead[1]

    async def consume(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None = None,
        *,
        follow: bool = False,
    ) -> AsyncIterator[Record]:
        """Yield the records of ``[start_offset, end_offset)`` in offset order.

        Without ``follow``, reading stops at ``end_offset`` or at the high
        watermark, whichever comes first; with ``follow`` it long-polls for new
        records until ``end_offset`` (forever when None).
        """
        async for chunk in self.consume_chunks(topic, partition, start_offset, end_offset, follow=follow):
            for r in chunk:
                yield r

    async def time_range_offsets(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None
    ) -> dict[int, tuple[int, int]]:
        """Per partition, ``[first offset with ts >= start_ms, first offset with ts >= end_ms)``.

        A time with no record at or after it maps to the high watermark, so the
        range ends at the current end of the partition. The two ListOffsets (start,
        end) are pipelined; the high watermark is asked for afterwards, and only for
        partitions where a time had no record (a time before the end always has one).
        """
        if start_ms < 0 or end_ms < 0:
            raise ValueError("start_ms and end_ms must be epoch ms >= 0")
        parts = await self.partitions_for(topic) if partitions is None else list(partitions)
        tps = [TopicPartition(topic, p) for p in parts]
        starts, ends = await asyncio.gather(
            self.list_offsets({tp: start_ms for tp in tps}),
            self.list_offsets({tp: end_ms for tp in tps}),
        )
        open_ended = [tp for tp in tps if starts[tp][0] < 0 or ends[tp][0] < 0]
        latest = await self.list_offsets({tp: LATEST for tp in open_ended})
        out: dict[int, tuple[int, int]] = {}
        for tp in tps:
            s = starts[tp][0]
            e = ends[tp][0]
            s = latest[tp][0] if s < 0 else s
            e = latest[tp][0] if e < 0 else e
            out[tp.partition] = (s, max(s, e))
        return out

    async def plan_time_window(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None,
        *, isolation_level: int = 0,
    ) -> dict[int, TimeWindowPlan]:
        """Per partition, the event-time plan of ``[start_ms, end_ms)``: the offset
        ranges that may hold a record with start_ms <= timestamp < end_ms wherever it
        sits in the log (PlanTimeWindow, key 10000; Chronolog brokers only), plus the
        partition's offsets and disorder counts. Under read_committed
        (``isolation_level`` 1) ranges end at the last stable offset.

        Raises KafkaError UNSUPPORTED_VERSION against a broker without the API (Kafka).
        """
        if start_ms < 0 or end_ms < 0:
            raise ValueError("start_ms and end_ms must be epoch ms >= 0")
        self.api_version(PLAN_TIME_WINDOW)
        parts = await self.partitions_for(topic) if partitions is None else list(partitions)
        by_leader: dict[int, list[int]] = {}
        for p in parts:
            by_leader.setdefault(await self._leader(topic, p), []).append(p)

        async def ask(leader: int, ps: list[int]) -> Any:
            body = {"isolation_level": isolation_level, "start_timestamp": start_ms,
                    "end_timestamp": end_ms, "topics": [{"name": topic, "partitions": ps}]}
            return await self._retry_read(
                lambda: self._request(PLAN_TIME_WINDOW, body, leader))

        answers = await asyncio.gather(*(ask(n, ps) for n, ps in by_leader.items()))
        out: dict[int, TimeWindowPlan] = {}
        for resp in answers:
            for t in resp["topics"]:
                for p in t["partitions"]:
                    index = p["partition_index"]
                    if p["error_code"] in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        self._topics.pop(topic, None)
                    _raise_for(p["error_code"], f"plan time window of {topic}-{index}")
                    out[index] = TimeWindowPlan(
                        index,
                        tuple(PlannedRange(r["start_offset"], r["end_offset"], r["bytes"])
                              for r in p["ranges"]),
                        p["log_start_offset"], p["high_watermark"], p["last_stable_offset"],
                        DisorderStats(p["late_records"], p["max_lateness_ms"], p["records"]),
                    )
        return out

    async def count_time_windows(
        self, topic: str, boundaries: Sequence[int], partitions: Iterable[int] | None = None,
        *, isolation_level: int = 0,
    ) -> dict[int, list[int]]:
        """Per partition, exactly how many records have boundaries[k] <= timestamp <
        boundaries[k+1], for each k (CountTimeWindows, key 10001; Chronolog brokers
        only): every record wherever it sits in the log, counted by the broker, one
        request per leader. ``boundaries`` ascend, 2..10,000 of them. Under
        read_committed (``isolation_level`` 1) records past the last stable offset and
        those of aborted transactions are not counted.

        Raises KafkaError UNSUPPORTED_VERSION against a broker without the API (Kafka).
        """
        bounds = [int(b) for b in boundaries]
        if len(bounds) < 2 or any(a > b for a, b in zip(bounds, bounds[1:], strict=False)):
            raise ValueError("boundaries must ascend, at least two")
        self.api_version(COUNT_TIME_WINDOWS)
        parts = await self.partitions_for(topic) if partitions is None else list(partitions)
        by_leader: dict[int, list[int]] = {}
        for p in parts:
            by_leader.setdefault(await self._leader(topic, p), []).append(p)

        async def ask(leader: int, ps: list[int]) -> Any:
            body = {"isolation_level": isolation_level, "boundaries": bounds,
                    "topics": [{"name": topic, "partitions": ps}]}
            return await self._retry_read(
                lambda: self._request(COUNT_TIME_WINDOWS, body, leader))

        answers = await asyncio.gather(*(ask(n, ps) for n, ps in by_leader.items()))
        out: dict[int, list[int]] = {}
        for resp in answers:
            for t in resp["topics"]:
                for p in t["partitions"]:
                    index = p["partition_index"]
                    if p["error_code"] in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        self._topics.pop(topic, None)
                    _raise_for(p["error_code"], f"count time windows of {topic}-{index}")
                    out[index] = list(p["counts"])
        return out

    async def disorder_stats(
        self, topic: str, partitions: Iterable[int] | None = None
    ) -> dict[int, DisorderStats]:
        """Per partition, how out of order its timestamps arrived: records below the
        largest timestamp before them, the largest such gap, records counted (an empty
        PlanTimeWindow: no range is computed). ``late_records == 0`` means positional
        and event-time windows agree on that partition."""
        plans = await self.plan_time_window(topic, 0, 0, partitions)
        return {p: plan.disorder for p, plan in plans.items()}

    async def read_time_range(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None,
        *, event_time: bool = False, isolation_level: int = 0,
    ) -> AsyncIterator[Record]:
        """The records of a time window, partition by partition (ascending), each in
        offset order.

        ``event_time=False`` (the default): positional, Kafka's offsetsForTimes replay
        meaning — ``[first offset with ts >= start_ms, first offset with ts >= end_ms)``.
        Under CreateTime with out-of-order timestamps that range may hold records
        outside the window and miss records inside it; it is what a Kafka consumer
        seeking by time replays, so it stays the default (existing callers, the CLI's
        and Spark's offsets, and Kafka brokers, which have no event-time plan).

        ``event_time=True``: exactly the records with start_ms <= timestamp < end_ms,
        wherever they sit, fetching only the ranges :meth:`plan_time_window` returns
        (Chronolog brokers only). Under read_committed (``isolation_level`` 1) records
        of aborted transactions are left out and reading stops at the last stable offset.
        """
        if not event_time:
            ranges = await self.time_range_offsets(topic, start_ms, end_ms, partitions)
            for p, (s, e) in sorted(ranges.items()):
                if s < e:
                    async for chunk in self.consume_chunks(topic, p, s, e,
                                                           isolation_level=isolation_level):
                        for r in chunk:
                            yield r
            return
        plans = await self.plan_time_window(topic, start_ms, end_ms, partitions,
                                            isolation_level=isolation_level)
        for p, plan in sorted(plans.items()):
            for rng in plan.ranges:
                async for chunk in self.read_planned_range(topic, p, rng, start_ms, end_ms,
                                                           isolation_level=isolation_level):
                    for r in chunk:
                        yield r

    async def read_time_range_arrow(
        self, topic: str, start_ms: int, end_ms: int, partitions: Iterable[int] | None = None,
        *, event_time: bool = False, isolation_level: int = 0,
    ) -> AsyncIterator[tuple[int, pa.RecordBatch]]:
        """:meth:`read_time_range` as (partition, Arrow record batch) pairs, columns as
        :meth:`consume_arrow`'s; the same rows in the same order, the same two meanings
        (``event_time``), decoded column-wise. Batches left empty by the window's
        filter are not yielded."""
        if not event_time:
            ranges = await self.time_range_offsets(topic, start_ms, end_ms, partitions)
            for p, (s, e) in sorted(ranges.items()):
                if s < e:
                    async for batch in self.consume_arrow(topic, p, s, e,
                                                          isolation_level=isolation_level):
                        yield p, batch
            return
        plans = await self.plan_time_window(topic, start_ms, end_ms, partitions,
                                            isolation_level=isolation_level)
        for p, plan in sorted(plans.items()):
            for rng in plan.ranges:
                async for batch in self.read_planned_range_arrow(
                        topic, p, rng, start_ms, end_ms, isolation_level=isolation_level):
                    yield p, batch

    async def read_planned_range(
        self, topic: str, partition: int, rng: PlannedRange, start_ms: int, end_ms: int,
        *, isolation_level: int = 0,
    ) -> AsyncIterator[list[Record]]:
        """The records of one planned range (:meth:`plan_time_window`) with start_ms <=
        timestamp < end_ms, in offset order, one list per Fetch (lists left empty by the
        window are not yielded). Each Fetch asks for what is left of the range's bytes,
        so the broker sends little beyond it. A plan's ranges can be read in parallel
        (e.g. one Spark task each); together they give exactly the event-time window."""
        async for chunk in self._planned_chunks(topic, partition, rng, isolation_level,
                                                decode_records):
            kept = [r for r in chunk if start_ms <= r.timestamp < end_ms]
            if kept:
                yield kept

    async def read_planned_range_arrow(
        self, topic: str, partition: int, rng: PlannedRange, start_ms: int, end_ms: int,
        *, isolation_level: int = 0,
    ) -> AsyncIterator[pa.RecordBatch]:
        """:meth:`read_planned_range` as Arrow record batches (:meth:`consume_arrow`'s
        columns), filtered column-wise."""
        import pyarrow.compute as pc

        async for batch in self._planned_chunks(topic, partition, rng, isolation_level,
                                                decode_arrow):
            ts = batch.column("timestamp")
            kept = batch.filter(pc.and_(pc.greater_equal(ts, start_ms), pc.less(ts, end_ms)))
            if kept.num_rows:
                yield kept

    def _planned_chunks(self, topic: str, partition: int, rng: PlannedRange,
                        isolation_level: int, decode: Any) -> AsyncIterator[Any]:
        return self._chunks(topic, partition, rng.start_offset, rng.end_offset, False,
                            _DEFAULT_FETCH_BYTES, 500, isolation_level, decode, budget=rng.bytes)


def _next_offset(buf: bytes, start: int) -> int:
    """The offset after the last whole batch in ``buf`` (``start`` if there is none)."""
    nxt = start
    try:
        for _, h in rec.iter_batches(buf):
            nxt = max(nxt, h.base_offset + h.last_offset_delta + 1)
    except StorageError:
        return start  # decode_records reports the corruption
    return nxt


def decode_records(
    buf: bytes, topic: str, partition: int, start: int, end: int | None,
    aborted: Sequence[tuple[int, int]] = (),
) -> tuple[list[Record], int]:
    """Decode whole batches in ``buf``: records in ``[start, end)`` and the next fetch offset.

    Control batches are skipped (they are markers, not data) but still advance
    the next offset, as do records dropped by compaction. Every batch read is
    CRC-checked (as the Java consumer's check.crcs does), so corruption on disk
    or on the wire is an error, never silently different data. ``aborted`` (a
    read_committed Fetch's AbortedTransactions) drops the aborted transactions' batches.
    """
    try:
        return _decode_records(buf, topic, partition, start, end, aborted)
    except StorageError as e:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"{topic}-{partition}: fetched data does not decode: {e}"
        ) from e


def arrow_schema() -> pa.Schema:
    """The columns of :meth:`Client.consume_arrow`'s batches."""
    return pa.schema([
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),
        pa.field("timestamp_type", pa.int32()),
        pa.field("headers", columnar.HEADERS_TYPE),
    ])


def decode_arrow(
    buf: bytes, topic: str, partition: int, start: int, end: int | None,
    aborted: Sequence[tuple[int, int]] = (),
) -> tuple[pa.RecordBatch | None, int]:
    """decode_records' rows as one Arrow batch (None when no record is in range)."""
    stop = (1 << 63) - 1 if end is None else end
    whole = _next_offset(buf, start) if aborted else start
    if aborted:  # read_committed: the aborted transactions' batches are dropped first
        buf = _without_aborted(buf, aborted)
    try:
        res = columnar.decode_columns(buf, start, stop, f"{topic}-{partition}")
    except StorageError as e:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"{topic}-{partition}: fetched data does not decode: {e}"
        ) from e
    nxt = max(res.next_offset, whole)  # past dropped batches too
    nxt = nxt if end is None else min(nxt, end)
    if res.columns is None:
        return None, nxt
    return pa.RecordBatch.from_arrays(list(res.columns.values()), schema=arrow_schema()), nxt


def _without_aborted(buf: bytes, aborted: Sequence[tuple[int, int]]) -> bytes:
    """``buf`` without the batches of aborted transactions (Kafka's CompletedFetch rule, as
    _decode_records applies it)."""
    pending = sorted(aborted, key=lambda a: a[1])
    skipping: set[int] = set()
    kept: list[bytes] = []
    for pos, h in rec.iter_batches(buf):
        last = h.base_offset + h.last_offset_delta
        while pending and pending[0][1] <= last:
            skipping.add(pending.pop(0)[0])
        if h.attributes & rec.CONTROL_MASK:
            if rec.control_type(buf, pos) == rec.ABORT_MARKER:
                skipping.discard(h.producer_id)
        elif h.attributes & rec.TRANSACTIONAL_MASK and h.producer_id in skipping:
            continue
        kept.append(buf[pos:pos + h.size])
    return b"".join(kept)


def _decode_records(
    buf: bytes, topic: str, partition: int, start: int, end: int | None,
    aborted: Sequence[tuple[int, int]] = (),
) -> tuple[list[Record], int]:
    out: list[Record] = []
    next_offset = start
    append = out.append
    pending = sorted(aborted, key=lambda a: a[1])
    skipping: set[int] = set()
    for pos, h in rec.iter_batches(buf):
        # CRC first: lastOffsetDelta is under the CRC, and a flipped bit in it must not
        # make a damaged batch look like one to skip.
        if not rec.crc_ok(buf, pos, h):
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"{topic}-{partition}: batch at offset {h.base_offset} fails its CRC",
            )
        last = h.base_offset + h.last_offset_delta
        if pending or skipping:  # Kafka's CompletedFetch: only with aborted transactions
            while pending and pending[0][1] <= last:
                skipping.add(pending.pop(0)[0])
            if h.attributes & rec.CONTROL_MASK:
                if rec.control_type(buf, pos) == rec.ABORT_MARKER:
                    skipping.discard(h.producer_id)
            elif h.attributes & rec.TRANSACTIONAL_MASK and h.producer_id in skipping:
                next_offset = max(next_offset, last + 1)
                continue
        if last < start:
            continue
        if not h.attributes & rec.CONTROL_MASK:
            for r in rec.decode_batch(buf, pos):
                o = r.offset
                if o < start:
                    continue
                if end is not None and o >= end:
                    return out, end
                append(Record(o, r.timestamp, r.key, r.value, r.headers, topic, partition))
        next_offset = max(next_offset, last + 1)
        if end is not None and next_offset >= end:
            return out, end
    return out, next_offset

