"""DescribeCluster (key 60): versions 0-2, flexible in all.

Invariants: v1 adds EndpointType (1 = brokers, 2 = controllers), v2 adds
IncludeFencedBrokers to the request and IsFenced per broker; authorized operations
are ``-2147483648`` unless asked for.
"""

from __future__ import annotations

from protocol.schema import F, arr, message

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

REQUEST = message(
    "DescribeClusterRequest",
    F("include_cluster_authorized_operations", "bool"),
    F("endpoint_type", "int8", "1+", default=ENDPOINT_BROKERS),
    F("include_fenced_brokers", "bool", "2+"),
)

RESPONSE = message(
    "DescribeClusterResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("endpoint_type", "int8", "1+", default=ENDPOINT_BROKERS),
    F("cluster_id", "string"),
    F("controller_id", "int32", default=-1),
    F("brokers", arr(
        F("broker_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", nullable="0+", default=None),
        F("is_fenced", "bool", "2+"),
    )),
    F("cluster_authorized_operations", "int32", default=AUTHORIZED_OPERATIONS_OMITTED),
)
