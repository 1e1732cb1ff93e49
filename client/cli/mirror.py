"""``chronolog mirror``: copy topics between two Kafka-protocol brokers, resumably.

Works against any Kafka-protocol broker on either side (Chronolog or Apache
Kafka): it only uses Metadata, CreateTopics, ListOffsets, Fetch and Produce.

Invariants:
- Keys, values, headers and CreateTime timestamps are preserved record for
  record, and each source partition is copied into the same partition number
  of the target, in offset order. Offsets are assigned by the target.
  LogAppendTime source batches are re-produced as CreateTime carrying the
  time the source assigned, so the target answers time lookups the same way.
  Control batches (transaction markers) are not copied: clients may not
  produce them; aborted transactional data is copied like any other.
- A plain CreateTime batch that lies wholly at or after the next offset to
  copy is forwarded byte for byte (codec and CRC included) with only its base
  offset reset to 0; any other batch is rebuilt from its decoded records with
  the source batch's codec.
- The state file records, per partition, the next source offset to copy and
  the target's end offset after the last acknowledged append, and is written
  (atomically: temp file, fsync, rename) only for appends the target has
  acknowledged with acks=all. After a crash between an acknowledged append and
  the next state write, the restart compares the target's end offset with the
  recorded one, checks that the surplus records on the target are exactly the
  next source records (key, value, headers, timestamp), and skips them: a
  resumed mirror leaves no gaps and no duplicates, provided nothing else
  writes to the mirrored target partitions.
- Start position without state: ``--since TIME`` resolves per partition
  through ListOffsets (offsets_for_times) on the source; otherwise the log
  start. If retention removed the next offset on the source meanwhile, the
  mirror continues at the source's log start and logs the gap it could not copy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from client.aio import Client
from client.cli._common import client_security
from client.timeparse import TimeParseError, parse_time
from protocol.errors import ErrorCode, KafkaError
from storage.records import (
    BatchHeader,
    Record,
    build_batch,
    crc_ok,
    decode_batch,
    iter_batches,
    set_base_offset,
)

log = logging.getLogger("chronolog.mirror")

STATE_VERSION = 1
_FETCH_BYTES = 4 * 1024 * 1024
# Topic configs worth carrying over when the mirror creates the target topic.
_COPIED_CONFIGS = ("retention.ms", "retention.bytes", "segment.bytes", "max.message.bytes",
                   "message.timestamp.before.max.ms", "message.timestamp.after.max.ms")


class MirrorError(Exception):
    """A condition the mirror cannot resolve on its own (it stops and says why)."""


@dataclass
class PartitionState:
    source_next: int
    target_next: int

    def to_json(self) -> dict[str, int]:
        return {"source_next": self.source_next, "target_next": self.target_next}


@dataclass
class MirrorState:
    """Per-partition progress, keyed ``topic/partition``; persisted as JSON."""

    path: Path | None
    source: str
    target: str
    partitions: dict[str, PartitionState] = field(default_factory=dict)

    @staticmethod
    def key(topic: str, partition: int) -> str:
        return f"{topic}/{partition}"

    @classmethod
    def load(cls, path: Path | None, source: str, target: str) -> MirrorState:
        state = cls(path, source, target)
        if path is None or not path.exists():
            return state
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise MirrorError(f"state file {path} cannot be read: {exc}") from exc
        if data.get("version") != STATE_VERSION:
            raise MirrorError(f"state file {path} has version {data.get('version')!r}, "
                              f"expected {STATE_VERSION}")
        for side, given in (("source", source), ("target", target)):
            if data.get(side) not in (None, given):
                # The same cluster may be named differently (IP vs host name): say so, go on;
                # the target-end check at start-up catches a truly different target.
                log.warning("state file %s was written for %s %s, now %s", path, side,
                            data.get(side), given)
        try:
            for k, v in data.get("partitions", {}).items():
                state.partitions[k] = PartitionState(int(v["source_next"]), int(v["target_next"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MirrorError(f"state file {path} is malformed: {exc!r}") from exc
        return state

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "version": STATE_VERSION,
            "source": self.source,
            "target": self.target,
            "updated_ms": int(time.time() * 1000),
            "partitions": {k: v.to_json() for k, v in sorted(self.partitions.items())},
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        try:
            dfd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@dataclass
class MirrorStats:
    records: int = 0
    batches: int = 0
    forwarded_raw: int = 0
    rebuilt: int = 0
    skipped_control: int = 0
    reconciled: int = 0


def _same_record(a: Record, b: Record) -> bool:
    return (a.key == b.key and a.value == b.value and a.timestamp == b.timestamp
            and list(a.headers) == list(b.headers))


@dataclass(eq=False)
class Mirror:
    source: Client
    target: Client
    topics: list[str]
    state: MirrorState
    _: KW_ONLY
    since_ms: int | None
    follow: bool
    checkpoint_interval: float
    stop: asyncio.Event
    stats: MirrorStats = field(default_factory=MirrorStats, init=False)
    _last_save: float = field(default=0.0, init=False)
    _dirty: bool = field(default=False, init=False)

    # ------------------------------------------------------------ setup

    async def prepare_topic(self, topic: str) -> list[int]:
        src_topics = await self.source.list_topics()
        if topic not in src_topics:
            raise MirrorError(f"topic {topic!r} does not exist on the source")
        parts = src_topics[topic]
        tgt_topics = await self.target.list_topics()
        if topic not in tgt_topics:
            configs: dict[str, str] = {"message.timestamp.type": "CreateTime"}
            # Only what was set on the source topic itself is copied (as MirrorMaker 2
            # does by default): a value the source inherits from its broker or from
            # Kafka's defaults would become a fixed override on the target.
            try:
                entries = await self.source.describe_config_entries(topic, keys=_COPIED_CONFIGS)
            except KafkaError:
                entries = {}
            for name, entry in entries.items():
                if entry.source == "DYNAMIC_TOPIC_CONFIG" and entry.value is not None:
                    configs[name] = entry.value
            try:
                await self.target.create_topic(topic, len(parts), configs)
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
            log.info("created %s on the target with %d partitions", topic, len(parts))
            tgt_parts = await self._wait_for_partitions(topic, len(parts))
        else:
            tgt_parts = tgt_topics[topic]
        missing = sorted(set(parts) - set(tgt_parts))
        if missing:
            raise MirrorError(f"target topic {topic!r} lacks partitions {missing} "
                              f"(it has {len(tgt_parts)}, the source {len(parts)})")
        return parts

    async def _wait_for_partitions(self, topic: str, n: int) -> list[int]:
        for _ in range(100):
            got = (await self.target.list_topics()).get(topic, [])
            if len(got) >= n:
                return got
            await asyncio.sleep(0.05)
        raise MirrorError(f"target topic {topic!r} did not appear with {n} partitions")

    async def start_position(self, topic: str, partition: int) -> PartitionState:
        key = MirrorState.key(topic, partition)
        st = self.state.partitions.get(key)
        target_end = (await self.target.latest(topic, [partition]))[partition]
        if st is None:
            if self.since_ms is not None:
                found = (await self.source.offsets_for_times(topic, self.since_ms,
                                                             [partition]))[partition]
                start = found[0] if found is not None else (
                    await self.source.latest(topic, [partition]))[partition]
            else:
                start = (await self.source.earliest(topic, [partition]))[partition]
            st = PartitionState(start, target_end)
            self.state.partitions[key] = st
            self._dirty = True
            return st
        if target_end < st.target_next:
            raise MirrorError(
                f"{topic}-{partition}: the target ends at offset {target_end}, before the "
                f"{st.target_next} this mirror already wrote (was the target topic recreated "
                f"or truncated?); remove the state file to start over")
        if target_end > st.target_next:
            await self._reconcile(topic, partition, st, target_end)
        return st

    async def _reconcile(self, topic: str, partition: int, st: PartitionState,
                         target_end: int) -> None:
        """Skip source records the target already acknowledged after the last state write."""
        surplus = target_end - st.target_next
        log.info("%s-%d: target holds %d records beyond the saved state; checking they are "
                 "the next source records", topic, partition, surplus)
        target_recs: list[Record] = []
        pos = st.target_next
        while len(target_recs) < surplus:
            res = await self.target.fetch_raw(topic, partition, pos, _FETCH_BYTES)
            got = _decode_from(res.records_bytes, pos)
            if not got:
                break
            target_recs += got
            pos = got[-1].offset + 1
        target_recs = target_recs[:surplus]
        src_next = st.source_next
        matched = 0
        while matched < len(target_recs):
            res = await self.source.fetch_raw(topic, partition, src_next, _FETCH_BYTES)
            recs = [r for _, h, rs in _data_batches(res.records_bytes, src_next) for r in rs]
            if not recs:
                break
            for r in recs:
                if matched == len(target_recs):
                    break
                if not _same_record(r, target_recs[matched]):
                    raise MirrorError(
                        f"{topic}-{partition}: target offset {target_recs[matched].offset} "
                        f"differs from source offset {r.offset}; something else writes to the "
                        f"target partition, so the mirror cannot resume exactly")
                matched += 1
                src_next = r.offset + 1
        if matched != surplus:
            raise MirrorError(f"{topic}-{partition}: only {matched} of the {surplus} surplus "
                              "target records could be matched to source records")
        st.source_next = src_next
        st.target_next = target_end
        self.stats.reconciled += surplus
        self._dirty = True

    # ------------------------------------------------------------ copy

    async def copy_partition(self, topic: str, partition: int, st: PartitionState,
                             until: int | None) -> None:
        while not self.stop.is_set():
            if until is not None and st.source_next >= until:
                return
            try:
                res = await self.source.fetch_raw(topic, partition, st.source_next, _FETCH_BYTES,
                                                  max_wait_ms=500 if self.follow else 0)
            except KafkaError as exc:
                if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                start = (await self.source.earliest(topic, [partition]))[partition]
                if start <= st.source_next:
                    raise
                log.warning("%s-%d: source offsets %d..%d were deleted by retention before "
                            "they could be mirrored", topic, partition, st.source_next, start - 1)
                st.source_next = start
                continue
            batches = _data_batches(res.records_bytes, st.source_next)
            if not batches:
                if not self.follow:
                    return  # nothing at or after source_next: the source's end is reached
                continue  # the fetch already long-polled
            for raw, h, records in batches:
                if self.stop.is_set():
                    break
                if until is not None and h.base_offset >= until:
                    st.source_next = max(st.source_next, until)
                    break
                if not records:
                    # A control batch (transaction marker; clients may not produce one) or
                    # a compacted batch with no record left at or after source_next.
                    if h.is_control:
                        self.stats.skipped_control += 1
                    st.source_next = max(st.source_next, h.last_offset + 1)
                    self._dirty = True
                    continue
                payload = raw if raw is not None else build_batch(records,
                                                                  compression=h.compression)
                base = await self.target.produce_batch(topic, partition, payload, acks=-1)
                st.source_next = h.last_offset + 1
                st.target_next = base + len(records)
                self.stats.records += len(records)
                self.stats.batches += 1
                if raw is not None:
                    self.stats.forwarded_raw += 1
                else:
                    self.stats.rebuilt += 1
                self._dirty = True
                self._maybe_save()

    def _maybe_save(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._dirty and (force or now - self._last_save >= self.checkpoint_interval):
            self.state.save()
            self._dirty = False
            self._last_save = now

    async def run(self) -> MirrorStats:
        work: list[tuple[str, int, PartitionState, int | None]] = []
        for topic in self.topics:
            parts = await self.prepare_topic(topic)
            ends = await self.source.latest(topic, parts)
            for p in parts:
                st = await self.start_position(topic, p)
                work.append((topic, p, st, None if self.follow else ends[p]))
        self._maybe_save(force=True)
        try:
            await asyncio.gather(*(self.copy_partition(t, p, st, until)
                                   for t, p, st, until in work))
        finally:
            self._maybe_save(force=True)
        return self.stats


def _decode_from(buf: bytes, offset: int) -> list[Record]:
    out: list[Record] = []
    for pos, h in iter_batches(buf):
        if h.last_offset < offset or h.is_control:
            continue
        out += [r for r in decode_batch(buf, pos) if r.offset >= offset]
    return out


def _data_batches(buf: bytes, next_offset: int) -> list[tuple[bytes | None, BatchHeader,
                                                               list[Record]]]:
    """Each whole batch with the records to copy, and its raw bytes when forwardable as is."""
    out: list[tuple[bytes | None, BatchHeader, list[Record]]] = []
    for pos, h in iter_batches(buf):
        if h.last_offset < next_offset:
            continue
        if h.is_control:
            out.append((None, h, []))
            continue
        if not crc_ok(buf, pos, h):
            raise MirrorError(f"source batch at offset {h.base_offset} fails its CRC")
        records = [r for r in decode_batch(buf, pos) if r.offset >= next_offset]
        # Forwardable as is only if a client could have produced it: CreateTime, no
        # producer id, and offset deltas 0..n-1 (a compacted batch has gaps).
        plain = (h.base_offset >= next_offset and h.timestamp_type == 0
                 and h.producer_id < 0 and not h.is_transactional
                 and h.records_count == h.last_offset_delta + 1 == len(records))
        raw: bytes | None = None
        if plain:
            copy = bytearray(buf[pos:pos + h.size])
            set_base_offset(copy, 0, 0)
            raw = bytes(copy)
        out.append((raw, h, records))
    return out


async def run_mirror(args: argparse.Namespace) -> int:
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    if not topics:
        print("--topics names no topic", file=sys.stderr)
        return 2
    since_ms = None
    if args.since is not None:
        try:
            since_ms = parse_time(args.since)
        except TimeParseError as exc:
            print(f"--since: {exc}", file=sys.stderr)
            return 2
    state = MirrorState.load(Path(args.state) if args.state else None, args.source, args.target)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # SIGINT/SIGTERM finish the batch in flight and save the state (POSIX event loops;
    # on Windows the default handlers stay and the state is as of the last checkpoint).
    if sys.platform != "win32":
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    try:
        source_security = client_security(args.source_client_config)
        target_security = client_security(args.target_client_config)
    except (OSError, ValueError) as exc:
        print(f"mirror: --source/--target-client-config: {exc}", file=sys.stderr)
        return 2
    source = await Client.connect(args.source, client_id="chronolog-mirror",
                                  security=source_security)
    try:
        target = await Client.connect(args.target, client_id="chronolog-mirror",
                                      security=target_security)
        try:
            mirror = Mirror(source, target, topics, state, since_ms=since_ms,
                            follow=args.follow, checkpoint_interval=args.checkpoint_interval,
                            stop=stop)
            stats = await mirror.run()
        finally:
            await target.close()
    finally:
        await source.close()
    print(f"mirrored {stats.records} records in {stats.batches} batches "
          f"({stats.forwarded_raw} forwarded as is, {stats.rebuilt} rebuilt, "
          f"{stats.skipped_control} control batches skipped, {stats.reconciled} records found "
          f"already copied)" + (" — stopped by signal" if stop.is_set() else ""))
    for key, st in sorted(state.partitions.items()):
        print(f"  {key}: next source offset {st.source_next}, target end {st.target_next}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "mirror",
        help="copy topics between two Kafka-protocol brokers (keys, headers, CreateTime kept)",
        description="Copy TOPICS from SOURCE to TARGET partition by partition, preserving keys, "
        "values, headers and CreateTime. Resumable with --state. Either side may be Chronolog "
        "or Apache Kafka.",
    )
    p.add_argument("--source", required=True, metavar="HOST:PORT", help="source bootstrap server")
    p.add_argument("--target", required=True, metavar="HOST:PORT", help="target bootstrap server")
    for side in ("source", "target"):
        p.add_argument(f"--{side}-client-config", default=None, metavar="FILE",
                       help=f"the {side}'s client properties with Kafka/librdkafka names "
                       "(security.protocol, ssl.*, sasl.*; other settings ignored)")
    p.add_argument("--topics", required=True, metavar="T1,T2", help="comma-separated topics")
    p.add_argument("--since", default=None, metavar="TIME",
                   help="start at the first record at or after TIME (ISO-8601 with a zone, "
                   "epoch ms, or -2h style); ignored for partitions the state file knows")
    p.add_argument("--state", default=None, metavar="FILE",
                   help="JSON progress file: resume from it, update it as the target acknowledges")
    p.add_argument("--follow", action="store_true",
                   help="keep mirroring new records until interrupted (default: stop at the "
                   "source's end as of start-up)")
    p.add_argument("--checkpoint-interval", type=float, default=1.0, metavar="SECONDS",
                   help="how often the state file is rewritten (default 1 s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        import uvloop

        return uvloop.run(run_mirror(args))
    except MirrorError as exc:
        print(f"mirror: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:
        print(f"mirror: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mirror: {exc}", file=sys.stderr)
        return 1

