"""DeleteAcls (31), v0-3: remove the ACLs each filter selects, durably.

Invariants: no authorizer -> SECURITY_DISABLED (54) per filter; the caller needs
ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED (31) per filter; a filter
with UNKNOWN codes is INVALID_REQUEST (42). Each filter lists what it removed; an
ACL two filters select is listed by both and removed once.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import ALTER, AclBinding, InvalidAcl, validate_filter
from broker.acl.check import acl_api_error
from broker.handlers.describe_acls import acl_filter
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

Result = m.DeleteAclsResponseFilterResults


def _matching(b: AclBinding) -> m.DeleteAclsResponseFilterResultsMatchingAcls:
    return m.DeleteAclsResponseFilterResultsMatchingAcls(
        error_code=0, error_message=None, resource_type=b.resource_type,
        resource_name=b.resource_name, pattern_type=b.pattern_type,
        principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission)


async def handle(request: Request[m.DeleteAclsRequest], ctx: Any) -> m.DeleteAclsResponse:
    refused = acl_api_error(ctx, ALTER)
    if refused:
        return error_body(request, refused)
    store = ctx.broker.acl_store
    results = []
    gone: set[AclBinding] = set()
    for f in request.body.filters:
        flt = acl_filter(f)
        try:
            validate_filter(flt)
        except InvalidAcl as exc:
            results.append(Result(error_code=int(ErrorCode.INVALID_REQUEST), error_message=str(exc),
                                  matching_acls=[]))
            continue
        found = store.authorizer.matching(flt)
        gone.update(found)
        results.append(Result(error_code=0, error_message=None, matching_acls=[_matching(b) for b in found]))
    if gone:
        try:
            store.remove(sorted(gone))
        except OSError as exc:
            return m.DeleteAclsResponse(throttle_time_ms=0, filter_results=[
                Result(error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR),
                       error_message=f"cannot persist the ACLs: {exc}", matching_acls=[])
                for _ in request.body.filters])
    return m.DeleteAclsResponse(throttle_time_ms=0, filter_results=results)


def error_body(request: Request[m.DeleteAclsRequest], code: int) -> m.DeleteAclsResponse:
    return m.DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        Result(error_code=code, error_message=None, matching_acls=[]) for _ in request.body.filters])
