"""DescribeAcls (29), v0-3: the ACLs one filter selects, grouped by resource pattern.

Invariants: no authorizer -> SECURITY_DISABLED (54); the caller needs DESCRIBE on
the cluster, else CLUSTER_AUTHORIZATION_FAILED (31); a filter with UNKNOWN codes is
INVALID_REQUEST (42). v0 filters have no pattern type and mean LITERAL.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import DESCRIBE, AclFilter, InvalidAcl, validate_filter
from broker.acl.check import acl_api_error
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def acl_filter(f: Any) -> AclFilter:
    """A request filter (Describe/DeleteAcls share its fields) as an :class:`AclFilter`."""
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                     f.principal_filter, f.host_filter, f.operation, f.permission_type)


async def handle(request: Request[m.DescribeAclsRequest], ctx: Any) -> m.DescribeAclsResponse:
    refused = acl_api_error(ctx, DESCRIBE)
    if refused:
        return error_body(request, refused)
    authz = ctx.broker.authorizer
    flt = acl_filter(request.body)
    try:
        validate_filter(flt)
    except InvalidAcl as exc:
        answer = error_body(request, int(ErrorCode.INVALID_REQUEST))
        answer.error_message = str(exc)
        return answer
    groups: dict[tuple[int, str, int], list[m.DescribeAclsResponseResourcesAcls]] = {}
    for b in authz.matching(flt):
        groups.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            m.DescribeAclsResponseResourcesAcls(principal=b.principal, host=b.host, operation=b.operation,
                                                permission_type=b.permission))
    resources = [m.DescribeAclsResponseResources(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
                 for (t, n, p), acls in groups.items()]
    return m.DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


def error_body(request: Request[m.DescribeAclsRequest], code: int) -> m.DescribeAclsResponse:
    return m.DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=None, resources=[])
