"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31): versions 0-3, flexible from 2
(CreateAcls/DescribeAcls/DeleteAcls{Request,Response}.json).

Invariants: v0 has no pattern type (it means LITERAL, Kafka's default 3); v3 only
adds the USER resource type (a value, not a field). Resource types, pattern
types, operations and permission types are plain int8 codes here; what they mean
is the authorizer's rule (``broker.acl.authorizer``).
"""

from __future__ import annotations

from protocol.common import ERROR
from protocol.schema import F, arr, message

_FILTER = (
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", nullable="0+"),
    F("host_filter", "string", nullable="0+"),
    F("operation", "int8"),
    F("permission_type", "int8"),
)

CREATE_REQUEST = message(
    "CreateAclsRequest",
    F("creations", arr(
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("resource_pattern_type", "int8", "1+", default=3),
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    )),
)

CREATE_RESPONSE = message(
    "CreateAclsResponse",
    F("throttle_time_ms", "int32"),
    F("results", arr(*ERROR)),
)

DESCRIBE_REQUEST = message("DescribeAclsRequest", *_FILTER)

DESCRIBE_RESPONSE = message(
    "DescribeAclsResponse",
    F("throttle_time_ms", "int32"),
    *ERROR,
    F("resources", arr(
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("pattern_type", "int8", "1+", default=3),
        F("acls", arr(
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        )),
    )),
)

DELETE_REQUEST = message("DeleteAclsRequest", F("filters", arr(*_FILTER)))

DELETE_RESPONSE = message(
    "DeleteAclsResponse",
    F("throttle_time_ms", "int32"),
    F("filter_results", arr(
        *ERROR,
        F("matching_acls", arr(
            *ERROR,
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", "1+", default=3),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        )),
    )),
)
