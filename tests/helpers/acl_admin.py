"""ACL and topic administration through confluent-kafka's AdminClient, for the ACL tests.

Each call waits for the broker's answer; the AdminClient is held until its futures
resolve (a dropped client cancels them).
"""

from __future__ import annotations

import confluent_kafka.admin as ck

TIMEOUT = 15.0
LITERAL, PREFIXED = ck.ResourcePatternType.LITERAL, ck.ResourcePatternType.PREFIXED
ALLOW, DENY = ck.AclPermissionType.ALLOW, ck.AclPermissionType.DENY


def binding(principal: str, rtype: ck.ResourceType, name: str, op: ck.AclOperation,
            perm: ck.AclPermissionType = ALLOW,
            pattern: ck.ResourcePatternType = LITERAL) -> ck.AclBinding:
    """An ACL for ``principal`` from any host."""
    return ck.AclBinding(rtype, name, pattern, principal, "*", op, perm)


def create_acls(admin: ck.AdminClient, *bindings: ck.AclBinding) -> None:
    for f in admin.create_acls(list(bindings), request_timeout=TIMEOUT).values():
        f.result()


def create_topics(admin: ck.AdminClient, *names: str) -> None:
    """Topics of one partition each."""
    for f in admin.create_topics([ck.NewTopic(n, 1) for n in names],
                                 request_timeout=TIMEOUT).values():
        f.result()


def on_topic(topic: str) -> ck.AclBindingFilter:
    """Every ACL whose pattern matches ``topic`` (literal, prefixed or wildcard)."""
    return ck.AclBindingFilter(ck.ResourceType.TOPIC, topic, ck.ResourcePatternType.MATCH, None,
                               None, ck.AclOperation.ANY, ck.AclPermissionType.ANY)


def described(admin: ck.AdminClient, f: ck.AclBindingFilter) -> list[str]:
    """The ACLs ``f`` selects, as sorted strings."""
    return sorted(map(str, admin.describe_acls(f, request_timeout=TIMEOUT).result()))
