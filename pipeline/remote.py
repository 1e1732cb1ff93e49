"""Spark reads the tier straight from the bucket: ``.option("remoteStorage", URL)`` (#26).

The planner (driver side) reads each partition's manifest (storage/remote/manifest.py)
and cuts every offset range the read needs into the part the tier holds, read by
tasks straight from the bucket, and the rest (above the highest uploaded offset, or
wherever no finished segment covers it), read from the broker as without the option.
A remote task reads byte ranges of a partition's consecutive segments (up to
TASK_BYTES) with ranged GETs of their ``.log`` objects, one prefetched while the last is
decoded, and decodes them with the same decoder the broker path uses (pipeline/decode.py).

Invariants:
- a remote task yields exactly the records the broker path yields for its offsets:
  the offset range (or the event-time window) is the same, control batches are never
  rows, and under read_committed the batches of aborted transactions are dropped by
  Kafka's consumer rule from the aborted list the read needs (below);
- only COPY_SEGMENT_FINISHED segments are read, and only offsets in
  [manifest log start, next_offset); offsets no finished segment covers are read from
  the broker, so a segment being deleted or not yet copied costs speed, never rows;
- byte ranges start and end on batch boundaries: the zone map's blocks (the uploaded
  ``.zonemap``) give the position of the block holding an offset; a segment without a
  readable zone map is read from its start (the decoder skips batches below the range);
- read_committed: the aborted list of a remote read is every ``.txnindex`` entry of the
  tier whose ABORT marker is at or after the read's first batch, plus the aborted
  transactions whose marker the tier does not hold yet (their data was uploaded, the
  marker was not): the planner asks the broker for those with one Fetch at
  READ_COMMITTED from the last uploaded segment's base offset (Kafka's collectAbortedTxns
  answers every transaction whose marker is at or after the fetch offset). Remote data
  is wholly below the last stable offset (the uploader's rule), so no transaction of it
  is still open;
- event time: a segment whose [min_timestamp, max_timestamp] misses the window is not
  read; inside one, only the zone-map blocks that may hold a match (storage.planner's
  plan_blocks), and the task keeps exactly the rows with start <= timestamp < end.

Options (batch reads), named after the broker's ``rsm.config.*`` with ``remoteStorage``
in place of ``rsm.config.url`` and ``remoteStorage.`` in place of ``rsm.config.``:
``remoteStorage`` (``file:///dir`` or ``s3://bucket/prefix``), ``remoteStorage.s3.endpoint``,
``remoteStorage.s3.region``, ``remoteStorage.s3.access.key.id``,
``remoteStorage.s3.secret.access.key`` (unset ones from the AWS environment variables).
"""

from __future__ import annotations

import bisect
import concurrent.futures
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import pyarrow as pa

import storage.remote.manifest as mf
from client import SyncClient, TopicPartition
from pipeline.decode import decode_fetch
from pipeline.fetcher import DataLossError, in_window
from pipeline.offsets import OffsetRange
from storage import planner, txnindex
from storage.records import iter_batches
from storage.remote.store import ObjectStore, RemoteObjectNotFound
from storage.zonemap import ZoneMap

__all__ = [
    "RemoteSpan",
    "RemoteTask",
    "RemoteStats",
    "Tier",
    "plan_positional",
    "plan_event_time",
    "read_task",
]

NO_MARKER = (1 << 63) - 1
"""The marker offset of an aborted transaction whose marker the tier does not hold yet."""

_MIN_CHUNK = 64 * 1024
PLANNER_GETS = 16
"""Concurrent GETs of the planner (zone maps, transaction indexes)."""


TASK_BYTES = 128 * 1024 * 1024
"""Consecutive small segments of one partition share a task up to this many bytes (a
Spark task costs ~0.1 s to schedule; a Kafka segment is 1 GiB by default, one task)."""


class RemoteSpan(NamedTuple):
    """Offsets [start, end) of one segment, in its ``.log`` object's bytes [pos_lo, pos_hi)."""

    key: str
    start: int
    end: int
    pos_lo: int
    pos_hi: int


class RemoteTask(NamedTuple):
    """One Spark task reading spans of remote segments of one partition, in offset order:
    everything it needs, plain data."""

    topic: str
    partition: int
    spans: tuple[RemoteSpan, ...]
    window: tuple[int, int] | None  # event time: keep start <= timestamp < end
    aborted: tuple[tuple[int, int, int], ...]  # (producer id, first offset, marker offset)

    @property
    def records(self) -> int:
        return sum(s.end - s.start for s in self.spans)


@dataclass
class RemoteStats:
    """What a remote read cost: GETs and bytes read from the bucket, rows yielded."""

    gets: int = 0
    bytes_read: int = 0
    rows: int = 0
    spans: list[RemoteSpan] = field(default_factory=list)


def store_options(remote: Sequence[tuple[str, str]]) -> tuple[str, dict[str, str]]:
    """(url, the rsm-style options without prefix) of a read's ``remoteStorage*`` options."""
    opts = dict(remote)
    return opts["url"], opts


def open_store(remote: Sequence[tuple[str, str]]) -> ObjectStore:
    url, opts = store_options(remote)
    return ObjectStore(url, opts)


@dataclass
class _Partition:
    """One partition as the tier holds it (its manifest's finished segments)."""

    log_start: int
    segments: list[mf.RemoteSegment]

    def pieces(self, start: int, end: int) -> list[tuple[int, int, mf.RemoteSegment | None]]:
        """[start, end) cut into (lo, hi, segment holding it, or None: read from the broker)."""
        out: list[tuple[int, int, mf.RemoteSegment | None]] = []
        at = start
        for seg in self.segments:
            lo = max(seg.base_offset, self.log_start, at)
            hi = min(seg.next_offset, end)
            if lo >= hi:
                continue
            if lo > at:
                out.append((at, lo, None))
            out.append((lo, hi, seg))
            at = hi
        if at < end:
            out.append((at, end, None))
        return out

    @property
    def highest(self) -> int:
        return max((s.end_offset for s in self.segments), default=-1)


class Tier:
    """The planner's view of the bucket: manifests, zone maps and transaction indexes,
    each read once per planning."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._parts: dict[tuple[str, int], _Partition] = {}
        self._zones: dict[str, ZoneMap | None] = {}

    def partition(self, topic: str, partition: int) -> _Partition:
        got = self._parts.get((topic, partition))
        if got is None:
            try:
                m = mf.decode_partition(self.store.get(mf.manifest_key(topic, partition)))
                segs = sorted(m.finished(), key=lambda s: s.base_offset)
                got = _Partition(m.log_start_offset, segs)
            except RemoteObjectNotFound:
                got = _Partition(0, [])  # nothing tiered: every offset from the broker
            self._parts[(topic, partition)] = got
        return got

    def _get_all(self, keys: Sequence[str]) -> list[bytes | None]:
        """The objects ``keys`` (None for a missing one), PLANNER_GETS at a time: planning
        pays one round trip per batch of keys, not per key."""
        def get(key: str) -> bytes | None:
            try:
                return self.store.get(key)
            except RemoteObjectNotFound:
                return None
        if len(keys) <= 1:
            return [get(k) for k in keys]
        with concurrent.futures.ThreadPoolExecutor(min(PLANNER_GETS, len(keys))) as pool:
            return list(pool.map(get, keys))

    def load_zone_maps(self, topic: str, partition: int, segs: Sequence[mf.RemoteSegment]
                       ) -> None:
        """Fetch the zone maps of ``segs`` not fetched yet, concurrently."""
        todo = [(mf.segment_key(topic, partition, s, ".zonemap"), s) for s in segs]
        todo = [(k, s) for k, s in todo if k not in self._zones]
        for (key, seg), data in zip(todo, self._get_all([k for k, _ in todo]), strict=True):
            zm = None if data is None else ZoneMap.decode(data, seg.base_offset,
                                                          _zone_interval(data))
            if zm is not None:
                zm.sync()
                if zm.covered != seg.size_bytes or not len(zm):
                    zm = None
            self._zones[key] = zm

    def zone_map(self, topic: str, partition: int, seg: mf.RemoteSegment) -> ZoneMap | None:
        """The segment's uploaded zone map, None when missing, damaged or not of this .log."""
        self.load_zone_maps(topic, partition, [seg])
        return self._zones[mf.segment_key(topic, partition, seg, ".zonemap")]

    def aborted(self, topic: str, partition: int) -> list[txnindex.TxnIndexEntry]:
        """Every uploaded ``.txnindex`` entry of the partition, in marker order."""
        segs = [s for s in self.partition(topic, partition).segments if not s.txn_index_empty]
        out: list[txnindex.TxnIndexEntry] = []
        for seg, data in zip(segs, self._get_all(
                [mf.segment_key(topic, partition, s, ".txnindex") for s in segs]), strict=True):
            if data is None:
                raise DataLossError(
                    f"{topic}-{partition}: the manifest says segment {seg.base_offset} has "
                    f"aborted transactions but {self.store.url} has no .txnindex for it; a "
                    "read_committed read cannot tell them apart (read without remoteStorage)")
            out += txnindex.decode(data)
        return out


def _zone_interval(data: bytes) -> int:
    """The index interval a zone map sidecar was built with (its header's fourth field:
    magic, version, base offset, interval), which ZoneMap.decode checks against."""
    return int.from_bytes(data[14:22], "little", signed=True) if len(data) >= 22 else -1


def _positions(zm: ZoneMap | None, seg: mf.RemoteSegment, start: int, end: int
               ) -> tuple[int, int]:
    """The byte range of whole blocks holding offsets [start, end) of ``seg``."""
    if zm is None:
        return 0, seg.size_bytes
    first = zm.first
    i = max(bisect.bisect_right(first, start) - 1, 0)
    j = bisect.bisect_left(first, end)
    return zm.pos[i], (zm.pos[j] if j < len(first) else zm.covered)


def _aborted_list(tier: Tier, client: SyncClient, topic: str, partition: int
                  ) -> tuple[tuple[int, int, int], ...]:
    """(producer id, first offset, marker offset) of every aborted transaction a
    read_committed read of the tier's offsets may meet (module docstring)."""
    part = tier.partition(topic, partition)
    if not part.segments:
        return ()
    entries = tier.aborted(topic, partition)
    known = {(e.producer_id, e.first_offset) for e in entries}
    out = [(e.producer_id, e.first_offset, e.last_offset) for e in entries]
    tp = TopicPartition(topic, partition)
    last = part.segments[-1]
    earliest = client.list_offsets({tp: -2})[tp][0]
    at = max(last.base_offset, earliest)
    if at <= part.highest:
        answer = client.fetch_raw(topic, partition, at, 1, isolation_level=1)
        out += [(pid, first, NO_MARKER) for pid, first in answer.aborted
                if (pid, first) not in known and first <= part.highest]
    return tuple(sorted(out, key=lambda a: a[1]))


def _relevant(aborted: Sequence[tuple[int, int, int]], start: int, end: int
              ) -> tuple[tuple[int, int, int], ...]:
    return tuple(a for a in aborted if a[2] >= start and a[1] < end)


def plan_positional(
    tier: Tier, client: SyncClient, ranges: Sequence[OffsetRange], isolation_level: int,
) -> tuple[list[RemoteTask], list[OffsetRange]]:
    """Cut offset ranges (already split into Spark's pieces) into remote tasks (the
    segments of one piece, up to TASK_BYTES per task) and the ranges left for the broker."""
    remote: list[RemoteTask] = []
    broker: list[OffsetRange] = []
    aborted: dict[tuple[str, int], tuple[tuple[int, int, int], ...]] = {}
    for r in ranges:
        part = tier.partition(r.topic, r.partition)
        spans: list[RemoteSpan] = []
        for lo, hi, seg in part.pieces(r.start, r.end):
            if seg is None:
                broker.append(OffsetRange(r.topic, r.partition, lo, hi))
                continue
            whole = lo <= seg.base_offset and hi >= seg.next_offset
            zm = None if whole else tier.zone_map(r.topic, r.partition, seg)
            pos = (0, seg.size_bytes) if whole else _positions(zm, seg, lo, hi)
            spans.append(RemoteSpan(mf.segment_key(r.topic, r.partition, seg, ".log"),
                                    lo, hi, *pos))
        ab: tuple[tuple[int, int, int], ...] = ()
        if isolation_level and spans:
            tp = (r.topic, r.partition)
            if tp not in aborted:
                aborted[tp] = _aborted_list(tier, client, r.topic, r.partition)
            ab = aborted[tp]
        remote += _tasks(r.topic, r.partition, spans, None, ab)
    return remote, broker


def _tasks(topic: str, partition: int, spans: Sequence[RemoteSpan],
           window: tuple[int, int] | None, aborted: Sequence[tuple[int, int, int]]
           ) -> list[RemoteTask]:
    """Consecutive spans of one partition grouped into tasks of up to TASK_BYTES."""
    out: list[RemoteTask] = []
    group: list[RemoteSpan] = []
    size = 0
    for span in [*spans, None]:
        n = 0 if span is None else span.pos_hi - span.pos_lo
        if group and (span is None or size + n > TASK_BYTES):
            out.append(RemoteTask(topic, partition, tuple(group), window,
                                  _relevant(aborted, group[0].start, group[-1].end)))
            group, size = [], 0
        if span is not None:
            group.append(span)
            size += n
    return out


def plan_event_time(
    tier: Tier, client: SyncClient, parts: Mapping[str, list[int]], window: tuple[int, int],
    broker_plan: Sequence[OffsetRange], isolation_level: int,
) -> tuple[list[RemoteTask], list[OffsetRange]]:
    """The remote tasks of an event-time window (runs of segments with planned blocks) and
    the broker's plan (``broker_plan``, PlanTimeWindow's ranges) cut to the offsets the
    tier does not cover."""
    t1, t2 = window
    tps = [TopicPartition(t, p) for t, ps in sorted(parts.items()) for p in sorted(ps)]
    earliest = {tp: o for tp, (o, _) in client.list_offsets({tp: -2 for tp in tps}).items()} \
        if tps else {}
    remote: list[RemoteTask] = []
    for tp in tps:
        part = tier.partition(tp.topic, tp.partition)
        if not part.segments:
            continue
        start = max(earliest[tp], part.log_start)
        pieces = [(lo, hi, s) for lo, hi, s in part.pieces(start, part.segments[-1].next_offset)
                  if s is not None and s.max_timestamp >= t1 and s.min_timestamp < t2]
        tier.load_zone_maps(tp.topic, tp.partition, [s for _, _, s in pieces])
        spans: list[RemoteSpan] = []
        for lo, hi, seg in pieces:
            zm = tier.zone_map(tp.topic, tp.partition, seg)
            if zm is None:
                planned = [planner.PlannedRange(lo, hi, seg.size_bytes)]
            else:
                planned = planner.plan_blocks([zm], t1, t2, lo, hi)
            key = mf.segment_key(tp.topic, tp.partition, seg, ".log")
            spans += [RemoteSpan(key, p.start_offset, p.end_offset,
                                 *_positions(zm, seg, p.start_offset, p.end_offset))
                      for p in planned]
        ab = _aborted_list(tier, client, tp.topic, tp.partition) \
            if isolation_level and spans else ()
        remote += _tasks(tp.topic, tp.partition, spans, window, ab)
    broker: list[OffsetRange] = []
    for r in broker_plan:
        for lo, hi, held in tier.partition(r.topic, r.partition).pieces(r.start, r.end):
            if held is None:
                share = -1 if r.bytes < 0 else max(1, r.bytes * (hi - lo) // max(r.size, 1))
                broker.append(OffsetRange(r.topic, r.partition, lo, hi, share))
    return remote, broker


def read_task(
    remote: Sequence[tuple[str, str]], task: RemoteTask, *, chunk_bytes: int,
    fail_on_data_loss: bool = True, stats: RemoteStats | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the Arrow batches of one remote task, in offset order (module docstring).

    A segment deleted from the bucket after planning (remote retention, DeleteRecords)
    is data loss, as a range the broker no longer holds is: DataLossError, or with
    ``fail_on_data_loss`` off its offsets are skipped (Spark's failOnDataLoss)."""
    st = stats if stats is not None else RemoteStats()
    store = open_store(remote)
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="chronolog-remote")
    try:
        for span in task.spans:
            st.spans.append(span)
            try:
                for batch in _read_span(store, pool, task, span, max(chunk_bytes, _MIN_CHUNK),
                                        st):
                    if task.window is not None:
                        batch = in_window(batch, *task.window)
                        if batch.num_rows == 0:
                            continue
                    st.rows += batch.num_rows
                    yield batch
            except RemoteObjectNotFound:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{task.topic}-{task.partition}: offsets {span.start}..{span.end - 1} "
                        f"were deleted from {store.url} ({span.key}) after the read was "
                        "planned; set failOnDataLoss=false to skip them") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _read_span(store: ObjectStore, pool: concurrent.futures.ThreadPoolExecutor,
               task: RemoteTask, span: RemoteSpan, chunk: int, st: RemoteStats
               ) -> Iterator[pa.RecordBatch]:
    """Ranged GETs over [pos_lo, pos_hi), cut after the last whole batch of each answer;
    the next GET is in flight while one answer is decoded."""
    def get(pos: int, size: int) -> concurrent.futures.Future[bytes]:
        return pool.submit(store.get_range, span.key, pos, min(pos + size, span.pos_hi))

    pos = span.pos_lo
    pending = get(pos, chunk)
    while True:
        buf = pending.result()
        st.gets += 1
        st.bytes_read += len(buf)
        consumed = 0
        first = next_offset = -1
        for at, h in iter_batches(buf):
            if first < 0:
                first = h.base_offset
            consumed = at + h.size
            next_offset = h.next_offset
        if consumed == 0:
            if pos + len(buf) >= span.pos_hi:
                raise DataLossError(
                    f"{task.topic}-{task.partition}: {store.url} {span.key} holds no whole "
                    f"batch at bytes {pos}..{span.pos_hi} (offsets {span.start}..{span.end})")
            chunk *= 2  # one batch larger than a chunk
            pending = get(pos, chunk)
            continue
        done = pos + consumed >= span.pos_hi or next_offset >= span.end
        if not done:
            pending = get(pos + consumed, chunk)
        data = buf if consumed == len(buf) else buf[:consumed]
        decoded = decode_fetch(data, task.topic, task.partition, span.start, span.end,
                               [(a[0], a[1]) for a in task.aborted if a[2] >= first])
        if decoded.batch is not None:
            yield decoded.batch
        if done:
            return
        pos += consumed
