"""DescribeConfigs (key 32): versions 0-4, flexible from 4.

Invariants: ``configuration_keys`` null means every config of the resource;
v0 answers carry ``is_default`` and no source, v1+ carry ``config_source`` and
``synonyms`` (IncludeSynonyms is a v1+ request field), v3+ add the config's
data type and, when IncludeDocumentation asks for it, its documentation.
Resource types, config sources and config types are plain int8 values here
(the constants below are Kafka's ids); which ones a broker serves is its rule.
"""

from __future__ import annotations

from protocol.common import ERROR, RESOURCE
from protocol.schema import F, arr, message

# ConfigResource.Type ids (the request's ResourceType).
RESOURCE_UNKNOWN = 0
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32

# DescribeConfigsResponse.ConfigSource ids.
SOURCE_UNKNOWN = 0
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
SOURCE_DYNAMIC_GROUP_CONFIG = 8

# DescribeConfigsResponse.ConfigType ids (v3+).
TYPE_UNKNOWN = 0
TYPE_BOOLEAN = 1
TYPE_STRING = 2
TYPE_INT = 3
TYPE_SHORT = 4
TYPE_LONG = 5
TYPE_DOUBLE = 6
TYPE_LIST = 7
TYPE_CLASS = 8
TYPE_PASSWORD = 9

REQUEST = message(
    "DescribeConfigsRequest",
    F("resources", arr(
        *RESOURCE,
        F("configuration_keys", "[]string", nullable="0+"),
    )),
    F("include_synonyms", "bool", "1+"),
    F("include_documentation", "bool", "3+"),
)

RESPONSE = message(
    "DescribeConfigsResponse",
    F("throttle_time_ms", "int32"),
    F("results", arr(
        *ERROR,
        *RESOURCE,
        F("configs", arr(
            F("name", "string"),
            F("value", "string", nullable="0+"),
            F("read_only", "bool"),
            F("is_default", "bool", "0"),
            F("config_source", "int8", "1+", default=-1),
            F("is_sensitive", "bool"),
            F("synonyms", arr(
                F("name", "string", "1+"),
                F("value", "string", "1+", nullable="0+"),
                F("source", "int8", "1+"),
            ), "1+"),
            F("config_type", "int8", "3+"),
            F("documentation", "string", "3+", nullable="0+"),
        )),
    )),
)

#: Kafka's names of the ConfigSource ids (as its admin clients show them).
SOURCE_NAMES: dict[int, str] = {
    SOURCE_UNKNOWN: "UNKNOWN",
    SOURCE_DYNAMIC_TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",
    SOURCE_DYNAMIC_BROKER_CONFIG: "DYNAMIC_BROKER_CONFIG",
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    SOURCE_STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG",
    SOURCE_DEFAULT_CONFIG: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    SOURCE_DYNAMIC_GROUP_CONFIG: "DYNAMIC_GROUP_CONFIG",
}

#: Kafka's names of the ConfigType ids.
TYPE_NAMES: dict[int, str] = {
    TYPE_UNKNOWN: "UNKNOWN", TYPE_BOOLEAN: "BOOLEAN", TYPE_STRING: "STRING", TYPE_INT: "INT",
    TYPE_SHORT: "SHORT", TYPE_LONG: "LONG", TYPE_DOUBLE: "DOUBLE", TYPE_LIST: "LIST",
    TYPE_CLASS: "CLASS", TYPE_PASSWORD: "PASSWORD",
}
