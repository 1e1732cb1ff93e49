"""SyncClient is the blocking twin of Client: every public method of Client exists on
SyncClient with the same parameters (names, kinds, defaults, annotations), so the two
cannot drift apart when one of them changes."""

from __future__ import annotations

import inspect

import pytest

from client.aio import Client
from client.sync import SyncClient

# Async-only plumbing for tools built on Client (client/admin.py, client/groups.py, the
# console, the batching Producer); a SyncClient user reaches it through ``.aio``.
ASYNC_ONLY = {"request", "connection", "broker_versions", "use_version", "brokers",
              "add_broker", "forget_topic", "cluster_metadata", "send_produce",
              "wait_produce"}


def _public(cls: type) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def _params(cls: type, name: str) -> list[tuple[str, object, object, object]]:
    sig = inspect.signature(getattr(cls, name))
    return [(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values()]


def test_every_public_client_method_has_a_sync_twin() -> None:
    missing = [n for n in _public(Client) if n not in ASYNC_ONLY and not hasattr(SyncClient, n)]
    assert missing == []


def test_async_only_names_are_public_client_methods() -> None:
    """The exception list names only what Client has (a rename shows up here)."""
    assert sorted(ASYNC_ONLY - set(_public(Client))) == []


@pytest.mark.parametrize("name", [n for n in _public(Client) if n not in ASYNC_ONLY
                                  and callable(getattr(Client, n))])
def test_sync_signature_equals_async_signature(name: str) -> None:
    assert _params(SyncClient, name) == _params(Client, name)
