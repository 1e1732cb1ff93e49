"""Prometheus metrics for the broker, kept cheap when nobody scrapes.

Invariants:
- Every metric lives in one private ``CollectorRegistry`` (``REGISTRY``), so
  importing this module never touches prometheus_client's global registry and
  two brokers in one test process do not collide on names.
- The hot-path hooks on ``METRICS`` (``request``, ``bytes_in``, ...) only bump
  plain Python ints and lists; they become metric families at scrape time
  (``BrokerMetrics.collect``). No string formatting and no allocation after the
  first call per label value, and no lock.
- Per-partition figures (log start/end offset, segments, index entries, index
  bytes mapped) are *not* pushed by the append path: a custom collector reads
  them from ``broker.partitions`` at scrape time, on the broker's event loop
  when one is running, so a scrape never sees a half-applied append.
- Partition state is read through declared accessors (``PartitionManager.logs``,
  ``Log.usage``, ``Log.disorder_stats``); a failure is logged with its traceback and
  the scrape answers without the per-partition gauges, never a silent None.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from broker.server import Broker

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)

# Latency buckets from 50 µs to 10 s: time-index lookups sit at the low end,
# long-polling fetches at the high end.
_LATENCY_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)

ProcessCollector(namespace="chronolog", registry=REGISTRY)


class _Histogram:
    """A latency histogram as plain Python numbers: one bisect and two adds per observation."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(_LATENCY_BUCKETS) + 1)  # last slot: above every bound
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(_LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds

    def export(self) -> tuple[list[tuple[str, float]], float]:
        """(cumulative buckets ending with +Inf, sum); the count is the +Inf bucket, so
        a scrape racing an observation still reports a self-consistent histogram."""
        counts = list(self.counts)
        total = self.total
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*_LATENCY_BUCKETS, float("inf")), counts, strict=True):
            running += n
            out.append((floatToGoString(bound), float(running)))
        return out, total


class BrokerMetrics(Collector):
    """The hooks the broker calls on its hot paths, and the collector that exports them.

    Hooks only bump plain ints, lists and dicts (an increment under prometheus_client
    takes a lock and a few calls; on the per-request path those added up to several
    µs). The values are turned into metric families when /metrics is scraped, from
    the scraping thread: each family is read from one copied list or int, so it is
    self-consistent even while the event loop keeps counting.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._requests: dict[str, _Histogram] = {}
        self._bytes_in = 0
        self._bytes_out = 0
        self._appended: dict[tuple[str, int], int] = {}
        self._lookups = _Histogram()
        self._opened = 0
        self._closed = 0
        self._udp_received = 0
        self._udp_dropped: dict[str, int] = {}
        self._udp_appended = 0
        registry.register(self)

    # -- hooks ---------------------------------------------------------------------
    def request(self, api_name: str, seconds: float) -> None:
        h = self._requests.get(api_name)
        if h is None:
            h = self._requests[api_name] = _Histogram()
        h.observe(seconds)

    def bytes_in(self, n: int) -> None:
        self._bytes_in += n

    def bytes_out(self, n: int) -> None:
        self._bytes_out += n

    def records_appended(self, topic: str, partition: int, n: int) -> None:
        key = (topic, partition)
        self._appended[key] = self._appended.get(key, 0) + n

    def lookup(self, seconds: float) -> None:
        self._lookups.observe(seconds)

    def connection_opened(self) -> None:
        self._opened += 1

    def connection_closed(self) -> None:
        self._closed += 1

    def udp_received(self, n: int = 1) -> None:
        self._udp_received += n

    def udp_dropped(self, reason: str, n: int = 1) -> None:
        self._udp_dropped[reason] = self._udp_dropped.get(reason, 0) + n

    def udp_appended(self, n: int) -> None:
        self._udp_appended += n

    def forget_partition(self, topic: str, partition: int) -> None:
        """Drop a deleted partition's labelled series so it stops being exported."""
        self._appended.pop((topic, partition), None)

    # -- export --------------------------------------------------------------------
    def collect(self) -> Iterable[Metric]:
        requests = CounterMetricFamily(
            "chronolog_requests", "Requests handled, by Kafka API name.", labels=["api"])
        seconds = HistogramMetricFamily(
            "chronolog_request_seconds", "Time to handle one request, by Kafka API name.",
            labels=["api"])
        for api, h in sorted(self._requests.items()):
            buckets, total = h.export()
            requests.add_metric([api], buckets[-1][1])
            seconds.add_metric([api], buckets, total)
        yield requests
        yield seconds
        yield CounterMetricFamily(
            "chronolog_bytes_in", "Request bytes read from Kafka-protocol connections.",
            value=self._bytes_in)
        yield CounterMetricFamily(
            "chronolog_bytes_out", "Response bytes written to Kafka-protocol connections.",
            value=self._bytes_out)
        appended = CounterMetricFamily(
            "chronolog_records_appended", "Records appended to the log, by partition.",
            labels=["topic", "partition"])
        for (topic, partition), n in sorted(self._appended.items()):
            appended.add_metric([topic, str(partition)], n)
        yield appended
        buckets, total = self._lookups.export()
        yield CounterMetricFamily(
            "chronolog_time_index_lookups", "Offset-for-timestamp lookups served.",
            value=buckets[-1][1])
        yield HistogramMetricFamily(
            "chronolog_time_index_lookup_seconds",
            "Latency of one offset-for-timestamp lookup in the log.",
            buckets=buckets, sum_value=total)
        opened, closed = self._opened, self._closed
        yield CounterMetricFamily(
            "chronolog_connections_opened", "Kafka-protocol connections accepted.", value=opened)
        yield CounterMetricFamily(
            "chronolog_connections_closed", "Kafka-protocol connections closed.", value=closed)
        yield GaugeMetricFamily(
            "chronolog_connections_active", "Kafka-protocol connections open now.",
            value=opened - closed)
        yield CounterMetricFamily(
            "chronolog_udp_datagrams_received", "UDP datagrams read from the socket.",
            value=self._udp_received)
        dropped = CounterMetricFamily(
            "chronolog_udp_datagrams_dropped", "UDP datagrams dropped, by reason.",
            labels=["reason"])
        for reason, n in sorted(self._udp_dropped.items()):
            dropped.add_metric([reason], n)
        yield dropped
        yield CounterMetricFamily(
            "chronolog_udp_records_appended", "UDP datagrams appended to the log as records.",
            value=self._udp_appended)

    def describe(self) -> Iterable[Metric]:
        return []


METRICS = BrokerMetrics(REGISTRY)


# --------------------------------------------------------------------------
# Per-partition state, read at scrape time.


@dataclass(frozen=True)
class PartitionSnapshot:
    """What a scrape reports about one partition; fields are None when unknown."""

    topic: str
    partition: int
    log_start_offset: int | None
    log_end_offset: int | None
    segments: int | None
    size_bytes: int | None
    offset_index_entries: int | None
    time_index_entries: int | None
    index_bytes_mapped: int | None
    late_records: int | None = None
    max_lateness_ms: int | None = None
    # The remote tier (KIP-405), when the broker has one and the topic is tiered.
    local_log_start_offset: int | None = None
    remote_highest_offset: int | None = None
    remote_size_bytes: int | None = None
    upload_lag_bytes: int | None = None
    upload_lag_segments: int | None = None
    remote_copy_failures: int | None = None


def snapshot_partitions(broker: Broker) -> list[PartitionSnapshot]:
    """Read every partition's figures through the storage accessors (``Log.usage``,
    ``Log.disorder_stats``); called on the event loop when there is one."""
    out: list[PartitionSnapshot] = []
    tier = getattr(broker, "tier", None)  # a Broker has one; tools that scrape may not
    for (topic, part), plog in sorted(broker.partitions.logs().items()):
        u = plog.usage()
        stats = plog.disorder_stats()
        ts = (tier.status((topic, part), plog)
              if tier is not None and tier.tier((topic, part)) is not None else None)
        out.append(PartitionSnapshot(
            local_log_start_offset=None if ts is None else ts.local_log_start_offset,
            remote_highest_offset=None if ts is None else ts.remote_highest_offset,
            remote_size_bytes=None if ts is None else ts.remote_bytes,
            upload_lag_bytes=None if ts is None else ts.upload_lag_bytes,
            upload_lag_segments=None if ts is None else ts.upload_lag_segments,
            remote_copy_failures=None if ts is None else ts.failures,
            topic=topic,
            partition=part,
            late_records=stats.late_records,
            max_lateness_ms=stats.max_lateness_ms,
            log_start_offset=u.log_start_offset,
            log_end_offset=u.log_end_offset,
            segments=u.segments,
            size_bytes=u.size_bytes,
            offset_index_entries=u.offset_index_entries,
            time_index_entries=u.time_index_entries,
            index_bytes_mapped=u.index_bytes_mapped,
        ))
    return out


_PARTITION_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("log_start_offset", "chronolog_log_start_offset", "First offset still in the log."),
    ("log_end_offset", "chronolog_log_end_offset", "Offset the next appended record gets."),
    ("segments", "chronolog_log_segments", "Segments in the partition's log."),
    ("size_bytes", "chronolog_log_size_bytes", "Bytes of record batches in the log."),
    ("offset_index_entries", "chronolog_offset_index_entries", "Offset-index entries."),
    ("time_index_entries", "chronolog_time_index_entries", "Time-index entries."),
    ("index_bytes_mapped", "chronolog_index_bytes_mapped", "Bytes of index files memory-mapped."),
    ("late_records", "chronolog_late_records",
     "Records whose timestamp is below the largest timestamp before them (event-time disorder)."),
    ("max_lateness_ms", "chronolog_max_lateness_ms",
     "Largest (running max timestamp - record timestamp) in the partition."),
    ("local_log_start_offset", "chronolog_local_log_start_offset",
     "First offset on local disk (older ones are in the remote tier only)."),
    ("remote_highest_offset", "chronolog_remote_highest_offset",
     "Last offset copied to the remote tier (-1 when none)."),
    ("remote_size_bytes", "chronolog_remote_size_bytes",
     "Bytes of the partition's segments in the remote tier."),
    ("upload_lag_bytes", "chronolog_remote_upload_lag_bytes",
     "Bytes of sealed local segments not yet copied to the remote tier."),
    ("upload_lag_segments", "chronolog_remote_upload_lag_segments",
     "Sealed local segments not yet copied to the remote tier."),
    ("remote_copy_failures", "chronolog_remote_copy_failures_in_a_row",
     "Consecutive failed remote-tier passes of the partition (0 when the last worked)."),
)


class PartitionCollector(Collector):
    """Exports per-partition gauges by snapshotting the broker at scrape time."""

    def __init__(self, broker: Broker, loop: asyncio.AbstractEventLoop | None) -> None:
        self._broker = broker
        self._loop = loop

    def _snapshot(self) -> list[PartitionSnapshot]:
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return snapshot_partitions(self._broker)
        if _running_loop() is loop:
            return snapshot_partitions(self._broker)
        future: concurrent.futures.Future[list[PartitionSnapshot]] = concurrent.futures.Future()

        def take() -> None:
            try:
                future.set_result(snapshot_partitions(self._broker))
            except BaseException as exc:  # delivered to the scraping thread
                future.set_exception(exc)

        loop.call_soon_threadsafe(take)
        return future.result(timeout=5.0)

    def collect(self) -> Iterable[Metric]:
        try:
            snaps = self._snapshot()
        except Exception:
            log.exception("metrics scrape could not read partition state")
            snaps = []
        families = {
            field: GaugeMetricFamily(name, doc, labels=["topic", "partition"])
            for field, name, doc in _PARTITION_GAUGES
        }
        for snap in snaps:
            labels = [snap.topic, str(snap.partition)]
            for field, family in families.items():
                value = getattr(snap, field)
                if value is not None:
                    family.add_metric(labels, float(value))
        return [*families.values(), *tier_families(self._broker)]

    def describe(self) -> Iterable[Metric]:
        return []


def tier_families(broker: Broker) -> list[Metric]:
    """The remote-log-manager's counters (plain ints, read as they are)."""
    tier = getattr(broker, "tier", None)  # a Broker has one; tools that scrape may not
    if tier is None:
        return []
    c = tier.counters
    hits, misses, cached = tier.cache_stats()
    chunk_hits, chunk_misses, chunk_bytes = tier.chunk_cache_stats()
    return [
        CounterMetricFamily("chronolog_remote_copy_bytes",
                            "Bytes copied to the remote tier (segments and their indexes).",
                            value=c.bytes_copied),
        CounterMetricFamily("chronolog_remote_copy_segments", "Segments copied to the remote tier.",
                            value=c.segments_copied),
        CounterMetricFamily("chronolog_remote_copy_errors",
                            "Remote-tier passes of a partition that failed (retried with backoff).",
                            value=c.copy_failures),
        CounterMetricFamily("chronolog_remote_fetch_bytes",
                            "Record bytes Fetch served from the remote tier.", value=c.bytes_fetched),
        CounterMetricFamily("chronolog_remote_fetch_requests",
                            "Partition reads Fetch served from the remote tier.",
                            value=c.remote_fetches),
        CounterMetricFamily("chronolog_remote_delete_segments",
                            "Remote segments deleted by retention or DeleteRecords.",
                            value=c.segments_deleted),
        CounterMetricFamily("chronolog_remote_index_cache_hits",
                            "Remote index/zone-map files found in the local cache.", value=hits),
        CounterMetricFamily("chronolog_remote_index_cache_misses",
                            "Remote index/zone-map files fetched from the bucket.", value=misses),
        GaugeMetricFamily("chronolog_remote_index_cache_bytes",
                          "Bytes of the local remote-index cache "
                          "(remote.log.index.file.cache.total.size.bytes bounds it).", value=cached),
        CounterMetricFamily("chronolog_remote_chunk_cache_hits",
                            "Remote .log chunks read from the local chunk cache.",
                            value=chunk_hits),
        CounterMetricFamily("chronolog_remote_chunk_cache_misses",
                            "Remote .log chunks fetched from the bucket.", value=chunk_misses),
        GaugeMetricFamily("chronolog_remote_chunk_cache_bytes",
                          "Bytes of the local remote-chunk cache "
                          "(remote.log.chunk.cache.total.size.bytes bounds it).",
                          value=chunk_bytes),
    ]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# --------------------------------------------------------------------------
# HTTP endpoint.


class _QuietHandler(WSGIRequestHandler):
    """Route the per-request access log into logging at DEBUG instead of stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics %s " + format, self.client_address[0], *args)


class _ThreadingWSGIServer(WSGIServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self._handle, args=(request, client_address), daemon=True,
            name="metrics-request",
        )
        t.start()

    def _handle(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint; ``close()`` stops it and detaches the collector."""

    host: str
    port: int
    _server: WSGIServer
    _thread: threading.Thread
    _collector: PartitionCollector
    _registry: CollectorRegistry

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)
        try:
            self._registry.unregister(self._collector)
        except KeyError:
            pass


def loop_responds(loop: asyncio.AbstractEventLoop | None, timeout: float = 2.0) -> bool:
    """True when ``loop`` runs a callback within ``timeout`` (a wedged loop serves no one)."""
    if loop is None or loop.is_closed() or not loop.is_running():
        return loop is None  # no loop to watch (tests, tools): the HTTP thread answering is all
    if _running_loop() is loop:
        return True
    done = threading.Event()
    try:
        loop.call_soon_threadsafe(done.set)
    except RuntimeError:
        return False
    return done.wait(timeout)


def _make_app(
    registry: CollectorRegistry, loop: asyncio.AbstractEventLoop | None = None,
) -> Callable[[dict[str, Any], Callable[..., Any]], list[bytes]]:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            body = generate_latest(registry)
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST),
                                      ("Content-Length", str(len(body)))])
            return [body]
        if path in ("/healthz", "/health"):
            ok = loop_responds(loop)
            body = b"ok\n" if ok else b"event loop not responding\n"
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
            return [body]
        msg = b"not found: try /metrics\n"
        start_response("404 Not Found", [("Content-Type", "text/plain"),
                                         ("Content-Length", str(len(msg)))])
        return [msg]

    return app


def start_metrics_server(
    host: str, port: int, broker: Broker, registry: CollectorRegistry = REGISTRY
) -> MetricsServer:
    """Serve ``/metrics`` and ``/healthz`` on host:port from a daemon thread.

    ``/healthz`` answers 200 only if the broker's event loop runs a callback within
    2 s, so a wedged loop fails the health check even though this thread answers.

    Call it from the broker's event loop: per-partition figures are then read on
    that loop at scrape time. ``port=0`` picks a free port (see ``.port``).
    """
    loop = _running_loop()
    collector = PartitionCollector(broker, loop)
    registry.register(collector)
    try:
        server = make_server(host, port, _make_app(registry, loop),
                             server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    except BaseException:
        registry.unregister(collector)
        raise
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5},
                              name="metrics-http", daemon=True)
    thread.start()
    bound_port = int(server.server_address[1])
    log.info("metrics endpoint listening", extra={"host": host, "port": bound_port})
    return MetricsServer(host, bound_port, server, thread, collector, registry)
