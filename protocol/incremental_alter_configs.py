"""IncrementalAlterConfigs (key 44, KIP-339): versions 0-1, flexible from 1.

Invariant: each config carries an operation (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT);
resource types are ``protocol.describe_configs``'s ids.
"""

from __future__ import annotations

from protocol import alter_configs
from protocol.common import RESOURCE
from protocol.schema import F, arr, message

OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3

REQUEST = message(
    "IncrementalAlterConfigsRequest",
    F("resources", arr(
        *RESOURCE,
        F("configs", arr(
            F("name", "string"),
            F("config_operation", "int8"),
            F("value", "string", nullable="0+"),
        )),
    )),
    F("validate_only", "bool"),
)

# The same answer as the legacy AlterConfigs: one result per resource.
RESPONSE = message("IncrementalAlterConfigsResponse", *alter_configs.RESPONSE.fields)
