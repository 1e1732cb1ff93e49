"""DescribeCluster (60), v0-2: this broker is the whole cluster and its controller.

Invariants: Brokers = [this node with its advertised host and port]; ControllerId = this
node (it is in Brokers, as Kafka requires); EndpointType 2 (controllers) ->
MISMATCHED_ENDPOINT_TYPE (114), another unknown type -> UNSUPPORTED_ENDPOINT_TYPE (115);
ClusterAuthorizedOperations only when asked: the CLUSTER operations this principal may
do (every one without an authorizer, Kafka's answer without ACLs), else -2147483648.
"""

from __future__ import annotations

from broker.acl.authorizer import CLUSTER
from broker.acl.check import authorized_operations
from broker.dispatch import RequestContext
from protocol import describe_cluster as dcl
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode


def _answer(code: int, message: str | None, endpoint_type: int) -> m.DescribeClusterResponse:
    return m.DescribeClusterResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                     endpoint_type=endpoint_type, cluster_id="", controller_id=-1, brokers=[],
                                     cluster_authorized_operations=dcl.AUTHORIZED_OPERATIONS_OMITTED)


async def handle(request: Request[m.DescribeClusterRequest], ctx: RequestContext) -> m.DescribeClusterResponse:
    body = request.body
    etype = body.endpoint_type if request.api_version >= 1 else dcl.ENDPOINT_BROKERS
    if etype == dcl.ENDPOINT_CONTROLLERS:
        return _answer(int(ErrorCode.MISMATCHED_ENDPOINT_TYPE),
                       "The request was sent to an endpoint of type BROKER, but we wanted an "
                       "endpoint of type CONTROLLER", etype)
    if etype != dcl.ENDPOINT_BROKERS:
        return _answer(int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
                       f"Unsupported endpoint type {etype}", etype)
    node = ctx.config.node_id
    host, port = ctx.broker.advertised_for(ctx.listener)
    ops = (authorized_operations(ctx, CLUSTER) if body.include_cluster_authorized_operations
           else dcl.AUTHORIZED_OPERATIONS_OMITTED)
    answer = _answer(0, None, etype)
    answer.cluster_id = ctx.partitions.cluster_id
    answer.controller_id = node
    answer.brokers = [m.DescribeClusterResponseBrokers(broker_id=node, host=host, port=port, rack=None,
                                                       is_fenced=False)]
    answer.cluster_authorized_operations = ops
    return answer


def error_body(request: Request[m.DescribeClusterRequest], code: int) -> m.DescribeClusterResponse:
    return _answer(code, "unexpected server error", dcl.ENDPOINT_BROKERS)
