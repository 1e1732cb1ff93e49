"""AlterClientQuotas (49), v0-1: set or remove quota values per entity, durably.

Invariants (ClientQuotaControlManager): each entry is answered on its own; a bad
entity (empty, duplicate type, unknown type, ip mixed with others), an unknown key,
a key that does not apply to the entity, a value <= 0 or a fractional value of an
integral key is INVALID_REQUEST (42) and changes nothing of that entry. Valid
entries are written to disk, then enforced at once. ValidateOnly applies nothing.
With an authorizer, ALTER_CONFIGS on the cluster is needed (else 31 per entry).
"""

from __future__ import annotations

from typing import Any

from broker.quotas.model import KEYS, Entity, InvalidQuota, check_value, entity
from broker.quotas.store import save
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

Entry = m.AlterClientQuotasResponseEntries


def _entity_out(e: m.AlterClientQuotasRequestEntries) -> list[m.AlterClientQuotasResponseEntriesEntity]:
    return [m.AlterClientQuotasResponseEntriesEntity(entity_type=c.entity_type, entity_name=c.entity_name)
            for c in e.entity]


async def handle(request: Request[m.AlterClientQuotasRequest], ctx: Any) -> m.AlterClientQuotasResponse:
    quotas = ctx.broker.quotas
    configs = quotas.configs
    out = []
    changes: dict[Entity, dict[str, float]] = {}
    for e in request.body.entries:
        code, message = 0, None
        try:
            ent = entity((c.entity_type, c.entity_name) for c in e.entity)
            values = dict(changes.get(ent, configs.entries.get(ent, {})))
            for op in e.ops:
                if op.remove:
                    if op.key not in KEYS:
                        raise InvalidQuota(f"unknown quota key {op.key!r}")
                    values.pop(op.key, None)
                else:
                    check_value(ent, op.key, op.value)
                    values[op.key] = float(op.value)
            changes[ent] = values
        except InvalidQuota as exc:
            code, message = int(ErrorCode.INVALID_REQUEST), str(exc)
        out.append(Entry(error_code=code, error_message=message, entity=_entity_out(e)))
    if changes and not request.body.validate_only:
        before = dict(configs.entries)
        for ent, values in changes.items():
            configs.set(ent, values)
        try:
            save(ctx.broker.quota_path, configs)
        except OSError as exc:
            configs.replace(before)
            return m.AlterClientQuotasResponse(throttle_time_ms=0, entries=[
                Entry(entity=r.entity, error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR),
                      error_message=f"cannot persist the quotas: {exc}") for r in out])
        quotas.changed()
    return m.AlterClientQuotasResponse(throttle_time_ms=0, entries=out)


def error_body(request: Request[m.AlterClientQuotasRequest], code: int) -> m.AlterClientQuotasResponse:
    return m.AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        Entry(error_code=code, error_message=None, entity=_entity_out(e)) for e in request.body.entries])
