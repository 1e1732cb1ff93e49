"""Frames in, messages out: the API table, headers and the four codec entry points.

``API_VERSIONS`` is the one place that says which versions Chronolog speaks;
the per-API modules say what each version contains. A frame is the bytes after
the 4-byte size prefix; encoders return whole frames, prefix included.

Invariants:
- ``decode_request`` raises only :class:`UnsupportedVersionError` (unknown key or
  a version outside the table: the broker answers ApiVersions specially and
  closes the connection otherwise) or :class:`MalformedRequestError` (bytes that
  do not parse) — never a construct/struct/Index error.
- Request header v1 (v2 in flexible versions: + tagged fields); the client id is
  always a nullable int16 string. Response header v0 (v1 in flexible versions:
  + tagged fields), except ApiVersions, whose response header is always v0.
- Every message goes through the codec generated from its declaration
  (``protocol.codegen``; bodies are the classes of ``protocol.messages``); the
  construct codec is the reference and tests compare the two byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from io import BytesIO
from typing import Any, Generic, NamedTuple, TypeVar

from construct import Construct, ConstructError, Container

from protocol import (
    acls,
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    client_quotas,
    codegen,
    consumer_group_describe,
    consumer_group_heartbeat,
    count_time_windows,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    messages,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    plan_time_window,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from protocol.errors import ErrorCode
from protocol.messages import KafkaMessage
from protocol.primitives import VarintError
from protocol.schema import Message
from protocol.wire import read_string, read_uvarint, skip_tag


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75
    # Chronolog's own APIs: keys far outside Kafka's range (0..~90), so no Kafka
    # client sends them and a future Kafka key cannot collide.
    PLAN_TIME_WINDOW = 10000
    COUNT_TIME_WINDOWS = 10001


class ApiRange(NamedTuple):
    """Versions served (``min_version``..``max_version``), advertised, and the first flexible one."""

    name: str
    min_version: int
    max_version: int
    advertised_min: int
    first_flexible: int


# Adding a version: raise max_version here and declare its new fields (with their
# version range) in the API's module.
API_VERSIONS: dict[ApiKey, ApiRange] = {
    ApiKey.PRODUCE: ApiRange("Produce", 3, 11, 0, 9),
    ApiKey.FETCH: ApiRange("Fetch", 4, 12, 4, 12),
    ApiKey.LIST_OFFSETS: ApiRange("ListOffsets", 0, 10, 0, 6),
    ApiKey.METADATA: ApiRange("Metadata", 0, 12, 0, 9),
    ApiKey.OFFSET_COMMIT: ApiRange("OffsetCommit", 2, 9, 2, 8),
    ApiKey.OFFSET_FETCH: ApiRange("OffsetFetch", 1, 9, 1, 6),
    ApiKey.FIND_COORDINATOR: ApiRange("FindCoordinator", 0, 4, 0, 3),
    ApiKey.JOIN_GROUP: ApiRange("JoinGroup", 0, 9, 0, 6),
    ApiKey.HEARTBEAT: ApiRange("Heartbeat", 0, 4, 0, 4),
    ApiKey.LEAVE_GROUP: ApiRange("LeaveGroup", 0, 5, 0, 4),
    ApiKey.SYNC_GROUP: ApiRange("SyncGroup", 0, 5, 0, 4),
    ApiKey.DESCRIBE_GROUPS: ApiRange("DescribeGroups", 0, 6, 0, 5),
    ApiKey.LIST_GROUPS: ApiRange("ListGroups", 0, 5, 0, 3),
    # SaslHandshake has no flexible version; never advertise past v1 (KAFKA-9577).
    ApiKey.SASL_HANDSHAKE: ApiRange("SaslHandshake", 0, 1, 0, 2),
    ApiKey.API_VERSIONS: ApiRange("ApiVersions", 0, 4, 0, 3),
    ApiKey.CREATE_TOPICS: ApiRange("CreateTopics", 2, 7, 2, 5),
    ApiKey.DELETE_TOPICS: ApiRange("DeleteTopics", 1, 6, 1, 4),
    ApiKey.DELETE_RECORDS: ApiRange("DeleteRecords", 0, 2, 0, 2),
    ApiKey.INIT_PRODUCER_ID: ApiRange("InitProducerId", 0, 4, 0, 2),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ApiRange("OffsetForLeaderEpoch", 0, 4, 0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: ApiRange("AddPartitionsToTxn", 0, 3, 0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: ApiRange("AddOffsetsToTxn", 0, 3, 0, 3),
    ApiKey.END_TXN: ApiRange("EndTxn", 0, 3, 0, 3),
    # Kafka 4 serves v1 only (v0 removed by KIP-896); v2 (TransactionVersion) is 4.2's.
    ApiKey.WRITE_TXN_MARKERS: ApiRange("WriteTxnMarkers", 1, 1, 1, 1),
    ApiKey.TXN_OFFSET_COMMIT: ApiRange("TxnOffsetCommit", 0, 3, 0, 3),
    ApiKey.DESCRIBE_ACLS: ApiRange("DescribeAcls", 0, 3, 0, 2),
    ApiKey.CREATE_ACLS: ApiRange("CreateAcls", 0, 3, 0, 2),
    ApiKey.DELETE_ACLS: ApiRange("DeleteAcls", 0, 3, 0, 2),
    ApiKey.DESCRIBE_CONFIGS: ApiRange("DescribeConfigs", 0, 4, 0, 4),
    ApiKey.ALTER_CONFIGS: ApiRange("AlterConfigs", 0, 2, 0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: ApiRange("DescribeLogDirs", 0, 4, 0, 2),
    ApiKey.SASL_AUTHENTICATE: ApiRange("SaslAuthenticate", 0, 2, 0, 2),
    ApiKey.CREATE_PARTITIONS: ApiRange("CreatePartitions", 0, 3, 0, 2),
    ApiKey.DELETE_GROUPS: ApiRange("DeleteGroups", 0, 2, 0, 2),
    ApiKey.ELECT_LEADERS: ApiRange("ElectLeaders", 0, 2, 0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ApiRange("IncrementalAlterConfigs", 0, 1, 0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ApiRange("AlterPartitionReassignments", 0, 1, 0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ApiRange("ListPartitionReassignments", 0, 0, 0, 0),
    # OffsetDelete has no flexible version: 1 is past the only one served.
    ApiKey.OFFSET_DELETE: ApiRange("OffsetDelete", 0, 0, 0, 1),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ApiRange("DescribeClientQuotas", 0, 1, 0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: ApiRange("AlterClientQuotas", 0, 1, 0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ApiRange("DescribeUserScramCredentials", 0, 0, 0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ApiRange("AlterUserScramCredentials", 0, 0, 0, 0),
    ApiKey.DESCRIBE_CLUSTER: ApiRange("DescribeCluster", 0, 2, 0, 0),
    ApiKey.DESCRIBE_PRODUCERS: ApiRange("DescribeProducers", 0, 0, 0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: ApiRange("DescribeTransactions", 0, 0, 0, 0),
    ApiKey.LIST_TRANSACTIONS: ApiRange("ListTransactions", 0, 1, 0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ApiRange("ConsumerGroupHeartbeat", 0, 1, 0, 0),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ApiRange("ConsumerGroupDescribe", 0, 1, 0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: ApiRange("DescribeTopicPartitions", 0, 0, 0, 0),
    ApiKey.PLAN_TIME_WINDOW: ApiRange("PlanTimeWindow", 0, 0, 0, 0),
    ApiKey.COUNT_TIME_WINDOWS: ApiRange("CountTimeWindows", 0, 0, 0, 0),
}

MESSAGES: dict[ApiKey, tuple[Message, Message]] = {
    ApiKey.PRODUCE: (produce.REQUEST, produce.RESPONSE),
    ApiKey.FETCH: (fetch.REQUEST, fetch.RESPONSE),
    ApiKey.LIST_OFFSETS: (list_offsets.REQUEST, list_offsets.RESPONSE),
    ApiKey.METADATA: (metadata.REQUEST, metadata.RESPONSE),
    ApiKey.OFFSET_COMMIT: (offset_commit.REQUEST, offset_commit.RESPONSE),
    ApiKey.OFFSET_FETCH: (offset_fetch.REQUEST, offset_fetch.RESPONSE),
    ApiKey.FIND_COORDINATOR: (find_coordinator.REQUEST, find_coordinator.RESPONSE),
    ApiKey.JOIN_GROUP: (join_group.REQUEST, join_group.RESPONSE),
    ApiKey.HEARTBEAT: (heartbeat.REQUEST, heartbeat.RESPONSE),
    ApiKey.LEAVE_GROUP: (leave_group.REQUEST, leave_group.RESPONSE),
    ApiKey.SYNC_GROUP: (sync_group.REQUEST, sync_group.RESPONSE),
    ApiKey.DESCRIBE_GROUPS: (describe_groups.REQUEST, describe_groups.RESPONSE),
    ApiKey.LIST_GROUPS: (list_groups.REQUEST, list_groups.RESPONSE),
    ApiKey.SASL_HANDSHAKE: (sasl_handshake.REQUEST, sasl_handshake.RESPONSE),
    ApiKey.API_VERSIONS: (api_versions.REQUEST, api_versions.RESPONSE),
    ApiKey.CREATE_TOPICS: (create_topics.REQUEST, create_topics.RESPONSE),
    ApiKey.DELETE_TOPICS: (delete_topics.REQUEST, delete_topics.RESPONSE),
    ApiKey.DELETE_RECORDS: (delete_records.REQUEST, delete_records.RESPONSE),
    ApiKey.INIT_PRODUCER_ID: (init_producer_id.REQUEST, init_producer_id.RESPONSE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (offset_for_leader_epoch.REQUEST, offset_for_leader_epoch.RESPONSE),
    ApiKey.ADD_PARTITIONS_TO_TXN: (add_partitions_to_txn.REQUEST, add_partitions_to_txn.RESPONSE),
    ApiKey.ADD_OFFSETS_TO_TXN: (add_offsets_to_txn.REQUEST, add_offsets_to_txn.RESPONSE),
    ApiKey.END_TXN: (end_txn.REQUEST, end_txn.RESPONSE),
    ApiKey.WRITE_TXN_MARKERS: (write_txn_markers.REQUEST, write_txn_markers.RESPONSE),
    ApiKey.TXN_OFFSET_COMMIT: (txn_offset_commit.REQUEST, txn_offset_commit.RESPONSE),
    ApiKey.DESCRIBE_ACLS: (acls.DESCRIBE_REQUEST, acls.DESCRIBE_RESPONSE),
    ApiKey.CREATE_ACLS: (acls.CREATE_REQUEST, acls.CREATE_RESPONSE),
    ApiKey.DELETE_ACLS: (acls.DELETE_REQUEST, acls.DELETE_RESPONSE),
    ApiKey.DESCRIBE_CONFIGS: (describe_configs.REQUEST, describe_configs.RESPONSE),
    ApiKey.ALTER_CONFIGS: (alter_configs.REQUEST, alter_configs.RESPONSE),
    ApiKey.DESCRIBE_LOG_DIRS: (describe_log_dirs.REQUEST, describe_log_dirs.RESPONSE),
    ApiKey.SASL_AUTHENTICATE: (sasl_authenticate.REQUEST, sasl_authenticate.RESPONSE),
    ApiKey.CREATE_PARTITIONS: (create_partitions.REQUEST, create_partitions.RESPONSE),
    ApiKey.DELETE_GROUPS: (delete_groups.REQUEST, delete_groups.RESPONSE),
    ApiKey.ELECT_LEADERS: (elect_leaders.REQUEST, elect_leaders.RESPONSE),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (incremental_alter_configs.REQUEST, incremental_alter_configs.RESPONSE),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (alter_partition_reassignments.REQUEST,
                                           alter_partition_reassignments.RESPONSE),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (list_partition_reassignments.REQUEST,
                                          list_partition_reassignments.RESPONSE),
    ApiKey.OFFSET_DELETE: (offset_delete.REQUEST, offset_delete.RESPONSE),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (client_quotas.DESCRIBE_REQUEST, client_quotas.DESCRIBE_RESPONSE),
    ApiKey.ALTER_CLIENT_QUOTAS: (client_quotas.ALTER_REQUEST, client_quotas.ALTER_RESPONSE),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (describe_user_scram_credentials.REQUEST,
                                             describe_user_scram_credentials.RESPONSE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (alter_user_scram_credentials.REQUEST,
                                          alter_user_scram_credentials.RESPONSE),
    ApiKey.DESCRIBE_CLUSTER: (describe_cluster.REQUEST, describe_cluster.RESPONSE),
    ApiKey.DESCRIBE_PRODUCERS: (describe_producers.REQUEST, describe_producers.RESPONSE),
    ApiKey.DESCRIBE_TRANSACTIONS: (describe_transactions.REQUEST, describe_transactions.RESPONSE),
    ApiKey.LIST_TRANSACTIONS: (list_transactions.REQUEST, list_transactions.RESPONSE),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (consumer_group_heartbeat.REQUEST, consumer_group_heartbeat.RESPONSE),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (consumer_group_describe.REQUEST, consumer_group_describe.RESPONSE),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (describe_topic_partitions.REQUEST, describe_topic_partitions.RESPONSE),
    ApiKey.PLAN_TIME_WINDOW: (plan_time_window.REQUEST, plan_time_window.RESPONSE),
    ApiKey.COUNT_TIME_WINDOWS: (count_time_windows.REQUEST, count_time_windows.RESPONSE),
}


class UnsupportedVersionError(Exception):
    """An API key we do not serve, or a version outside its range (Kafka closes the connection,
    except for ApiVersions, which gets :func:`unsupported_api_versions_response`)."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedRequestError(Exception):
    """A request frame that does not parse; ``correlation_id`` is None if the header was unreadable."""

    def __init__(self, message: str, correlation_id: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.correlation_id = correlation_id


class MalformedResponseError(Exception):
    """A response frame that does not parse as the version the client asked for."""


class EncodeError(ValueError):
    """A message body that cannot be encoded in the requested version."""


B = TypeVar("B", bound=KafkaMessage)


@dataclass(slots=True)
class Request(Generic[B]):
    """A decoded request; ``body`` is the API's generated request class (``protocol.messages``)."""

    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None
    body: B

    @property
    def flexible(self) -> bool:
        return self.api_version >= API_VERSIONS[self.api_key].first_flexible


# Errors that bytes from the network can provoke inside the codecs.
_DECODE_ERRORS = (
    ConstructError,
    VarintError,  # a truncated or over-long uvarint in a generated codec
    struct.error,
    UnicodeDecodeError,
    ValueError,
    IndexError,
    OverflowError,
)
_ENCODE_ERRORS = (
    ConstructError, struct.error, TypeError, KeyError, ValueError, OverflowError, AttributeError,
)

_REQ_HEADER = struct.Struct(">hhih")
_KEY_VERSION_CORR = struct.Struct(">hhi").unpack_from
_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_P32 = struct.Struct(">i").pack
_API_KEYS = {int(k): k for k in ApiKey}
_SIZE = struct.Struct(">i")
_SIZE_CORR = struct.Struct(">ii")
_CODECS: dict[tuple[int, int, bool], Construct] = {}
_GENERATED: dict[tuple[int, int, bool], tuple[codegen.Decoder, codegen.Encoder]] = {}
_RESPONSE_FRAMES: dict[tuple[int, int], Callable[[int, Any], bytes]] = {}
_REQUEST_FRAMES: dict[tuple[int, int], Callable[[int, str | None, Any], list[Any]]] = {}

# API key -> (request class, response class), the generated types of its messages.
CLASSES: dict[ApiKey, tuple[type[KafkaMessage], type[KafkaMessage]]] = {
    key: (getattr(messages, req.name), getattr(messages, resp.name)) for key, (req, resp) in MESSAGES.items()
}

for _pair in MESSAGES.values():
    for _msg in _pair:
        codegen.register(_msg)


def is_flexible(api_key: int, api_version: int) -> bool:
    return api_version >= API_VERSIONS[_API_KEYS[api_key]].first_flexible


def supports(api_key: int, api_version: int) -> bool:
    rng = API_VERSIONS.get(api_key)  # type: ignore[call-overload]
    return rng is not None and rng.min_version <= api_version <= rng.max_version


def codec(api_key: int, api_version: int, response: bool) -> Construct:
    """The compiled construct codec of one version (request or response), cached: the
    declarative reference the generated codecs are checked against."""
    cache_key = (api_key, api_version, response)
    c = _CODECS.get(cache_key)
    if c is None:
        if not supports(api_key, api_version):
            raise UnsupportedVersionError(api_key, api_version, -1)
        key = ApiKey(api_key)
        msg = MESSAGES[key][1 if response else 0]
        c = msg.codec(api_version, api_version >= API_VERSIONS[key].first_flexible)
        _CODECS[cache_key] = c
    return c


def generated(api_key: int, api_version: int, response: bool) -> tuple[codegen.Decoder, codegen.Encoder]:
    """The generated (decoder, encoder) of one version's request or response, compiled on first use."""
    cache_key = (api_key, api_version, response)
    pair = _GENERATED.get(cache_key)
    if pair is None:
        if not supports(api_key, api_version):
            raise UnsupportedVersionError(api_key, api_version, -1)
        key = ApiKey(api_key)
        msg = MESSAGES[key][1 if response else 0]
        pair = codegen.codec(msg, api_version, api_version >= API_VERSIONS[key].first_flexible)
        _GENERATED[cache_key] = pair
    return pair


def compile_all() -> int:
    """Generate and compile every served version's codecs now instead of on first use, so the
    first request of each version does not pay for it; returns how many were compiled."""
    n = 0
    for key, rng in API_VERSIONS.items():
        for version in range(rng.min_version, rng.max_version + 1):
            generated(key, version, False)
            generated(key, version, True)
            n += 2
    return n


def decode_request(frame: bytes | bytearray | memoryview) -> Request[Any]:
    """Parse one request frame (without its size prefix)."""
    if len(frame) < 8:
        raise MalformedRequestError(f"request of {len(frame)} bytes is shorter than a header")
    key, version, correlation_id = _KEY_VERSION_CORR(frame, 0)
    rng = API_VERSIONS.get(key)  # type: ignore[call-overload]
    if rng is None or not (rng.min_version <= version <= rng.max_version):
        raise UnsupportedVersionError(key, version, correlation_id)
    api_key = _API_KEYS[key]
    pair = _GENERATED.get((key, version, False)) or generated(key, version, False)
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        n = _I16(view, 8)[0]
        if n < 0:
            if n != -1:
                raise ValueError(f"negative client id length {n}")
            client_id, pos = None, 10
        else:
            pos = 10 + n
            if pos > len(view):
                raise ValueError("client id runs past the frame")
            client_id = str(view[10:pos], "utf-8")
        if version >= rng.first_flexible:
            if view[pos] == 0:
                pos += 1
            else:
                pos = codegen._r_tags(view, pos)[1]
        body, _ = pair[0](view, pos)
    except _DECODE_ERRORS as exc:
        raise MalformedRequestError(
            f"{rng.name} v{version} request does not parse: {type(exc).__name__}: {exc}",
            correlation_id,
        ) from exc
    return Request(api_key, version, correlation_id, client_id, body)


def _decode_declarative(
    frame: bytes | bytearray | memoryview, key: int, version: int, first_flexible: int
) -> tuple[str | None, Container]:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    stream = BytesIO(frame)
    stream.seek(8)
    client_id = read_string(stream, False, True)
    if version >= first_flexible:
        for _ in range(read_uvarint(stream)):
            read_uvarint(stream)
            skip_tag(stream)
    return client_id, codec(key, version, False)._parse(stream, {"frame": view}, "(request)")


def decode_request_declarative(frame: bytes | bytearray | memoryview) -> Request[Any]:
    """:func:`decode_request` through the construct codec (a ``Container`` body): the
    reference the generated codecs are tested against."""
    key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    rng = API_VERSIONS[ApiKey(key)]
    client_id, body = _decode_declarative(frame, key, version, rng.first_flexible)
    return Request(ApiKey(key), version, correlation_id, client_id, body)


def _response_frame(api_key: int, api_version: int) -> Callable[[int, Any], bytes]:
    """The whole-frame response encoder of one version: header and body, size prefix included."""
    encode = generated(api_key, api_version, True)[1]
    cls = CLASSES[_API_KEYS[api_key]][1]
    tagged_header = api_key != ApiKey.API_VERSIONS and is_flexible(api_key, api_version)

    def frame(correlation_id: int, body: Any) -> bytes:
        if type(body) is not cls:
            body = codegen.from_mapping(cls, body)
        head = _P32(correlation_id) + b"\x00" if tagged_header else _P32(correlation_id)
        parts = encode(body, [b"", head])
        parts[0] = _P32(sum(map(len, parts)))
        return b"".join(parts)

    _RESPONSE_FRAMES[(api_key, api_version)] = frame
    return frame


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """One response frame, size prefix included; header v0, or v1 when flexible (not ApiVersions).
    ``body`` is the API's generated response class, or a mapping of its fields."""
    try:
        frame = _RESPONSE_FRAMES.get((api_key, api_version)) or _response_frame(api_key, api_version)
        return frame(correlation_id, body)
    except _ENCODE_ERRORS as exc:
        raise EncodeError(
            f"cannot encode api {api_key} v{api_version} response: {type(exc).__name__}: {exc}"
        ) from exc


def encode_response_declarative(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """:func:`encode_response` through the construct codec: the reference."""
    c = codec(api_key, api_version, True)
    stream = BytesIO()
    stream.write(_SIZE_CORR.pack(0, correlation_id))
    if api_key != ApiKey.API_VERSIONS and is_flexible(api_key, api_version):
        stream.write(b"\x00")
    c._build(codegen.as_plain(body), stream, {}, "(response)")
    return _finish(stream)


def _request_head(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    if client_id is None:
        head = _REQ_HEADER.pack(api_key, api_version, correlation_id, -1)
    else:
        cid = client_id.encode("utf-8")
        if len(cid) > 0x7FFF:
            raise EncodeError(f"client id of {len(cid)} bytes exceeds int16 length")
        head = _REQ_HEADER.pack(api_key, api_version, correlation_id, len(cid)) + cid
    return head + b"\x00" if is_flexible(api_key, api_version) else head


def _request_frame(api_key: int, api_version: int) -> Callable[[int, str | None, Any], list[Any]]:
    encode = generated(api_key, api_version, False)[1]
    cls = CLASSES[_API_KEYS[api_key]][0]

    def frame(correlation_id: int, client_id: str | None, body: Any) -> list[Any]:
        if type(body) is not cls:
            body = codegen.from_mapping(cls, body)
        parts = encode(body, [b"", _request_head(api_key, api_version, correlation_id, client_id)])
        parts[0] = _P32(sum(map(len, parts)))
        return parts

    _REQUEST_FRAMES[(api_key, api_version)] = frame
    return frame


def encode_request_parts(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> list[Any]:
    """:func:`encode_request` as a list of buffers whose concatenation is the frame:
    ``bytes``/``records`` fields (a Produce request's record batches) are pieces of
    their own, never copied, for a writer that takes the list as it is
    (``transport.writelines``)."""
    try:
        frame = _REQUEST_FRAMES.get((api_key, api_version)) or _request_frame(api_key, api_version)
        return frame(correlation_id, client_id, body)
    except _ENCODE_ERRORS as exc:
        raise EncodeError(
            f"cannot encode api {api_key} v{api_version} request: {type(exc).__name__}: {exc}"
        ) from exc


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """One request frame, size prefix included (header v1, or v2 when flexible)."""
    parts = encode_request_parts(api_key, api_version, correlation_id, client_id, body)
    try:
        return b"".join(parts)
    except TypeError as exc:  # a bytes field that is no buffer
        raise EncodeError(f"cannot encode api {api_key} v{api_version} request: {exc}") from exc


def encode_request_declarative(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """:func:`encode_request` through the construct codec: the reference."""
    c = codec(api_key, api_version, False)
    stream = BytesIO()
    cid = None if client_id is None else client_id.encode("utf-8")
    stream.write(b"\x00\x00\x00\x00")
    stream.write(_REQ_HEADER.pack(api_key, api_version, correlation_id, -1 if cid is None else len(cid)))
    if cid is not None:
        stream.write(cid)
    if is_flexible(api_key, api_version):
        stream.write(b"\x00")
    c._build(codegen.as_plain(body), stream, {}, "(request)")
    return _finish(stream)


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Any]:
    """Parse one response frame (without size prefix) as the version the request was sent with;
    the body is the API's generated response class.

    An ApiVersions response carrying UNSUPPORTED_VERSION is parsed as v0, as
    the broker sends it (the client then retries at a version it advertised);
    like Kafka's Java client, an ApiVersions response that does not parse in the
    version sent is tried once more as v0.
    """
    version = api_version
    if (api_key == ApiKey.API_VERSIONS and len(frame) >= 6
            and _I16(frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION):
        version = 0
    try:
        return _decode_response(api_key, version, frame)
    except _DECODE_ERRORS as exc:
        if api_key == ApiKey.API_VERSIONS and version != 0:
            try:
                return _decode_response(api_key, 0, frame)
            except _DECODE_ERRORS:
                pass
        raise MalformedResponseError(
            f"api {api_key} v{api_version} response does not parse: {type(exc).__name__}: {exc}"
        ) from exc


def _decode_response(
    api_key: int, version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Any]:
    decode = (_GENERATED.get((api_key, version, True)) or generated(api_key, version, True))[0]
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    correlation_id = _I32(view, 0)[0]
    pos = 4
    if api_key != ApiKey.API_VERSIONS and is_flexible(api_key, version):
        pos = 5 if view[4] == 0 else codegen._r_tags(view, 4)[1]
    body, _ = decode(view, pos)
    return correlation_id, body


def decode_response_declarative(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Container]:
    """:func:`decode_response` through the construct codec (no ApiVersions v0 fallback)."""
    return _decode_response_declarative(api_key, api_version, frame)


def _decode_response_declarative(
    api_key: int, version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Container]:
    c = codec(api_key, version, True)  # unknown key/version: UnsupportedVersionError
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    stream = BytesIO(frame)
    stream.seek(4)
    if api_key != ApiKey.API_VERSIONS and is_flexible(api_key, version):
        for _ in range(read_uvarint(stream)):
            read_uvarint(stream)
            skip_tag(stream)
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    return correlation_id, c._parse(stream, {"frame": view}, "(response)")


def advertised_api_keys() -> list[dict[str, int]]:
    """The ``api_keys`` of an ApiVersions response: every API, advertised min .. max."""
    return [
        {"api_key": int(k), "min_version": r.advertised_min, "max_version": r.max_version}
        for k, r in sorted(API_VERSIONS.items())
    ]


def unsupported_api_versions_response(correlation_id: int, max_version: int | None = None) -> bytes:
    """Kafka's answer to an ApiVersions version it does not know: a v0 body, header v0,
    error UNSUPPORTED_VERSION and our ApiVersions range (the body of the request is not parsed).
    ``max_version`` overrides the advertised max (tests use it to play an older broker)."""
    rng = API_VERSIONS[ApiKey.API_VERSIONS]
    body = messages.ApiVersionsResponse(
        error_code=int(ErrorCode.UNSUPPORTED_VERSION),
        api_keys=[messages.ApiVersionsResponseApiKeys(
            api_key=int(ApiKey.API_VERSIONS), min_version=rng.min_version,
            max_version=rng.max_version if max_version is None else max_version)],
    )
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)


def _finish(stream: BytesIO) -> bytes:
    size = stream.tell() - 4
    stream.seek(0)
    stream.write(_SIZE.pack(size))
    return stream.getvalue()
