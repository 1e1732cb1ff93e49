"""Connections, API versions and metadata: what every other part of the client stands on."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

import protocol.api as api
from client.connection import IDLE_POLL_US, BrokerConnection, parse_bootstrap, poll_window
from client.model import (
    _API_NAMES,
    API_VERSIONS,
    CLIENT_VERSIONS,
    METADATA,
    METADATA_MAX_AGE_S,
    _raise_for,
    _TopicMeta,
)
from client.partitioner import StickyPartitioner
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from client.security import ClientSecurity

log = logging.getLogger("client.aio")
T = TypeVar("T")

class ClientCore:
    """The connection and metadata part of :class:`client.aio.Client`."""

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

    @classmethod
    async def connect(
        cls,
        bootstrap: str = "127.0.0.1:9092",
        *,
        client_id: str = "chronolog",
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
        idle_poll_us: int = IDLE_POLL_US,
    ) -> Self:
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

    async def __aenter__(self) -> Self:
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

    async def request(self, api_key: int, body: dict[str, Any], node_id: int | None = None) -> Any:
        """Send ``body`` as API ``api_key`` at its negotiated version (to broker
        ``node_id``, else any) and return the decoded answer: what the admin and group
        tools use for the APIs this class has no method for."""
        return await self._request(api_key, body, node_id)

    async def connection(self, node_id: int | None = None) -> BrokerConnection:
        """The connection to broker ``node_id`` (None: the bootstrap connection)."""
        return await (self._any_conn() if node_id is None else self._conn_for(node_id))

    def broker_versions(self, api_key: int) -> tuple[int, int] | None:
        """The (min, max) version of ``api_key`` the broker announced, or None."""
        return self._broker_ranges.get(api_key)

    def use_version(self, api_key: int, lo: int, hi: int) -> int:
        """Negotiate ``api_key`` for a caller that speaks versions ``lo..hi`` (capped by
        ``protocol``'s schema) unless already negotiated; returns the version, or raises
        UNSUPPORTED_VERSION naming both ranges."""
        if api_key in self._versions:
            return self._versions[api_key]
        ours = api.API_VERSIONS[api.ApiKey(api_key)]
        lo, hi = max(lo, ours.min_version), min(hi, ours.max_version)
        broker = self._broker_ranges.get(api_key)
        if broker is None or min(hi, broker[1]) < max(lo, broker[0]):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                             f"{ours.name}: client supports v{lo}-v{hi}, broker "
                             + (f"v{broker[0]}-v{broker[1]}" if broker else "does not support it"))
        self._versions[api_key] = min(hi, broker[1])
        return self._versions[api_key]

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        """node id -> (host, port) of every broker seen in Metadata or FindCoordinator; a copy."""
        return dict(self._brokers)

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        """Remember a broker's address (a coordinator FindCoordinator named) if not known."""
        self._brokers.setdefault(node_id, (host, port))

    def forget_topic(self, topic: str) -> None:
        """Drop ``topic``'s cached metadata (after deleting or re-creating it)."""
        self._topics.pop(topic, None)

    async def cluster_metadata(self, topics: Sequence[str] | None = None) -> dict[str, Any]:
        """The Metadata answer (brokers included) for ``topics``; None: every topic,
        []: brokers only. Refreshes the client's cached metadata too."""
        return await self._metadata(topics)

    async def _request(self, api_key: int, body: dict[str, Any], node_id: int | None = None) -> Any:
        version = self.api_version(api_key)
        conn = await (self._any_conn() if node_id is None else self._conn_for(node_id))
        return await conn.request(api_key, version, body)

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
