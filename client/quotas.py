"""Client quota admin calls (DescribeClientQuotas, AlterClientQuotas, KIP-546) on a
connected :class:`Client`. An entity is a dict ``{"user": "alice", "client-id": None}``
(None = the default entity of that type)."""

from __future__ import annotations

from typing import Any

from client.admin import _call, _raise
from client.aio import Client
from protocol.api import ApiKey

Entity = dict[str, "str | None"]


def _entity(e: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in sorted(e.items())]


async def alter_quotas(client: Client, entity: Entity, set_values: dict[str, float],
                       remove: tuple[str, ...] = (), validate_only: bool = False) -> None:
    ops = ([{"key": k, "value": float(v), "remove": False} for k, v in set_values.items()]
           + [{"key": k, "value": 0.0, "remove": True} for k in remove])
    resp = await _call(client, ApiKey.ALTER_CLIENT_QUOTAS,
                       {"entries": [{"entity": _entity(entity), "ops": ops}],
                        "validate_only": validate_only})
    for r in resp.entries:
        _raise(r.error_code, f"alter quotas of {entity}", r.error_message)


async def describe_quotas(client: Client, match: Entity | None = None,
                          strict: bool = False) -> list[tuple[Entity, dict[str, float]]]:
    """Quotas whose entity matches: ``{"user": "a"}`` exact, ``{"user": None}`` the
    default; no ``match`` = every entity."""
    components = [{"entity_type": t, "match_type": 1 if n is None else 0, "match": n}
                  for t, n in sorted((match or {}).items())]
    resp = await _call(client, ApiKey.DESCRIBE_CLIENT_QUOTAS,
                       {"components": components, "strict": strict})
    _raise(resp.error_code, "describe quotas", resp.error_message)
    return [({c.entity_type: c.entity_name for c in e.entity},
             {v.key: v.value for v in e.quota_values}) for e in resp.entries or []]
