"""The broker process: an asyncio (uvloop) server speaking the Kafka wire protocol.

Invariants:
- Listeners (``listeners``): one asyncio server per listener, each with its security
  protocol; every connection is a :class:`broker.connection.Connection` (on SSL and
  SASL_SSL listeners a :class:`broker.tls_connection.TlsConnection`), whose module says
  what holds per connection: response order, back-pressure, bad frames, graceful close,
  authentication and the connection limits, alike on every listener. What an answer is
  made of (handler failures, quota throttling) is broker/answers.py's.
- Back-pressure across connections: the requests (and bytes) waiting in all of them are
  counted against ``queued.max.requests`` / ``queued.max.request.bytes`` in one
  :class:`broker.request_budget.RequestBudget` (``Broker.requests``).
- Shutdown (SIGTERM/SIGINT) stops accepting, stops reading new requests, wakes
  long-polls, lets in-flight requests finish and their responses drain, then
  closes the logs (segments sealed, clean-shutdown marker written) and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import logging
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker import dispatch
from broker.acl.authorizer import Authorizer
from broker.acl.store import AclStore
from broker.config import LONG_MAX, BrokerConfig, ConfigError, add_arguments
from broker.connection import Connection
from broker.dispatch import Route
from broker.group_configs import GroupConfigs
from broker.groups.coordinator import GroupCoordinator
from broker.groups.store import forget_store
from broker.logs import setup_logging
from broker.partitions import PartitionManager
from broker.pump import WAKE_COST_S, Pump
from broker.quotas.model import (
    QuotaConfigs,
    Quotas,
)
from broker.quotas.store import FILE_NAME as QUOTA_FILE
from broker.quotas.store import load as load_quotas
from broker.request_budget import RequestBudget
from broker.security.listeners import Listener, listeners, mechanisms
from broker.security.sasl import SaslGate
from broker.tls_connection import TlsConnection
from broker.txn.service import TransactionService
from protocol import api as papi
from protocol.messages import ApiVersionsResponseApiKeys

if TYPE_CHECKING:
    from broker.tier import RemoteLogManager

log = logging.getLogger("chronolog.broker")

_perf = time.perf_counter
# Background summary building: slices of 2 ms with 2 ms for requests in between while
# there is work, then a look every second for batches appended since.
SUMMARY_SLICE_MS = 2.0
SUMMARY_GAP_S = 0.002
SUMMARY_IDLE_S = 1.0


class Broker:
    """The running broker: listener, connections, partitions and background tasks."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.partitions = PartitionManager(config)
        self.routes: dict[int, Route] = dispatch.table()
        if config.read_replica:
            from broker.read_replica import read_only_routes

            self.routes = read_only_routes(self.routes)
        self.connections: set[Connection] = set()
        self.per_ip: dict[str, int] = {}
        self.inflight: set[asyncio.Task[None]] = set()
        # Requests being served across all connections, against queued.max.requests /
        # queued.max.request.bytes, and the connections whose further requests wait.
        self.requests = RequestBudget(config.queued_max_requests,
                                      config.queued_max_request_bytes)
        self.stopping = False
        # Idle polling (see _idle_poll): when the latest request arrived, and the future
        # that wakes the poller once it sleeps.
        self.last_request = 0.0
        self.poll_wake: asyncio.Future[None] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self.listeners: list[Listener] = listeners(config)
        # Listener name -> the port actually bound (port 0 resolved).
        self.bound: dict[str, int] = {}
        self._lock: Any = None
        self.credentials: Any = None
        self._background: list[asyncio.Task[None]] = []
        self.cleaner: Any = None  # broker.cleaner_task.CleanerTask while the cleaner runs
        # The remote-log-manager (broker.tier.RemoteLogManager) when
        # remote.log.storage.system.enable is on; handlers test it for None.
        self.tier: RemoteLogManager | None = None
        self._udp: Any = None
        self._metrics_server: Any = None
        self._versions: dict[int, tuple[int, int]] = {}
        # API key -> (route, lowest, highest served version): one lookup per request.
        self.served: dict[int, tuple[Route, int, int]] = {
            key: (route, *self.version_range(key)) for key, route in self.routes.items()
        }
        self._advertised: list[ApiVersionsResponseApiKeys] | None = None
        self.loop: asyncio.AbstractEventLoop
        # Produce and Fetch frames served in slices between socket polls (broker/pump.py).
        self.pump: Pump
        # The group coordinator (``ctx.broker.groups``), opened with the partitions.
        self.groups: GroupCoordinator
        # The transaction coordinator (``ctx.broker.txns``), opened after the groups.
        self.txns: TransactionService
        # Authorization (broker.acl): None unless authorizer.class.name is set, so
        # handlers pay one attribute test when it is off.
        self.authorizer: Authorizer | None = None
        self.acl_store: AclStore | None = None
        # Client quotas (broker.quotas): loaded with the partitions; enforcement runs only
        # while some quota is configured (``quotas.active``).
        self.quotas = Quotas(QuotaConfigs(), config.quota_window_num,
                             config.quota_window_size_seconds)
        self.quota_path = Path(config.log_dirs) / "__chronolog" / QUOTA_FILE
        self.host = config.host
        self.port = config.port

    def sasl_gate(self, listener: str) -> SaslGate:
        """A new connection's SASL state on ``listener``."""
        from broker.security.plain import jaas_users

        cfg = self.config
        return SaslGate(
            mechanisms(cfg, listener),
            lambda: jaas_users(cfg, listener),
            self.credentials.get,
            cfg.connections_max_reauth_ms,
            cfg.connection_failed_authentication_delay_ms,
        )

    def advertised_for(self, listener: str) -> tuple[str, int]:
        """The (host, port) Metadata and FindCoordinator tell a client of ``listener``."""
        return self.config.advertised_host_port(self.bound.get(listener.upper(), self.port),
                                                listener)

    # ------------------------------------------------------------ versions

    def version_range(self, api_key: int) -> tuple[int, int]:
        """The versions we serve of ``api_key`` (what ApiVersions advertises)."""
        rng = self._versions.get(api_key)
        if rng is None:
            rng = served_versions(api_key)
            self._versions[api_key] = rng
        return rng

    def advertised_versions(self) -> list[ApiVersionsResponseApiKeys]:
        """ApiVersions' ``api_keys``: every API routed here, advertised min .. max.

        Produce is advertised from v0 though served from v3 (KAFKA-18659: librdkafka
        enables compression only when v0 is advertised).
        """
        if self._advertised is not None:
            return self._advertised
        out = []
        for key in sorted(self.routes):
            entry = papi.API_VERSIONS[key]  # type: ignore[index]
            out.append(ApiVersionsResponseApiKeys(api_key=key, min_version=int(entry.advertised_min),
                                                  max_version=int(entry.max_version)))
        self._advertised = out
        return out

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.requests.loop = self.loop
        self.pump = Pump(self.loop)
        pump = self.pump
        self.partitions.defer_wake = lambda job: pump.add(job, WAKE_COST_S)
        from broker.security.credentials import CredentialStore, DataDirLock

        self._lock = DataDirLock(self.config.data_dir)
        try:
            self.credentials = CredentialStore(self.config.data_dir)
            self.partitions.open(self.loop)
        except BaseException:
            self._lock.release()  # a failed start must not keep the data dir locked
            raise
        self.quota_path = self.partitions.state_dir / QUOTA_FILE
        self.quotas.configs = load_quotas(self.quota_path)
        self.quotas.changed()
        if self.config.authorizer_class_name:
            self.authorizer = Authorizer(
                [u.strip() for u in self.config.super_users.split(";") if u.strip()],
                self.config.allow_everyone_if_no_acl_found)
            self.acl_store = AclStore(self.partitions.state_dir, self.authorizer)
            log.info("authorizer on: %d ACLs, super users %s", len(self.authorizer),
                     sorted(self.authorizer.super_users) or "none")
        group_configs = GroupConfigs(self.partitions.state_dir, self.config)
        group_configs.load()
        self.groups = GroupCoordinator(self.config, self.partitions.group_offsets,
                                       topics=self.partitions, configs=group_configs)
        self.groups.start(self.loop)
        self.txns = TransactionService(self.partitions, self.groups,
                                       max_timeout_ms=self.config.transaction_max_timeout_ms)
        await self.txns.open()
        if self.config.remote_log_storage_system_enable:
            from broker.read_replica import ReadReplica
            from broker.tier import RemoteLogManager

            # Tiers attach before the listeners serve, so no read below a local log
            # start is ever answered without its remote half.
            self.tier = (ReadReplica if self.config.read_replica else RemoteLogManager)(
                self.partitions, self.config)
            try:
                await self.tier.open()
            except BaseException:
                await self.tier.close()
                self.partitions.close()
                self._lock.release()
                raise
        # The listeners are bound first (so port 0 resolves and a taken port fails early)
        # but accept only once UDP ingest and metrics run too: whoever waits for a
        # port to open finds the whole broker up.
        try:
            from broker.security.tls import server_context

            for lst in self.listeners:
                factory: Any
                if lst.tls:
                    ctx = server_context(self.config, lst.name, lst.protocol)
                    factory = lambda lst=lst, ctx=ctx: TlsConnection(self, lst, ctx)  # noqa: E731
                else:
                    factory = lambda lst=lst: Connection(self, lst)  # noqa: E731
                server = await self.loop.create_server(
                    factory, lst.host or None, lst.port,
                    reuse_address=True, backlog=1024, start_serving=False,
                )
                self._servers.append(server)
                self.bound[lst.name] = server.sockets[0].getsockname()[1]
            self._server = self._servers[0]
            sock = self._server.sockets[0]
            self.host, self.port = sock.getsockname()[:2]
            if self.config.udp_listeners:
                from broker.udp import start_udp_ingest

                self._udp = await start_udp_ingest(self)
            if self.config.metrics_listener:
                from broker.config import parse_host_port
                from broker.metrics import start_metrics_server

                mhost, mport = parse_host_port(self.config.metrics_listener, "metrics.listener")
                self._metrics_server = start_metrics_server(mhost, mport, self)
        except BaseException:
            await self._stop_extras()
            for server in self._servers:
                server.close()
            self.partitions.close()
            self._lock.release()
            raise
        self._start_background()
        # Everything allocated so far (modules, codecs, opened logs) lives as long as the
        # process: keep it out of the cyclic GC's generations so collections stay short.
        gc.freeze()
        for server in self._servers:
            await server.start_serving()
        log.info("chronolog broker ready on %s:%d (listeners: %s)", self.host, self.port,
                 ", ".join(f"{lst.name}://{lst.host}:{self.bound[lst.name]} ({lst.protocol})"
                           for lst in self.listeners))

    def _start_background(self) -> None:
        cfg = self.config
        self._background.append(self.loop.create_task(
            self._every(cfg.log_retention_check_interval_ms, self.partitions.enforce_retention,
                        "retention"), name="retention"))
        self._background.append(self.loop.create_task(
            self._every(cfg.log_flush_offset_checkpoint_interval_ms, self.partitions.checkpoint,
                        "checkpoint"), name="checkpoint"))
        if cfg.log_flush_scheduler_interval_ms < LONG_MAX:
            self._background.append(self.loop.create_task(
                self._every(cfg.log_flush_scheduler_interval_ms, self.partitions.flush_due,
                            "flush"), name="flush"))
        self._background.append(self.loop.create_task(self._summarize(), name="summaries"))
        self._background.append(self.loop.create_task(
            self._every_async(cfg.offsets_retention_check_interval_ms, self.groups.expire_offsets,
                              "offset expiry", first=True), name="offset-expiry"))
        if self.tier is not None:
            self.tier.start(self.loop)
        if cfg.log_cleaner_enable and cfg.log_cleaner_threads > 0:
            from broker.cleaner_task import CleanerTask

            self.cleaner = CleanerTask(self.partitions, cfg)
            self.cleaner.start(self.loop)
        self._background.append(self.loop.create_task(
            self._every_async(cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                              self.txns.abort_timed_out, "transaction timeout"),
            name="transaction-timeout"))
        if cfg.idle_poll_us > 0:
            self._background.append(self.loop.create_task(
                self._idle_poll(cfg.idle_poll_us / 1e6), name="idle-poll"))
        if cfg.connections_max_idle_ms >= 0:
            interval = max(10, min(cfg.connections_max_idle_ms // 4, 10_000))
            self._background.append(self.loop.create_task(
                self._every(interval, self._close_idle, "idle"), name="idle"))

    async def _every(self, interval_ms: int, job: Any, what: str) -> None:
        """Run ``job(now_ms)`` every interval; a failure is logged and the schedule goes on."""
        delay = min(interval_ms, 2**31) / 1000.0
        while True:
            await asyncio.sleep(delay)
            try:
                job(int(time.time() * 1000))
            except Exception:
                log.exception("background %s job failed", what)

    async def _every_async(self, interval_ms: int, job: Any, what: str, *, first: bool = False) -> None:
        """``_every`` for a coroutine job; ``first`` runs it once at start too."""
        delay = min(interval_ms, 2**31) / 1000.0
        if not first:
            await asyncio.sleep(delay)
        while True:
            try:
                await job(int(time.time() * 1000))
            except Exception:
                log.exception("background %s job failed", what)
            await asyncio.sleep(delay)

    async def _idle_poll(self, window: float) -> None:
        """Keep the event loop polling (zero-timeout waits) for ``window`` seconds after
        the latest request, then sleep until the next one arrives.

        On this kind of machine a CPU that goes idle between a response and the next
        request costs that request tens of µs to wake up (measured: a no-op round
        trip 101 -> 59 µs p50 with a 200 µs window). Seastar (Redpanda's reactor)
        does the same with its idle-poll time. The spin is bounded: a gap longer than
        the window costs at most the window in CPU.
        """
        loop = self.loop
        while not self.stopping:
            if _perf() - self.last_request < window:
                await asyncio.sleep(0)  # one loop pass with a zero-timeout poll
                continue
            wake = loop.create_future()
            self.poll_wake = wake
            await wake

    async def _summarize(self) -> None:
        """Build lookup summaries in short slices between requests, then keep up with appends."""
        while True:
            try:
                done = self.partitions.summarize_step(SUMMARY_SLICE_MS)
            except Exception:
                log.exception("background summary build failed")
                done = True
            await asyncio.sleep(SUMMARY_IDLE_S if done else SUMMARY_GAP_S)

    def _close_idle(self, now_ms: int) -> None:
        limit = self.config.connections_max_idle_ms / 1000.0
        now = time.monotonic()
        for conn in list(self.connections):
            if conn.idle and now - conn.last_active > limit:
                conn.close(f"idle for more than {self.config.connections_max_idle_ms} ms "
                           f"(connections.max.idle.ms)")

    async def _stop_udp(self) -> None:
        """Stop UDP ingest, appending what it holds, if running."""
        if self._udp is not None:
            try:
                await self._udp.close()
            except Exception:
                log.exception("UDP ingest did not close cleanly")
            self._udp = None

    async def _stop_extras(self) -> None:
        """Stop UDP ingest (appending what it holds) and the metrics endpoint, if running."""
        await self._stop_udp()
        if self._metrics_server is not None:
            try:
                await asyncio.to_thread(self._metrics_server.close)
            except Exception:
                log.exception("metrics endpoint did not close cleanly")
            self._metrics_server = None

    async def close(self, timeout: float = 30.0) -> None:
        """Graceful stop: no new connections or requests, finish in-flight ones, seal the logs."""
        if self.stopping:
            return
        self.stopping = True
        log.info("broker stopping: %d connections, %d requests in flight",
                 len(self.connections), len(self.inflight))
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn._update_reading()
        await self._stop_udp()
        self.pump.drain()  # requests already read are served, as Kafka's shutdown does
        self.partitions.wake_all()
        self.groups.close()  # parked JoinGroup/SyncGroup answer NOT_COORDINATOR now
        if self.inflight:
            done, pending = await asyncio.wait(set(self.inflight), timeout=timeout)
            for task in pending:
                task.cancel()
        if self.cleaner is not None:
            await self.cleaner.close()
        if self.tier is not None:
            await self.tier.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn._write_out()
                conn.transport.close()  # flushes what is buffered, then closes
        await asyncio.sleep(0)
        await self._stop_extras()
        self.pump.drain()
        self.txns.close()
        self.partitions.close()
        forget_store(self.partitions.state_dir)
        if self._lock is not None:
            self._lock.release()
        log.info("broker stopped cleanly")


def served_versions(api_key: int) -> tuple[int, int]:
    """Our served range of an API, from protocol.api's table; (0, -1) when not in it."""
    entry = papi.API_VERSIONS.get(api_key)  # type: ignore[call-overload]
    if entry is None:
        return 0, -1
    return int(entry.min_version), int(entry.max_version)


async def serve(config: BrokerConfig) -> int:
    """Run a broker until SIGTERM/SIGINT; returns the exit code."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    broker = Broker(config)
    await broker.start()
    try:
        await stop.wait()
    finally:
        await broker.close()
    return 0


def run(config: BrokerConfig) -> int:
    """Blocking entry point used by ``python -m broker`` and ``chronolog serve``."""
    import uvloop

    return uvloop.run(serve(config))


def run_from_args(args: argparse.Namespace) -> int:
    """Load the configuration (exit 2 with a message if it is bad) and run until signalled."""
    _setup_logging(args.log_format, args.log_level)
    try:
        config = BrokerConfig.load(
            args.properties, args.override, data_dir=args.data_dir, host=args.host, port=args.port,
            read_replica=getattr(args, "read_replica", None),
        )
    except ConfigError as exc:
        log.error("invalid configuration: %s", exc)
        print(f"chronolog: invalid configuration: {exc}", file=sys.stderr)
        return 2
    missing = _missing_udp_modules(config)
    if missing:
        # The base install (`make run`, the slim image) has no PyArrow: say so before binding.
        msg = (f"udp.listeners is set, and UDP ingest needs {' and '.join(missing)}, which this "
               "install lacks: pip install 'chronolog[arrow]' (in a checkout: make install; "
               "in a container: the full image, docker/Dockerfile --target full)")
        log.error("%s", msg)
        print(f"chronolog: {msg}", file=sys.stderr)
        return 2
    try:
        return run(config)
    except OSError as exc:
        log.error("broker could not start: %s", exc)
        return 1


def _missing_udp_modules(config: BrokerConfig) -> list[str]:
    """The column-wise batch builder's modules UDP ingest would import, if it is on and
    they are not installed (the ``arrow`` extra)."""
    if not config.udp_listeners:
        return []
    return [name for name in ("pyarrow", "numpy") if importlib.util.find_spec(name) is None]


def _setup_logging(fmt: str, level: str) -> None:
    setup_logging(fmt, level)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="Run the Chronolog broker.")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
