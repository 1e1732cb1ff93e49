"""What the asyncio client's parts share: API keys and versions, the record and
result types, produce helpers and the record decoders (re-exported by ``client.aio``)."""

from __future__ import annotations

import collections
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import msgspec

import protocol.describe_configs as dc
from client._lazy import LazyModule
from protocol.errors import ErrorCode, KafkaError
from storage import records as rec
from storage.errors import StorageError
from storage.planner import DisorderStats, PlannedRange

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

    from client.parts.produce import ProduceMixin
    from storage import columnar
else:  # imported on first use (see client._lazy)
    np = LazyModule("numpy")
    pa = LazyModule("pyarrow")
    columnar = LazyModule("storage.columnar")

log = logging.getLogger("client.aio")
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
#: KIP-405 / KIP-1005: the first offset on the broker's local disk, and the last one
#: copied to its remote tier (-1 when none).
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
_SPECIAL_MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8,
                        LATEST_TIERED: 9}

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

    def __init__(self, client: ProduceMixin, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> None:
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
        sent = await self.client.send_produce(topic, batches, acks)
        self._pending.append((topic, batches, sent, on_answer))

    async def _finish_oldest(self) -> None:
        topic, batches, sent, on_answer = self._pending.popleft()
        on_answer(await self.client.wait_produce(topic, batches, sent))

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


class _AbortedFilter:
    """Kafka's CompletedFetch rule, batch by batch in offset order: a transactional batch
    of a producer is skipped from the first offset of one of its aborted transactions (a
    Fetch answer's AbortedTransactions: producer id, first offset) until that producer's
    ABORT marker."""

    __slots__ = ("pending", "skipping")

    def __init__(self, aborted: Sequence[tuple[int, int]]) -> None:
        self.pending = sorted(aborted, key=lambda a: a[1])
        self.skipping: set[int] = set()

    def skips(self, buf: bytes, pos: int, h: rec.BatchHeader, last: int) -> bool:
        """Whether the batch at ``pos`` (header ``h``, last offset ``last``) is left out."""
        pending, skipping = self.pending, self.skipping
        while pending and pending[0][1] <= last:
            skipping.add(pending.pop(0)[0])
        if h.attributes & rec.CONTROL_MASK:
            if rec.control_type(buf, pos) == rec.ABORT_MARKER:
                skipping.discard(h.producer_id)
            return False
        return bool(h.attributes & rec.TRANSACTIONAL_MASK and h.producer_id in skipping)


def _without_aborted(buf: bytes, aborted: Sequence[tuple[int, int]]) -> bytes:
    """``buf`` without the batches of aborted transactions (:class:`_AbortedFilter`, as
    _decode_records applies it)."""
    txn = _AbortedFilter(aborted)
    kept: list[bytes] = []
    for pos, h in rec.iter_batches(buf):
        if not txn.skips(buf, pos, h, h.base_offset + h.last_offset_delta):
            kept.append(buf[pos:pos + h.size])
    return b"".join(kept)


def _decode_records(
    buf: bytes, topic: str, partition: int, start: int, end: int | None,
    aborted: Sequence[tuple[int, int]] = (),
) -> tuple[list[Record], int]:
    out: list[Record] = []
    next_offset = start
    append = out.append
    txn = _AbortedFilter(aborted) if aborted else None
    for pos, h in rec.iter_batches(buf):
        # CRC first: lastOffsetDelta is under the CRC, and a flipped bit in it must not
        # make a damaged batch look like one to skip.
        if not rec.crc_ok(buf, pos, h):
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"{topic}-{partition}: batch at offset {h.base_offset} fails its CRC",
            )
        last = h.base_offset + h.last_offset_delta
        # Kafka's CompletedFetch: only while aborted transactions are pending or open
        if txn is not None and (txn.pending or txn.skipping) and txn.skips(buf, pos, h, last):
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

