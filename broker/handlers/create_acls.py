"""CreateAcls (30), v0-3: add ACLs, durably, one result per creation in order.

Invariants (AclControlManager): no authorizer -> SECURITY_DISABLED (54) for each;
the caller needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED (31) for
each; a creation Kafka refuses (UNKNOWN/ANY/MATCH codes, empty name, a CLUSTER name
other than ``kafka-cluster``, an unparsable principal) gets INVALID_REQUEST (42)
alone; a duplicate succeeds. The valid ones are written to disk before the answer.
"""

from __future__ import annotations

from typing import Any

from broker.acl.authorizer import ALTER, AclBinding, InvalidAcl, validate
from broker.acl.check import acl_api_error
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _result(code: int, message: str | None = None) -> m.CreateAclsResponseResults:
    return m.CreateAclsResponseResults(error_code=code, error_message=message)


async def handle(request: Request[m.CreateAclsRequest], ctx: Any) -> m.CreateAclsResponse:
    creations = request.body.creations
    refused = acl_api_error(ctx, ALTER)
    if refused:
        return error_body(request, refused)
    store = ctx.broker.acl_store
    results = []
    valid = []
    for c in creations:
        b = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                       c.host, c.operation, c.permission_type)
        try:
            validate(b)
        except InvalidAcl as exc:
            results.append(_result(int(ErrorCode.INVALID_REQUEST), str(exc)))
            continue
        valid.append(b)
        results.append(_result(0))
    if valid:
        try:
            store.add(valid)
        except OSError as exc:
            msg = f"cannot persist the ACLs: {exc}"
            results = [r if r.error_code else _result(int(ErrorCode.UNKNOWN_SERVER_ERROR), msg)
                       for r in results]
    return m.CreateAclsResponse(throttle_time_ms=0, results=results)


def error_body(request: Request[m.CreateAclsRequest], code: int) -> m.CreateAclsResponse:
    return m.CreateAclsResponse(throttle_time_ms=0, results=[_result(code) for _ in request.body.creations])
