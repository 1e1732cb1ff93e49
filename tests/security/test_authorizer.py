"""The sans-I/O authorizer against a brute-force oracle of Kafka's rules
(security-admin-facts §5), over random ACL sets, principals, hosts and names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.acl import authorizer as A
from broker.acl.authorizer import AclBinding, AclFilter, Authorizer
from tests.helpers.acl_oracle import oracle

NAMES = st.text(alphabet="ab*", min_size=1, max_size=3)
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
OPS = st.sampled_from(sorted(A.OPERATIONS.values()))
RTYPES = st.sampled_from([A.TOPIC, A.GROUP, A.TRANSACTIONAL_ID])
BINDINGS = st.builds(AclBinding, RTYPES, NAMES, st.sampled_from([A.LITERAL, A.PREFIXED]),
                     PRINCIPALS, HOSTS, OPS, st.sampled_from([A.ALLOW, A.DENY]))




@settings(max_examples=400, deadline=None)
@given(st.lists(BINDINGS, max_size=8), st.booleans(), st.booleans(),
       st.sampled_from(["User:alice", "User:bob", "User:carol"]),
       st.sampled_from(["10.0.0.1", "10.0.0.2"]), OPS, RTYPES, NAMES,
       st.lists(st.integers(0, 7), max_size=3))
def test_decision_matches_kafkas_rules(acls, allow_if_none, alice_super, principal, host, op,
                                       rtype, name, removed):
    supers = {"User:alice"} if alice_super else set()
    authz = Authorizer(supers, allow_if_none, acls)
    for i in removed:  # removal must leave the indexes exactly as if never added
        if i < len(acls):
            authz.remove(acls[i])
    kept = [b for b in set(acls) if b in set(authz.acls())]
    assert authz.authorize(principal, host, op, rtype, name) == oracle(
        kept, supers, allow_if_none, principal, host, op, rtype, name)


def filter_oracle(f: AclFilter, b: AclBinding) -> bool:
    if f.resource_type not in (A.ANY, b.resource_type):
        return False
    if f.pattern_type == A.MATCH:
        name_ok = (f.resource_name is None
                   or (b.pattern_type == A.LITERAL and b.resource_name in (f.resource_name, "*"))
                   or (b.pattern_type == A.PREFIXED and f.resource_name.startswith(b.resource_name)))
    else:
        name_ok = (f.pattern_type in (A.ANY, b.pattern_type)
                   and f.resource_name in (None, b.resource_name))
    return (name_ok and f.principal in (None, b.principal) and f.host in (None, b.host)
            and f.operation in (A.ANY, b.operation) and f.permission in (A.ANY, b.permission))


FILTERS = st.builds(AclFilter, st.sampled_from([A.ANY, A.TOPIC, A.GROUP]), st.none() | NAMES,
                    st.sampled_from([A.ANY, A.MATCH, A.LITERAL, A.PREFIXED]),
                    st.none() | PRINCIPALS, st.none() | HOSTS, st.sampled_from([A.ANY, A.READ]),
                    st.sampled_from([A.ANY, A.ALLOW, A.DENY]))


@settings(max_examples=300, deadline=None)
@given(st.lists(BINDINGS, max_size=8), FILTERS)
def test_filters_select_what_kafkas_filter_selects(acls, f):
    authz = Authorizer(acls=acls)
    assert set(authz.matching(f)) == {b for b in acls if filter_oracle(f, b)}


def test_creations_kafka_refuses_are_invalid():
    good = AclBinding(A.TOPIC, "t", A.LITERAL, "User:a", "*", A.READ, A.ALLOW)
    A.validate(good)
    for bad in (good._replace(resource_type=A.ANY), good._replace(pattern_type=A.MATCH),
                good._replace(resource_name=""), good._replace(operation=A.ANY),
                good._replace(permission=A.ANY), good._replace(principal="alice"),
                good._replace(resource_type=A.CLUSTER, resource_name="other")):
        try:
            A.validate(bad)
        except A.InvalidAcl:
            continue
        raise AssertionError(f"{bad} was accepted")
