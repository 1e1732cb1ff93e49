"""DescribeClientQuotas (48), v0-1: the configured quotas whose entity matches the filter.

Invariants: match type 0 = that exact name, 1 = the default entity, 2 = any; with
Strict an entity may have no components beyond the filter's. A bad filter (exact
without a name, default/any with one, a type twice, ip with others) is
INVALID_REQUEST (42) with null entries; an unknown entity type is UNSUPPORTED_VERSION
(35). With an authorizer, DESCRIBE_CONFIGS on the cluster is needed (else 31).
"""

from __future__ import annotations

from typing import Any

from broker.quotas.model import (
    InvalidQuota,
    UnknownEntityType,
    check_components,
    describe_matches,
)
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


async def handle(request: Request[m.DescribeClientQuotasRequest], ctx: Any) -> m.DescribeClientQuotasResponse:
    body = request.body
    components = [(c.entity_type, c.match_type, c.match) for c in body.components]
    try:
        check_components(components)
    except UnknownEntityType as exc:
        return _refused(request, int(ErrorCode.UNSUPPORTED_VERSION), str(exc))
    except InvalidQuota as exc:
        return _refused(request, int(ErrorCode.INVALID_REQUEST), str(exc))
    entries = []
    for ent, values in ctx.broker.quotas.configs.entries.items():
        if values and describe_matches(ent, components, bool(body.strict)):
            entries.append(m.DescribeClientQuotasResponseEntries(
                entity=[m.DescribeClientQuotasResponseEntriesEntity(entity_type=t, entity_name=n) for t, n in ent],
                quota_values=[m.DescribeClientQuotasResponseEntriesQuotaValues(key=k, value=v)
                              for k, v in sorted(values.items())],
            ))
    return m.DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def _refused(request: Request[m.DescribeClientQuotasRequest], code: int,
             message: str) -> m.DescribeClientQuotasResponse:
    answer = error_body(request, code)
    answer.error_message = message
    return answer


def error_body(request: Request[m.DescribeClientQuotasRequest], code: int) -> m.DescribeClientQuotasResponse:
    return m.DescribeClientQuotasResponse(throttle_time_ms=0, error_code=code, error_message=None, entries=None)
