"""The broker end to end: a real ``python -m broker`` subprocess and real clients.

Side by side in one run, on one broker:
- produce: confluent-kafka producer, 1M x 100 B, acks=1, linger.ms=5 (records/s);
- consume: confluent-kafka consumer reading those records back (records/s);
- lookups: ListOffsets "first offset with timestamp >= T" from one raw-socket
  client (blocking, one request in flight, the project's protocol encoder and
  decoder) against a 1M- and a 10M-record topic, next to the floor: ApiVersions
  through exactly the same client code. p99 and lookups/s from a run of lookups
  alone; the p50 and its gap to the floor from lookups that alternate with
  no-ops, so both are measured under the same load of this shared machine;
- the same lookups through librdkafka's ``offsets_for_times`` for reference;
- the broker alone: pre-built batches through pipelined raw Produce, then raw Fetch
  (what the broker sustains when no client library is the bottleneck);
- broker RSS after the 10M-record lookups.

The 10M-record topic is written straight into the data directory with the
storage layer before the broker starts (setup, not measured): producing it
through the wire would take most of the run. ``CHRONOLOG_BENCH_SCALE`` (< 1)
shrinks every size for a quick dry run.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from pathlib import Path
from typing import Any

import crc32c

from bench.harness import SCALE, cpu_seconds, start_broker, stop_broker
from bench.report import Report, percentile
from protocol import api
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch, iter_batches

N_PRODUCE = int(1_000_000 * SCALE)
N_BIG = int(10_000_000 * SCALE)
N_CALLS = max(2000, int(20_000 * min(SCALE, 1)))
T0 = 1_700_000_000_000
VALUE = b"x" * 100
SECTION = "broker"


# --------------------------------------------------------------------------- setup


def write_big_topic(data: Path, topic: str, records: int, per_batch: int = 1000, *,
                    partition: int = 0, ts_step: int = 1) -> None:
    """``records`` 100-byte-value records, timestamps T0 + offset * ts_step, written with
    storage directly into ``topic``-``partition``."""
    tpl = bytearray(build_batch([Record(0, T0 + i * ts_step, None, VALUE, [])
                                 for i in range(per_batch)]))
    log = Log(data / f"{topic}-{partition}", LogConfig(retention_ms=-1))
    off = 0
    group = max(1, (4 << 20) // len(tpl))
    while off < records:
        chunk = []
        for _ in range(group):
            if off >= records:
                break
            b = tpl
            struct.pack_into(">q", b, 0, off)
            struct.pack_into(">qq", b, 27, T0 + off * ts_step, T0 + (off + per_batch - 1) * ts_step)
            struct.pack_into(">I", b, 17, crc32c.crc32c(memoryview(b)[21:]))
            chunk.append(bytes(b))
            off += per_batch
        log.append_as_is(b"".join(chunk), now_ms=T0 + records * ts_step)
    log.close()


def _rss_parts_mib(pid: int) -> tuple[float, float]:
    parts = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:")):
            parts[line.split(":")[0]] = int(line.split()[1]) / 1024.0
    return parts.get("RssAnon", float("nan")), parts.get("RssFile", float("nan"))


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


# --------------------------------------------------------------------------- raw client


class RawClient:
    """One blocking connection, one request in flight: the same path for every API.

    Reads into one preallocated buffer with ``recv_into``: a response (size prefix and
    frame) usually arrives in one segment, so a call costs one send and one receive
    system call, the least a blocking client can do.
    """

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0
        self._buf = bytearray(1 << 16)
        self._view = memoryview(self._buf)
        self._have = 0  # bytes of the next frame(s) already read

    def call(self, key: int, version: int, body: dict[str, Any]) -> Any:
        self.cid += 1
        self.sock.sendall(api.encode_request(key, version, self.cid, "bench", body))
        cid, resp = api.decode_response(key, version, self.read_frame())
        assert cid == self.cid
        return resp

    def read_frame(self) -> bytes:
        """The next response frame (without its size prefix)."""
        need = 4
        while True:
            if self._have >= 4:
                (size,) = struct.unpack_from(">i", self._buf, 0)
                need = 4 + size
                if need > len(self._buf):
                    self._view.release()  # a bytearray with a live view cannot grow
                    self._buf.extend(bytes(need - len(self._buf)))
                    self._view = memoryview(self._buf)
                if self._have >= need:
                    break
            got = self.sock.recv_into(self._view[self._have:], len(self._buf) - self._have)
            if not got:
                raise ConnectionError("broker closed the connection")
            self._have += got
        frame = bytes(self._view[4:need])
        rest = self._have - need
        if rest:
            self._buf[:rest] = self._buf[need:self._have]
        self._have = rest
        return frame

    def close(self) -> None:
        self._view.release()
        self.sock.close()


API_VERSIONS_BODY = {"client_software_name": "bench", "client_software_version": "1"}


def _list_offsets_body(topic: str, ts: int) -> dict[str, Any]:
    return {"replica_id": -1, "isolation_level": 0, "timeout_ms": 0, "topics": [
        {"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]}


def _time_calls(fn: Any, args: list[Any]) -> tuple[list[float], float]:
    out = []
    clock = time.perf_counter_ns
    start = time.perf_counter()
    for a in args:
        t0 = clock()
        fn(a)
        out.append((clock() - t0) / 1000.0)
    return out, time.perf_counter() - start


def bench_lookups(report: Report, port: int, topics: list[tuple[str, int]], pid: int) -> None:
    c = RawClient(port)
    rng = random.Random(7)
    for _ in range(500):  # warm up the connection, the codecs and the indexes
        c.call(18, 3, API_VERSIONS_BODY)
    cpu0 = cpu_seconds(pid)
    floor, _ = _time_calls(lambda _: c.call(18, 3, API_VERSIONS_BODY), list(range(N_CALLS)))
    floor_cpu = (cpu_seconds(pid) - cpu0) / N_CALLS * 1e6
    floor_p50 = percentile(floor, 50)
    report.add(SECTION, "ApiVersions round trip p50 (floor)", floor_p50, "µs",
               note=f"broker CPU {floor_cpu:.1f} µs/request, idle polling "
                    f"(idle.poll.us) included: with one request in flight the loop polls "
                    f"through each gap, so this is about the round trip")
    for topic, n in topics:
        targets = [T0 + rng.randrange(n) for _ in range(N_CALLS)]
        for t in targets[:500]:
            c.call(2, 7, _list_offsets_body(topic, t))
        # Exactness spot check: timestamps are T0 + offset, so T -> T - T0.
        for t in targets[:50]:
            got = c.call(2, 7, _list_offsets_body(topic, t)).topics[0].partitions[0]
            assert got.offset == t - T0 and got.timestamp == t, (t, got)
        cpu0 = cpu_seconds(pid)
        lat, total = _time_calls(
            lambda t, topic=topic: c.call(2, 7, _list_offsets_body(topic, t)), targets)
        lookup_cpu = (cpu_seconds(pid) - cpu0) / len(targets) * 1e6
        # The same lookups again, each right after a no-op on the same connection: both
        # halves of a pair see the same moment of this shared machine, so the gap
        # between their p50s is the lookup's own cost, not a change in the machine.
        paired_floor: list[float] = []
        paired: list[float] = []
        clock = time.perf_counter_ns
        for t in targets:
            t0 = clock()
            c.call(18, 3, API_VERSIONS_BODY)
            t1 = clock()
            c.call(2, 7, _list_offsets_body(topic, t))
            paired_floor.append((t1 - t0) / 1000.0)
            paired.append((clock() - t1) / 1000.0)
        label = f"{n / 1e6:g}M"
        p50 = percentile(paired, 50)
        gap = p50 - percentile(paired_floor, 50)
        report.add(SECTION, f"ListOffsets by time p50, {label} records", p50, "µs",
                   note=f"{gap:+.1f} µs vs the floor measured alternately with it "
                        f"(target <= +20); broker CPU {lookup_cpu:.1f} µs/lookup incl. "
                        f"idle polling ({lookup_cpu - floor_cpu:+.1f} vs ApiVersions)")
        report.add(SECTION, f"ListOffsets by time p99, {label} records", percentile(lat, 99), "µs",
                   "<= 250", note="one request in flight, lookups only")
        report.add(SECTION, f"lookups/s one client, {label} records", len(lat) / total, "1/s",
                   ">= 15,000", note="one request in flight")
        frames = [api.encode_request(2, 7, i + 1, "bench", _list_offsets_body(topic, t))
                  for i, t in enumerate(targets)]
        window = 32
        started = time.perf_counter()
        for i, frame in enumerate(frames):
            c.sock.sendall(frame)
            if i >= window:
                c.read_frame()
        for _ in range(min(window, len(frames))):
            c.read_frame()
        pipelined = len(frames) / (time.perf_counter() - started)
        report.add(SECTION, f"lookups/s one client pipelined, {label} records", pipelined, "1/s",
                   ">= 15,000", note=f"{window} requests in flight on one connection")
    c.close()


_ECHO_SERVER = """
import asyncio, socket, sys, uvloop
class Echo(asyncio.Protocol):
    def connection_made(self, t):
        self.t = t
        t.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    def data_received(self, d):  # one request per chunk here: answer its correlation id
        self.t.write(b"\\x00\\x00\\x00\\x06" + d[8:12] + b"\\x00\\x00")
async def main():
    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", int(sys.argv[1]))
    print("ready", flush=True)
    await server.serve_forever()
uvloop.run(main())
"""


def bench_echo_floor(report: Report) -> None:
    """The machine's floor for one request in flight: a bare uvloop server that answers
    every frame with a fixed 6-byte body, no Kafka work, measured with the same blocking
    client as the broker rows. Two processes waking each other up per round trip is
    what it costs; the broker's rows sit above this."""
    import subprocess
    import sys

    from bench.harness import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", _ECHO_SERVER, str(port)],
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        c = RawClient(port)
        frame = api.encode_request(18, 3, 1, "bench", API_VERSIONS_BODY)
        for _ in range(500):
            c.sock.sendall(frame)
            c.read_frame()
        lat, total = _time_calls(lambda _: (c.sock.sendall(frame), c.read_frame()),
                                 list(range(N_CALLS)))
        c.close()
    finally:
        proc.kill()
        proc.wait()
    report.add(SECTION, "bare uvloop echo round trip p50 (machine floor)", percentile(lat, 50),
               "µs", note=f"{len(lat) / total:,.0f} round trips/s with one in flight; "
                          f"no Kafka work at all")


def bench_raw_throughput(report: Report, port: int, pid: int) -> None:
    """The broker alone: pre-built 5,000-record batches (about 0.5 MiB, under
    message.max.bytes) through Produce v9 (acks=1, 8 requests in flight), then Fetch v12
    reading them back. No client library in the way, so these show what the broker
    sustains next to the librdkafka figures."""
    per_batch = 5_000
    tpl = bytearray(build_batch([Record(0, T0 + i, None, VALUE, []) for i in range(per_batch)]))
    batches = []
    for k in range(max(1, N_PRODUCE // per_batch)):
        struct.pack_into(">qq", tpl, 27, T0 + k * per_batch, T0 + k * per_batch + per_batch - 1)
        struct.pack_into(">I", tpl, 17, crc32c.crc32c(memoryview(tpl)[21:]))
        batches.append(bytes(tpl))
    c = RawClient(port)
    frames = []
    for k, batch in enumerate(batches):
        frames.append(api.encode_request(0, 9, k + 1, "bench", {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": "bench-raw", "partition_data": [{"index": 0, "records": batch}]}],
        }))
    c.call(3, 12, {"topics": [{"name": "bench-raw", "topic_id": bytes(16)}],
                   "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    cpu0 = cpu_seconds(pid)
    started = time.perf_counter()
    window = 8
    answers = []
    for k, frame in enumerate(frames):
        c.sock.sendall(frame)
        if k >= window:
            answers.append(c.read_frame())
    for _ in range(min(window, len(frames))):
        answers.append(c.read_frame())
    elapsed = time.perf_counter() - started
    for frame in answers:
        part = api.decode_response(0, 9, frame)[1].responses[0].partition_responses[0]
        assert part.error_code == 0, part
    cpu = cpu_seconds(pid) - cpu0
    n = len(frames) * per_batch
    report.add(SECTION, "produce, raw Produce v9 of 5,000-record batches, acks=1", n / elapsed,
               "rec/s", note=f"broker CPU {cpu / n * 1e6:.2f} µs/record")
    offset = 0
    started = time.perf_counter()
    cpu0 = cpu_seconds(pid)
    while offset < n:
        resp = c.call(1, 12, {
            "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "bench-raw", "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 4 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        records = resp.responses[0].partitions[0].records
        last = None
        for _pos, h in iter_batches(records):
            last = h
        assert last is not None
        offset = last.last_offset + 1
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu0
    report.add(SECTION, "fetch, raw Fetch v12 (4 MiB per request)", n / elapsed, "rec/s",
               note=f"broker CPU {cpu / n * 1e6:.2f} µs/record")
    c.close()


# --------------------------------------------------------------------------- librdkafka


def wait_until_idle(pid: int, timeout: float = 60.0, window: float = 0.5) -> float:
    """Wait until the broker uses under 5% of a core over ``window`` seconds; returns
    the seconds waited. Right after start-up the broker builds lookup summaries of
    every batch on disk in the background (about 1 s of CPU for the 10M-record topic,
    spread over 2 s); a measurement started then would charge that work to itself."""
    started = time.perf_counter()
    prev = cpu_seconds(pid)
    while time.perf_counter() - started < timeout:
        time.sleep(window)
        now = cpu_seconds(pid)
        if now - prev < 0.05 * window:
            break
        prev = now
    return time.perf_counter() - started


def produce_stamped(p: Any, topic: str, stamps: range) -> int:
    """produce() one VALUE record per timestamp of ``stamps`` to partition 0 (arguments by
    position, see bench_produce; a full queue is polled and the record sent again), then
    flush: the records not delivered."""
    produce, poll = p.produce, p.poll
    for i in stamps:
        try:
            produce(topic, VALUE, None, 0, None, None, i)
        except BufferError:
            poll(0.001)
            produce(topic, VALUE, None, 0, None, None, i)
        if i & 0xFFFF == 0:
            poll(0)
    return int(p.flush(120))


def bench_produce(report: Report, bootstrap: str, topic: str, pid: int) -> None:
    """librdkafka's producer as the issue states it: acks=1, linger.ms=5, default
    batch.size (1,000,000 B) and batch.num.messages (10,000), no compression; the
    queue is deep enough that produce() never blocks. With 100 B values librdkafka
    sends one batch per partition per request, of about 5,000 records (at most
    ~9,000, batch.size) here. Before the clock starts: the connection, the topic's
    metadata (which auto-creates it) and the broker's start-up work (see
    wait_until_idle) are out of the way. The broker CPU figure runs until the broker
    is idle again after the flush, so it includes the background lookup summaries
    the new batches cause (built within a second of an append).

    produce() gets its arguments by position (topic, value, key, partition,
    callback, on_delivery, timestamp: the order of confluent-kafka's C argument
    list, where on_delivery is an alias of callback), which it accepts: the keyword form
    ``timestamp=`` costs ~0.5 µs more per call in confluent-kafka's argument parsing
    (measured with no broker: 0.79-0.86M calls/s by keyword, 1.19-1.47M by position)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                  "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    p.produce(topic + "-warm", value=b"warm", timestamp=T0)  # connection and metadata warm
    p.flush(30)
    p.list_topics(topic, timeout=30)  # creates the topic: no metadata wait in the loop
    waited = wait_until_idle(pid)
    produce = p.produce
    poll = p.poll
    cpu0 = cpu_seconds(pid)
    started = time.perf_counter()
    for i in range(N_PRODUCE):
        try:
            produce(topic, VALUE, None, -1, None, None, T0 + i)
        except BufferError:
            poll(0.001)
            produce(topic, VALUE, None, -1, None, None, T0 + i)
        if i & 0xFFFF == 0:
            poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - started
    # The summary task looks for new batches every second: a quiet 1.5 s window has
    # seen it run after the last append.
    wait_until_idle(pid, window=1.5)
    cpu = cpu_seconds(pid) - cpu0
    assert left == 0, f"{left} records not delivered"
    report.add(SECTION, "produce 1M x 100 B, confluent-kafka acks=1 linger 5 ms",
               N_PRODUCE / elapsed, "rec/s", ">= 1,000,000", note="produce() per record with its timestamp, arguments by position")
    report.add(SECTION, "broker CPU per produced record", cpu / N_PRODUCE * 1e6, "µs",
               note=f"broker-side capacity {N_PRODUCE / max(cpu, 1e-9):,.0f} rec/s per core; "
                    f"incl. background summaries; start-up work waited out ({waited:.1f} s)")
    # produce_batch: the same records through librdkafka with less Python per record
    # (no per-record timestamps in batch mode: librdkafka stamps them).
    batch = [{"value": VALUE} for _ in range(10_000)]
    started = time.perf_counter()
    sent = 0
    while sent < N_PRODUCE:
        try:
            p.produce_batch(topic + "-batch", batch, partition=0)
        except BufferError:
            poll(0.01)
            continue
        sent += len(batch)
        poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - started
    assert left == 0, f"{left} records not delivered"
    report.add(SECTION, "produce 1M x 100 B, confluent-kafka produce_batch, acks=1 linger 5 ms",
               sent / elapsed, "rec/s", ">= 1,000,000", note="10,000-message lists")
    # Python's own produce() loop is part of that figure: measure it alone for the ratio.
    p2 = Producer({"bootstrap.servers": "127.0.0.1:1", "queue.buffering.max.messages": 2_000_000,
                   "queue.buffering.max.kbytes": 2_000_000, "message.timeout.ms": 1})
    n = min(N_PRODUCE, 500_000)
    started = time.perf_counter()
    for i in range(n):
        p2.produce(topic, VALUE, None, -1, None, None, T0 + i)
    client_only = n / (time.perf_counter() - started)
    p2.purge()
    report.add(SECTION, "confluent-kafka produce() calls alone (no broker)", client_only, "rec/s",
               note="client-side ceiling on this machine")


def bench_consume(report: Report, bootstrap: str, topic: str, expected: int, pid: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    # Large fetches and a deep local queue: librdkafka stops prefetching below
    # queued.min.messages (100k by default), which alone caps this loop near 150k/s here.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                  "queued.max.messages.kbytes": 1048576, "queued.min.messages": 1_000_000})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    cpu0 = cpu_seconds(pid)
    started = time.perf_counter()
    deadline = started + 120
    while got < expected and time.perf_counter() < deadline:
        msgs = c.consume(10_000, timeout=1.0)
        got += sum(1 for m in msgs if m.error() is None)
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu0
    c.close()
    report.add(SECTION, "consume, confluent-kafka consumer", got / elapsed, "rec/s", ">= 1,000,000",
               note=f"{got:,} records")
    report.add(SECTION, "broker CPU per consumed record", cpu / max(got, 1) * 1e6, "µs",
               note=f"broker-side capacity {got / max(cpu, 1e-9):,.0f} rec/s per core")


def bench_rdkafka_lookups(report: Report, bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-lookups"})
    rng = random.Random(11)
    targets = [T0 + rng.randrange(n) for _ in range(min(N_CALLS, 5000))]
    for t in targets[:200]:
        c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=10)
    lat, total = _time_calls(
        lambda t: c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=10), targets)
    c.close()
    report.add(SECTION, f"confluent-kafka offsets_for_times p50, {n / 1e6:g}M records",
               percentile(lat, 50), "µs", note=f"{len(lat) / total:,.0f} lookups/s")


# --------------------------------------------------------------------------- entry


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    write_big_topic(data, "bench-10m", N_BIG)
    print(f"  (setup: wrote {N_BIG:,} records in {time.perf_counter() - started:.1f} s)", flush=True)
    started = time.perf_counter()
    proc, port = start_broker(root, data, {"log.retention.ms": "-1"}, timeout=120)
    report.add(SECTION, f"broker start-up with {N_BIG / 1e6:g}M records on disk",
               time.perf_counter() - started, "s", note="first start: no clean-shutdown marker")
    bootstrap = f"127.0.0.1:{port}"
    try:
        bench_produce(report, bootstrap, "bench-1m", proc.pid)
        bench_consume(report, bootstrap, "bench-1m", N_PRODUCE, proc.pid)
        bench_raw_throughput(report, port, proc.pid)
        # Both topics hold timestamps T0 + offset: the 1M one as the producer sent them,
        # the 10M one as storage wrote them.
        # The produce and raw runs just appended 2M records: let the broker finish their
        # background summaries first, as it would between a burst of writes and reads.
        wait_until_idle(proc.pid)
        bench_echo_floor(report)
        bench_lookups(report, port, [("bench-1m", N_PRODUCE), ("bench-10m", N_BIG)], proc.pid)
        anon, file_backed = _rss_parts_mib(proc.pid)
        report.add(SECTION, "broker RSS right after lookups, 10M records stored",
                   _rss_mib(proc.pid), "MiB", "<= 150",
                   note=f"anonymous {anon:.0f} MiB + file-backed (mapped indexes, code) "
                        f"{file_backed:.0f} MiB")
        time.sleep(2.0)  # and once the lookups' garbage and buffers have settled
        anon, file_backed = _rss_parts_mib(proc.pid)
        report.add(SECTION, "broker RSS 2 s after lookups, 10M records stored",
                   _rss_mib(proc.pid), "MiB", "<= 150",
                   note=f"anonymous {anon:.0f} MiB + file-backed {file_backed:.0f} MiB")
        bench_rdkafka_lookups(report, bootstrap, "bench-10m", N_BIG)
    finally:
        stop_broker(proc, 60)
