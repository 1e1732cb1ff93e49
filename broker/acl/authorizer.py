"""Kafka's ACL model and decision, sans I/O (``StandardAuthorizerData``).

Invariants (security-admin-facts §5):
- Codes are Kafka's: resource 2 TOPIC, 3 GROUP, 4 CLUSTER, 5 TRANSACTIONAL_ID,
  6 DELEGATION_TOKEN, 7 USER; pattern 3 LITERAL, 4 PREFIXED (2 MATCH, 1 ANY only in
  filters); operation 2 ALL .. 14; permission 2 DENY, 3 ALLOW.
- A decision: a super user is allowed; otherwise the ACLs whose pattern covers the
  resource (the literal name, the literal ``*``, every PREFIXED prefix of the name)
  and whose principal (exact or ``User:*``) and host (exact IP or ``*``) match are
  considered. Any matching DENY (operation equal or ALL) denies; else a matching
  ALLOW (equal, ALL, or an operation implying it) allows. With no ACL at all on the
  resource, ``allow.everyone.if.no.acl.found`` decides; otherwise it is denied.
- Only ALLOW implies: READ/WRITE/DELETE/ALTER allow DESCRIBE, ALTER_CONFIGS allows
  DESCRIBE_CONFIGS. A PREFIXED ``*`` is an ordinary prefix, not a wildcard.
- Filters (Describe/DeleteAcls) match as Kafka's ``AclBindingFilter``: ANY/null
  fields match everything; pattern MATCH selects what would apply to that name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

ANY = 1
# Resource types.
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {"TOPIC": TOPIC, "GROUP": GROUP, "CLUSTER": CLUSTER,
                  "TRANSACTIONAL_ID": TRANSACTIONAL_ID, "DELEGATION_TOKEN": DELEGATION_TOKEN,
                  "USER": USER}
# Pattern types.
MATCH, LITERAL, PREFIXED = 2, 3, 4
PATTERN_TYPES = {"ANY": ANY, "MATCH": MATCH, "LITERAL": LITERAL, "PREFIXED": PREFIXED}
# Operations.
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14
OPERATIONS = {"ALL": ALL, "READ": READ, "WRITE": WRITE, "CREATE": CREATE, "DELETE": DELETE,
              "ALTER": ALTER, "DESCRIBE": DESCRIBE, "CLUSTER_ACTION": CLUSTER_ACTION,
              "DESCRIBE_CONFIGS": DESCRIBE_CONFIGS, "ALTER_CONFIGS": ALTER_CONFIGS,
              "IDEMPOTENT_WRITE": IDEMPOTENT_WRITE, "CREATE_TOKENS": CREATE_TOKENS,
              "DESCRIBE_TOKENS": DESCRIBE_TOKENS}
# Permission types.
DENY, ALLOW = 2, 3
PERMISSIONS = {"DENY": DENY, "ALLOW": ALLOW}

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

#: operation asked -> the ALLOW operations that grant it (besides itself and ALL).
IMPLIED_BY: dict[int, frozenset[int]] = {
    DESCRIBE: frozenset({READ, WRITE, DELETE, ALTER}),
    DESCRIBE_CONFIGS: frozenset({ALTER_CONFIGS}),
}


class AclBinding(NamedTuple):
    """One ACL: a resource pattern and an access control entry."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


class AclFilter(NamedTuple):
    """A Describe/DeleteAcls filter; None names/principals/hosts match anything."""

    resource_type: int = ANY
    resource_name: str | None = None
    pattern_type: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission: int = ANY


class InvalidAcl(ValueError):
    """A creation Kafka refuses with INVALID_REQUEST (42)."""


def validate(b: AclBinding) -> None:
    """Raise :class:`InvalidAcl` for a binding Kafka's AclControlManager refuses."""
    if b.resource_type not in RESOURCE_TYPES.values():
        raise InvalidAcl(f"invalid resource type {b.resource_type}")
    if b.pattern_type not in (LITERAL, PREFIXED):
        raise InvalidAcl(f"invalid pattern type {b.pattern_type}")
    if not b.resource_name:
        raise InvalidAcl("resource name must not be empty")
    if b.resource_type == CLUSTER and b.resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if b.operation not in OPERATIONS.values():
        raise InvalidAcl(f"invalid operation {b.operation}")
    if b.permission not in (DENY, ALLOW):
        raise InvalidAcl(f"invalid permission type {b.permission}")
    kind, sep, name = b.principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAcl(f"could not parse principal {b.principal!r}")
    if not b.host:
        raise InvalidAcl("host must not be empty")


def filter_matches(f: AclFilter, b: AclBinding) -> bool:
    """Kafka's ``AclBindingFilter.matches``."""
    if f.resource_type != ANY and f.resource_type != b.resource_type:
        return False
    if f.pattern_type not in (ANY, MATCH) and f.pattern_type != b.pattern_type:
        return False
    if f.resource_name is not None:
        if f.pattern_type in (ANY, b.pattern_type):
            if f.resource_name != b.resource_name:
                return False
        elif b.pattern_type == LITERAL:  # MATCH
            if b.resource_name not in (f.resource_name, WILDCARD):
                return False
        elif not f.resource_name.startswith(b.resource_name):  # MATCH, PREFIXED
            return False
    return ((f.principal is None or f.principal == b.principal)
            and (f.host is None or f.host == b.host)
            and f.operation in (ANY, b.operation)
            and f.permission in (ANY, b.permission))


def validate_filter(f: AclFilter) -> None:
    """Raise :class:`InvalidAcl` for a filter with UNKNOWN (0) or out-of-range codes."""
    if f.resource_type not in (ANY, *RESOURCE_TYPES.values()):
        raise InvalidAcl(f"invalid resource type filter {f.resource_type}")
    if f.pattern_type not in PATTERN_TYPES.values():
        raise InvalidAcl(f"invalid pattern type filter {f.pattern_type}")
    if f.operation not in (ANY, *OPERATIONS.values()):
        raise InvalidAcl(f"invalid operation filter {f.operation}")
    if f.permission not in (ANY, DENY, ALLOW):
        raise InvalidAcl(f"invalid permission type filter {f.permission}")


class Authorizer:
    """The ACL set of one broker, indexed for :meth:`authorize`; no I/O."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: set[AclBinding] = set()
        # (resource type, name) -> ACLs, for LITERAL and PREFIXED patterns apart;
        # the distinct prefix lengths per resource type keep prefix lookups short.
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefix_lengths: dict[int, set[int]] = {}
        for b in acls:
            self.add(b)

    def __len__(self) -> int:
        return len(self._acls)

    def acls(self) -> list[AclBinding]:
        return sorted(self._acls)

    def add(self, b: AclBinding) -> bool:
        """Add one (validated) binding; False if it was already there (Kafka: success)."""
        if b in self._acls:
            return False
        self._acls.add(b)
        key = (b.resource_type, b.resource_name)
        if b.pattern_type == LITERAL:
            self._literal.setdefault(key, []).append(b)
        else:
            self._prefixed.setdefault(key, []).append(b)
            self._prefix_lengths.setdefault(b.resource_type, set()).add(len(b.resource_name))
        return True

    def remove(self, b: AclBinding) -> None:
        self._acls.discard(b)
        index = self._literal if b.pattern_type == LITERAL else self._prefixed
        key = (b.resource_type, b.resource_name)
        entries = index.get(key)
        if entries is not None and b in entries:
            entries.remove(b)
            if not entries:
                del index[key]
        if b.pattern_type == PREFIXED and not any(
                k[0] == b.resource_type and len(k[1]) == len(b.resource_name)
                for k in self._prefixed):
            self._prefix_lengths.get(b.resource_type, set()).discard(len(b.resource_name))

    def matching(self, f: AclFilter) -> list[AclBinding]:
        """The bindings a filter selects, in a stable order."""
        return [b for b in self.acls() if filter_matches(f, b)]

    def _candidates(self, rtype: int, name: str) -> list[AclBinding]:
        out: list[AclBinding] = []
        lit = self._literal
        found = lit.get((rtype, name))
        if found:
            out.extend(found)
        if name != WILDCARD:
            found = lit.get((rtype, WILDCARD))
            if found:
                out.extend(found)
        lengths = self._prefix_lengths.get(rtype)
        if lengths:
            pre = self._prefixed
            for n in lengths:
                if n <= len(name):
                    found = pre.get((rtype, name[:n]))
                    if found:
                        out.extend(found)
        return out

    def authorize(self, principal: str, host: str, operation: int, rtype: int, name: str) -> bool:
        """May ``principal`` connecting from ``host`` do ``operation`` on the resource?"""
        if principal in self.super_users:
            return True
        candidates = self._candidates(rtype, name)
        if not candidates:
            return self.allow_if_no_acl
        implied = IMPLIED_BY.get(operation, frozenset())
        allowed = False
        for b in candidates:
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.host != host and b.host != WILDCARD:
                continue
            if b.permission == DENY:
                if b.operation == operation or b.operation == ALL:
                    return False
            elif b.operation == operation or b.operation == ALL or b.operation in implied:
                allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, operation: int, rtype: int) -> bool:
        """Is ``operation`` allowed on at least one resource of type ``rtype``? Kafka's
        ``Authorizer.authorizeByResourceType`` (used by idempotent InitProducerId): allowed
        if :meth:`authorize` allows a resource named ``hardcode`` (super users, and
        ``allow.everyone.if.no.acl.found`` when no ACL covers that name); denied by a
        literal ``*`` DENY; else allowed by a literal ``*`` ALLOW, or by an ALLOW whose
        name no DENY dominates (a literal DENY of the same literal name, or a PREFIXED
        DENY that is a prefix of it). Operations match exactly or by ALL, no implication."""
        if self.authorize(principal, host, operation, rtype, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[AclBinding] = []
        for b in self._acls:
            if (b.resource_type != rtype or b.principal not in (principal, WILDCARD_PRINCIPAL)
                    or b.host not in (host, WILDCARD) or b.operation not in (operation, ALL)):
                continue
            if b.permission == DENY:
                if b.pattern_type == LITERAL and b.resource_name == WILDCARD:
                    return False
                (deny_literal if b.pattern_type == LITERAL else deny_prefixed).add(b.resource_name)
            else:
                allows.append(b)
        if any(b.pattern_type == LITERAL and b.resource_name == WILDCARD for b in allows):
            return True
        return any(
            not (b.pattern_type == LITERAL and b.resource_name in deny_literal)
            and not any(b.resource_name[:n] in deny_prefixed
                        for n in range(1, len(b.resource_name) + 1))
            for b in allows)
