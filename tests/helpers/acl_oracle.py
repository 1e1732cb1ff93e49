"""Kafka's authorization decision written out plainly, one ACL at a time: the oracle
the authorizer is property-tested against, over the wire and in-process.
"""

from __future__ import annotations

from broker.acl import authorizer as A
from broker.acl.authorizer import AclBinding


def oracle(acls: list[AclBinding], supers: set[str], allow_if_none: bool, principal: str,
           host: str, op: int, rtype: int, name: str) -> bool:
    """Kafka's decision, written out plainly, one ACL at a time."""
    if principal in supers:
        return True

    def covers(b: AclBinding) -> bool:
        if b.resource_type != rtype:
            return False
        if b.pattern_type == A.LITERAL:
            return b.resource_name == name or b.resource_name == "*"
        return name.startswith(b.resource_name)

    on_resource = [b for b in acls if covers(b)]
    if not on_resource:
        return allow_if_none
    mine = [b for b in on_resource if b.principal in (principal, "User:*") and b.host in (host, "*")]
    if any(b.permission == A.DENY and b.operation in (op, A.ALL) for b in mine):
        return False
    implied = {A.DESCRIBE: {A.READ, A.WRITE, A.DELETE, A.ALTER},
               A.DESCRIBE_CONFIGS: {A.ALTER_CONFIGS}}.get(op, set())
    return any(b.permission == A.ALLOW and (b.operation in (op, A.ALL) or b.operation in implied)
               for b in mine)
