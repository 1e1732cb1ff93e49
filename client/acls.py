"""ACL admin calls (CreateAcls, DescribeAcls, DeleteAcls) on a connected :class:`Client`,
negotiated like every call in ``client.admin``. Codes are Kafka's (``broker.acl`` has
the same numbers, but the client never imports the broker: they are spelled here)."""

from __future__ import annotations

from typing import Any, NamedTuple

from client.admin import _call, _raise
from client.aio import Client
from protocol.api import ApiKey

RESOURCE_TYPES = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5,
                  "DELEGATION_TOKEN": 6, "USER": 7}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
              "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
              "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}


def _name(table: dict[str, int], code: int) -> str:
    return next((k for k, v in table.items() if v == code), str(code))


class Acl(NamedTuple):
    """One ACL with Kafka's names (``TOPIC``, ``LITERAL``, ``READ``, ``ALLOW``)."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


class AclFilter(NamedTuple):
    resource_type: str = "ANY"
    resource_name: str | None = None
    pattern_type: str = "ANY"
    principal: str | None = None
    host: str | None = None
    operation: str = "ANY"
    permission: str = "ANY"


#: The filter that selects every ACL.
ALL_ACLS = AclFilter()


def _filter(f: AclFilter) -> dict[str, Any]:
    return {"resource_type_filter": RESOURCE_TYPES[f.resource_type],
            "resource_name_filter": f.resource_name,
            "pattern_type_filter": PATTERN_TYPES[f.pattern_type],
            "principal_filter": f.principal, "host_filter": f.host,
            "operation": OPERATIONS[f.operation], "permission_type": PERMISSIONS[f.permission]}


def _acl(rtype: int, name: str, pattern: int, a: Any) -> Acl:
    return Acl(_name(RESOURCE_TYPES, rtype), name, _name(PATTERN_TYPES, pattern), a.principal,
               a.host, _name(OPERATIONS, a.operation), _name(PERMISSIONS, a.permission_type))


async def create_acls(client: Client, acls: list[Acl]) -> None:
    body = {"creations": [
        {"resource_type": RESOURCE_TYPES[a.resource_type], "resource_name": a.resource_name,
         "resource_pattern_type": PATTERN_TYPES[a.pattern_type], "principal": a.principal,
         "host": a.host, "operation": OPERATIONS[a.operation],
         "permission_type": PERMISSIONS[a.permission]} for a in acls]}
    resp = await _call(client, ApiKey.CREATE_ACLS, body)
    for a, r in zip(acls, resp.results, strict=True):
        _raise(r.error_code, f"create ACL {a}", r.error_message)


async def describe_acls(client: Client, f: AclFilter = ALL_ACLS) -> list[Acl]:
    resp = await _call(client, ApiKey.DESCRIBE_ACLS, _filter(f))
    _raise(resp.error_code, "describe ACLs", resp.error_message)
    return [_acl(r.resource_type, r.resource_name, r.pattern_type, a)
            for r in resp.resources for a in r.acls]


async def delete_acls(client: Client, filters: list[AclFilter]) -> list[Acl]:
    """Delete what the filters select; returns the ACLs removed."""
    resp = await _call(client, ApiKey.DELETE_ACLS, {"filters": [_filter(f) for f in filters]})
    out: list[Acl] = []
    for r in resp.filter_results:
        _raise(r.error_code, "delete ACLs", r.error_message)
        for m in r.matching_acls:
            _raise(m.error_code, "delete ACL", m.error_message)
            out.append(Acl(_name(RESOURCE_TYPES, m.resource_type), m.resource_name,
                           _name(PATTERN_TYPES, m.pattern_type), m.principal, m.host,
                           _name(OPERATIONS, m.operation), _name(PERMISSIONS, m.permission_type)))
    return out
