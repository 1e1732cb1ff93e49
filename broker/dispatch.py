"""The one table from Kafka API key to the handler that serves it.

Invariants:
- Every handler is a module in ``broker/handlers/`` exposing
  ``async def handle(request, ctx) -> body | None``; ``None`` means "send no
  response" (only acks=0 Produce uses it).
- A handler module may also expose ``error_body(request, code) -> body``: the
  response the API carries when the handler itself failed unexpectedly
  (UNKNOWN_SERVER_ERROR in every partition/topic). Without it, a failed request
  closes its connection, as Kafka does when it cannot answer.
- An API of ``broker.acl.check.REQUEST_CHECKS`` (one ACL check on the whole request,
  e.g. READ on the group for Heartbeat) is checked here, before its handler runs: a
  refused request is answered with the module's ``error_body`` and the check's error
  code, and the handler never sees it. Such a module must have ``error_body``.
- Only keys whose handler module imports are routed, and ApiVersions advertises
  exactly the routed keys, so a client is never told about an API we cannot serve.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.acl.check import REQUEST_CHECKS, request_error
from protocol.api import API_VERSIONS

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.partitions import PartitionManager
    from broker.server import Broker

log = logging.getLogger("chronolog.broker")

Handler = Callable[[Any, "RequestContext"], Awaitable[Any]]
ErrorBody = Callable[[Any, int], Any]

# API key -> handler module name under broker.handlers.
HANDLER_MODULES: dict[int, str] = {
    0: "produce",
    1: "fetch",
    2: "list_offsets",
    3: "metadata",
    8: "offset_commit",
    9: "offset_fetch",
    10: "find_coordinator",
    11: "join_group",
    12: "heartbeat",
    13: "leave_group",
    14: "sync_group",
    15: "describe_groups",
    16: "list_groups",
    17: "sasl_handshake",
    18: "api_versions",
    19: "create_topics",
    20: "delete_topics",
    21: "delete_records",
    22: "init_producer_id",
    23: "offset_for_leader_epoch",
    24: "add_partitions_to_txn",
    25: "add_offsets_to_txn",
    26: "end_txn",
    27: "write_txn_markers",
    28: "txn_offset_commit",
    29: "describe_acls",
    30: "create_acls",
    31: "delete_acls",
    32: "describe_configs",
    33: "alter_configs",
    35: "describe_log_dirs",
    36: "sasl_authenticate",
    37: "create_partitions",
    42: "delete_groups",
    43: "elect_leaders",
    44: "incremental_alter_configs",
    45: "alter_partition_reassignments",
    46: "list_partition_reassignments",
    47: "offset_delete",
    48: "describe_client_quotas",
    49: "alter_client_quotas",
    50: "describe_user_scram_credentials",
    51: "alter_user_scram_credentials",
    60: "describe_cluster",
    61: "describe_producers",
    65: "describe_transactions",
    66: "list_transactions",
    68: "consumer_group_heartbeat",
    69: "consumer_group_describe",
    75: "describe_topic_partitions",
    10000: "plan_time_window",  # Chronolog's own (protocol/plan_time_window.py)
    10001: "count_time_windows",  # Chronolog's own (protocol/count_time_windows.py)
}


@dataclass(slots=True)
class RequestContext:
    """What a handler may use: the broker, its config and partitions, and who is asking."""

    broker: Broker
    config: BrokerConfig
    partitions: PartitionManager
    peer: str
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    # Set by a handler that must close its connection after answering (or, with no
    # answer, at its turn): acks=0 Produce with an error, as Kafka does.
    close_after: str | None = None
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"


@dataclass(frozen=True)
class Route:
    name: str
    handle: Handler
    error_body: ErrorBody | None


def build_table() -> dict[int, Route]:
    """Import every handler module of the table; one that cannot be imported is an
    error, not an API quietly left unserved. A handler that needs an optional extra
    says so with its AVAILABLE / UNAVAILABLE_WHY flags and is not routed."""
    table: dict[int, Route] = {}
    for key, name in HANDLER_MODULES.items():
        module = importlib.import_module(f"broker.handlers.{name}")
        if not getattr(module, "AVAILABLE", True):  # it needs an extra that is not installed
            log.info("API key %d (%s) not served: %s", key, name, module.UNAVAILABLE_WHY)
            continue
        entry = API_VERSIONS.get(key)  # type: ignore[call-overload]
        api_name = entry.name if entry is not None else name
        handle, error_body = module.handle, getattr(module, "error_body", None)
        if key in REQUEST_CHECKS:
            if error_body is None:
                raise TypeError(f"broker.handlers.{name} has a request check but no error_body")
            handle = _checked(handle, error_body)
        table[key] = Route(api_name, handle, error_body)
    return table


def _checked(handle: Handler, error_body: ErrorBody) -> Handler:
    """``handle`` behind its API's whole-request ACL check (``REQUEST_CHECKS``)."""

    async def checked(request: Any, ctx: RequestContext) -> Any:
        refused = request_error(request, ctx)
        if refused:
            return error_body(request, refused)
        return await handle(request, ctx)

    return checked


_TABLE: dict[int, Route] | None = None


def table() -> dict[int, Route]:
    """The routing table, built once per process."""
    global _TABLE
    if _TABLE is None:
        _TABLE = build_table()
    return _TABLE
