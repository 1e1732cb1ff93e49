"""Admin calls for the command line: configs, partitions, delete-records, the cluster.

Each function takes a connected :class:`client.aio.Client` and speaks one Kafka API
through its ``_request``, at ``min(our max, the broker's max)`` of that API (negotiated
here from the ranges the client learnt from ApiVersions), so they work against Kafka too.

Invariants:
- A broker error reaches the caller as ``KafkaError`` with Kafka's code and message;
  nothing is skipped silently.
- ``delete_records_before_time`` resolves the time per partition through ListOffsets
  (the first offset whose timestamp is at or after T, the time index lookup); a partition
  with no such record is cut at its end offset, since every record in it is older.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import protocol.describe_configs as dc
import protocol.incremental_alter_configs as iac
from client.aio import Client
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError

#: Each admin API this module sends, and the versions whose fields it fills.
ADMIN_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}

OPS = {"set": iac.OP_SET, "delete": iac.OP_DELETE, "append": iac.OP_APPEND, "subtract": iac.OP_SUBTRACT}


class DeletedRecords(NamedTuple):
    """One partition's DeleteRecords answer: the log start offset afterwards."""

    partition: int
    low_watermark: int


async def _call(client: Client, key: int, body: dict[str, Any]) -> Any:
    lo, hi = ADMIN_VERSIONS[key]
    client.use_version(key, lo, hi)  # UNSUPPORTED_VERSION before anything is sent
    return await client.request(key, body)


def _raise(code: int, what: str, message: str | None) -> None:
    if code:
        err = ErrorCode(code) if code in ErrorCode._value2member_map_ else ErrorCode.UNKNOWN_SERVER_ERROR
        raise KafkaError(err, f"{what}: {message}" if message else what)


async def alter_topic_configs(
    client: Client,
    topic: str,
    set_: Mapping[str, str] | None = None,
    delete: Iterable[str] = (),
    *,
    ops: Sequence[tuple[str, str, str | None]] = (),
    validate_only: bool = False,
) -> None:
    """IncrementalAlterConfigs on one topic: SET ``set_``, DELETE ``delete``, plus any
    ``(op, name, value)`` in ``ops`` (op = set / delete / append / subtract)."""
    configs = [{"name": k, "config_operation": iac.OP_SET, "value": str(v)}
               for k, v in (set_ or {}).items()]
    configs += [{"name": k, "config_operation": iac.OP_DELETE, "value": None} for k in delete]
    configs += [{"name": k, "config_operation": OPS[op], "value": v} for op, k, v in ops]
    await _alter(client, ApiKey.INCREMENTAL_ALTER_CONFIGS, dc.RESOURCE_TOPIC, topic, configs,
                 validate_only)


async def alter_broker_configs(
    client: Client,
    values: Mapping[str, str | None],
    *,
    broker: str = "",
    validate_only: bool = False,
) -> None:
    """IncrementalAlterConfigs on a broker level ("" = cluster default, or a node id):
    a value of None deletes the setting."""
    configs = [{"name": k, "config_operation": iac.OP_DELETE if v is None else iac.OP_SET,
                "value": None if v is None else str(v)} for k, v in values.items()]
    await _alter(client, ApiKey.INCREMENTAL_ALTER_CONFIGS, dc.RESOURCE_BROKER, broker, configs,
                 validate_only)


async def replace_topic_configs(
    client: Client, topic: str, values: Mapping[str, str], *, validate_only: bool = False
) -> None:
    """Legacy AlterConfigs: ``values`` become the topic's whole set of overrides."""
    configs = [{"name": k, "value": str(v)} for k, v in values.items()]
    await _alter(client, ApiKey.ALTER_CONFIGS, dc.RESOURCE_TOPIC, topic, configs, validate_only)


async def _alter(client: Client, key: int, rtype: int, name: str, configs: list[dict[str, Any]],
                 validate_only: bool) -> None:
    body = {"resources": [{"resource_type": rtype, "resource_name": name, "configs": configs}],
            "validate_only": validate_only}
    resp = await _call(client, key, body)
    for r in resp["responses"]:
        _raise(r["error_code"], f"alter configs of {name!r}", r["error_message"])


async def create_partitions(
    client: Client, topic: str, count: int, *, validate_only: bool = False
) -> None:
    """Grow ``topic`` to ``count`` partitions (CreatePartitions)."""
    body = {"topics": [{"name": topic, "count": count, "assignments": None}],
            "timeout_ms": int(client.request_timeout * 1000), "validate_only": validate_only}
    resp = await _call(client, ApiKey.CREATE_PARTITIONS, body)
    for r in resp["results"]:
        _raise(r["error_code"], f"create partitions of {topic!r}", r["error_message"])
    client.forget_topic(topic)


async def delete_records(
    client: Client, topic: str, offsets: Mapping[int, int]
) -> list[DeletedRecords]:
    """DeleteRecords: every record of ``partition`` below ``offsets[partition]`` goes
    (-1 = up to the high watermark); returns each partition's new log start."""
    body = {"topics": [{"name": topic, "partitions": [
        {"partition_index": p, "offset": o} for p, o in sorted(offsets.items())]}],
        "timeout_ms": int(client.request_timeout * 1000)}
    resp = await _call(client, ApiKey.DELETE_RECORDS, body)
    out = []
    for t in resp["topics"]:
        for p in t["partitions"]:
            _raise(p["error_code"], f"delete records of {topic}-{p['partition_index']}", None)
            out.append(DeletedRecords(p["partition_index"], p["low_watermark"]))
    return sorted(out)


async def offsets_before_time(
    client: Client, topic: str, timestamp: int, partitions: Iterable[int] | None = None
) -> dict[int, int]:
    """Per partition, the first offset whose timestamp is >= ``timestamp`` (the time
    index lookup), or the end offset when every record is older."""
    parts = sorted(partitions) if partitions is not None else await client.partitions_for(topic)
    found = await client.offsets_for_times(topic, timestamp, parts)
    ends = await client.latest(topic, parts)
    return {p: (hit[0] if hit is not None else ends[p]) for p, hit in found.items()}


async def describe_cluster(client: Client) -> dict[str, Any]:
    """DescribeCluster: cluster id, controller and brokers."""
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 1,
            "include_fenced_brokers": False}
    resp = await _call(client, ApiKey.DESCRIBE_CLUSTER, body)
    _raise(resp["error_code"], "describe cluster", resp["error_message"])
    return {"cluster_id": resp["cluster_id"], "controller_id": resp["controller_id"],
            "brokers": [{"id": b["broker_id"], "host": b["host"], "port": b["port"]}
                        for b in resp["brokers"]]}


async def describe_log_dirs(client: Client, topic: str | None = None) -> dict[tuple[str, int], int]:
    """DescribeLogDirs: (topic, partition) -> bytes on disk, for one topic or all."""
    topics = None
    if topic is not None:
        topics = [{"topic": topic, "partitions": await client.partitions_for(topic)}]
    resp = await _call(client, ApiKey.DESCRIBE_LOG_DIRS, {"topics": topics})
    _raise(resp.get("error_code", 0), "describe log dirs", None)
    sizes: dict[tuple[str, int], int] = {}
    for d in resp["results"]:
        _raise(d["error_code"], f"log dir {d['log_dir']}", None)
        for t in d["topics"]:
            for p in t["partitions"]:
                sizes[(t["name"], p["partition_index"])] = p["partition_size"]
    return sizes
