"""ACL checks of the transaction APIs, against Kafka's rules (security-admin-facts §5, and
KafkaApis: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, Produce with a
transactional id, idempotent InitProducerId, Describe/ListTransactions).

Oracle: for each random ACL set, the answer is the one Kafka's checks give, computed with
the plain decision oracle of ``test_authorizer`` -- an authorization error where a check
fails, and otherwise exactly what the same request is answered with no ACLs at all (the
baseline, taken on the same broker just before). The requests carry a wrong producer id,
so they never change a transaction and the baseline stays valid.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.acl import authorizer as A
from broker.acl.authorizer import AclBinding, Authorizer
from protocol.errors import ErrorCode
from storage.records import Record, build_batch
from tests.helpers.acl_oracle import oracle
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.kafka_socket import KafkaSocket

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ME, HOST = "User:ANONYMOUS", "127.0.0.1"
TXN_AUTH, TOPIC_AUTH, GROUP_AUTH = (int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                                    int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                    int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
CLUSTER_AUTH = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
#: Lets ANONYMOUS manage ACLs while random IDEMPOTENT_WRITE ACLs sit on the cluster.
MANAGE = AclBinding(A.CLUSTER, A.CLUSTER_NAME, A.LITERAL, ME, "*", A.ALTER, A.ALLOW)
TXN_IDS = ["xa", "xb", "xc"]  # xa: Ongoing on ta-0 and tb-0; xb: Empty; xc: unknown
PARTITIONS = [("ta", 0), ("tb", 0), ("tc", 0), ("ta", 1)]  # tc and ta-1 do not exist
BASE_TS = int(time.time() * 1000)
PRODUCER_IDS = itertools.count(10**9)  # far above any id the broker hands out here

# ---------------------------------------------------------------- the sans-I/O part


def by_type_oracle(acls: list[AclBinding], supers: set[str], allow_if_none: bool,
                   principal: str, host: str, op: int, rtype: int) -> bool:
    """Kafka's ``authorizeByResourceType``, rule by rule."""
    if oracle(acls, supers, allow_if_none, principal, host, op, rtype, "hardcode"):
        return True
    mine = [b for b in acls if b.resource_type == rtype and b.principal in (principal, "User:*")
            and b.host in (host, "*") and b.operation in (op, A.ALL)]
    denies = [b for b in mine if b.permission == A.DENY]
    allows = [b for b in mine if b.permission == A.ALLOW]
    if any(d.pattern_type == A.LITERAL and d.resource_name == "*" for d in denies):
        return False
    if any(a.pattern_type == A.LITERAL and a.resource_name == "*" for a in allows):
        return True
    for a in allows:
        dominated = any(
            (d.pattern_type == A.LITERAL and a.pattern_type == A.LITERAL
             and d.resource_name == a.resource_name)
            or (d.pattern_type == A.PREFIXED and a.resource_name.startswith(d.resource_name))
            for d in denies)
        if not dominated:
            return True
    return False


TYPE_BINDINGS = st.builds(
    AclBinding, st.just(A.TOPIC), st.text(alphabet="ah*", min_size=1, max_size=3),
    st.sampled_from([A.LITERAL, A.PREFIXED]), st.sampled_from([ME, "User:*", "User:bob"]),
    st.sampled_from(["*", HOST, "10.0.0.9"]), st.sampled_from([A.WRITE, A.ALL, A.READ]),
    st.sampled_from([A.ALLOW, A.DENY]))


@settings(max_examples=400, deadline=None)
@given(st.lists(TYPE_BINDINGS, max_size=6), st.booleans(), st.booleans())
def test_write_on_any_topic_matches_kafkas_authorize_by_resource_type(acls, allow_if_none, sup):
    """What idempotent InitProducerId asks (Kafka >= 2.8): WRITE on at least one topic."""
    supers = {ME} if sup else set()
    authz = Authorizer(supers, allow_if_none, acls)
    assert authz.authorize_any(ME, HOST, A.WRITE, A.TOPIC) == by_type_oracle(
        list(set(acls)), supers, allow_if_none, ME, HOST, A.WRITE, A.TOPIC)


# ---------------------------------------------------------------- the broker part


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    """Authorizer on, ``allow.everyone.if.no.acl.found`` (so ANONYMOUS may manage ACLs),
    topics ta and tb, transaction xa Ongoing over ta-0 and tb-0, xb initialised."""
    data = tmp_path_factory.mktemp("txn-acls")
    b = BrokerProcess(data, free_port_number(), {
        "authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true",
        "auto.create.topics.enable": "false"}).start()
    try:
        raw = KafkaSocket(b.port)
        made = raw.request(19, 7, {"topics": [
            {"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []} for t in ("ta", "tb")], "timeout_ms": 5000, "validate_only": False})
        assert [t.error_code for t in made.topics] == [0, 0]
        pids = {}
        for txn in ("xa", "xb"):
            got = raw.request(22, 4, {"transactional_id": txn, "transaction_timeout_ms": 600_000,
                                   "producer_id": -1, "producer_epoch": -1})
            assert got.error_code == 0
            pids[txn] = (got.producer_id, got.producer_epoch)
        added = raw.request(24, 3, {
            "v3_and_below_transactional_id": "xa", "v3_and_below_producer_id": pids["xa"][0],
            "v3_and_below_producer_epoch": pids["xa"][1],
            "v3_and_below_topics": [{"name": "ta", "partitions": [0]},
                                    {"name": "tb", "partitions": [0]}]})
        assert [r.partition_error_code for t in added.results_by_topic_v3_and_below
                for r in t.results_by_partition] == [0, 0]
        raw.sock.close()
        yield b, max(p for p, _ in pids.values()) + 1000
    finally:
        b.stop()


NAMES = {A.TOPIC: ["t", "ta", "tb", "tc", "h", "*"], A.GROUP: ["g", "ga", "gb", "*"],
         A.TRANSACTIONAL_ID: ["x", "xa", "xb", "xc", "*"]}


@st.composite
def bindings(draw: Any) -> AclBinding:
    rtype = draw(st.sampled_from([A.TOPIC, A.GROUP, A.TRANSACTIONAL_ID, A.CLUSTER]))
    if rtype == A.CLUSTER:  # only what idempotent InitProducerId asks; MANAGE stays usable
        name, pattern, op = A.CLUSTER_NAME, A.LITERAL, A.IDEMPOTENT_WRITE
    else:
        name = draw(st.sampled_from(NAMES[rtype]))
        pattern = draw(st.sampled_from([A.LITERAL, A.PREFIXED]))
        op = draw(st.sampled_from([A.ALL, A.READ, A.WRITE, A.DESCRIBE, A.CREATE]))
    return AclBinding(rtype, name, pattern, draw(st.sampled_from([ME, "User:*", "User:bob"])),
                      draw(st.sampled_from(["*", HOST, "10.0.0.9"])), op,
                      draw(st.sampled_from([A.ALLOW, A.DENY])))


def _by_topic(parts: list[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in parts:
        out.setdefault(t, []).append(p)
    return out


def ask(raw: KafkaSocket, txn: str, pid: int, group: str, parts: list[tuple[str, int]]) -> dict[str, Any]:
    """Every transaction API once; the answers as plain comparable values."""
    topics = _by_topic(parts)
    out: dict[str, Any] = {}
    r = raw.request(24, 3, {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid,
                         "v3_and_below_producer_epoch": 0,
                         "v3_and_below_topics": [{"name": t, "partitions": ps}
                                                 for t, ps in topics.items()]})
    out["add_partitions"] = {(t.name, p.partition_index): p.partition_error_code
                             for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}
    out["add_offsets"] = raw.request(25, 3, {"transactional_id": txn, "producer_id": pid,
                                          "producer_epoch": 0, "group_id": group}).error_code
    out["end_txn"] = raw.request(26, 3, {"transactional_id": txn, "producer_id": pid,
                                      "producer_epoch": 0, "committed": True}).error_code
    r = raw.request(28, 2, {"transactional_id": txn, "group_id": group, "producer_id": pid,
                         "producer_epoch": 0, "topics": [
                             {"name": t, "partitions": [
                                 {"partition_index": p, "committed_offset": 0,
                                  "committed_leader_epoch": -1, "committed_metadata": ""}
                                 for p in ps]} for t, ps in topics.items()]})
    out["txn_offset_commit"] = {(t.name, p.partition_index): p.error_code
                                for t in r.topics for p in t.partitions}
    # Produce: a transactional batch under the id, one under a null id, and a plain batch
    # under the id (only transactional batches need the id; each call a new producer).
    for key, txn_field, transactional in (("produce", txn, True), ("produce_null_id", None, True),
                                          ("produce_plain", txn, False)):
        batch = build_batch([Record(0, BASE_TS, None, b"v", [])], is_transactional=transactional,
                            producer_id=next(PRODUCER_IDS) if transactional else -1,
                            producer_epoch=0 if transactional else -1,
                            base_sequence=0 if transactional else -1)
        r = raw.request(0, 9, {"transactional_id": txn_field, "acks": -1, "timeout_ms": 5000,
                            "topic_data": [{"name": t, "partition_data": [
                                {"index": p, "records": batch} for p in ps]}
                                for t, ps in topics.items()]})
        out[key] = {(t.name, p.index): p.error_code for t in r.responses
                    for p in t.partition_responses}
    r = raw.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": -1,
                         "producer_id": -1, "producer_epoch": -1})
    out["idempotent_init"] = r.error_code
    r = raw.request(65, 0, {"transactional_ids": TXN_IDS})
    out["describe"] = {s.transactional_id: (s.error_code, s.transaction_state,
                                            tuple((t.topic, tuple(t.partitions)) for t in s.topics))
                       for s in r.transaction_states}
    r = raw.request(66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})
    out["list"] = sorted(s.transactional_id for s in r.transaction_states)
    return out


def expected(acls: list[AclBinding], base: dict[str, Any], txn: str, group: str,
             parts: list[tuple[str, int]]) -> dict[str, Any]:
    """The baseline, overridden where Kafka's checks (in Kafka's order) refuse."""
    def ok(op: int, rtype: int, name: str) -> bool:
        return oracle(acls, set(), True, ME, HOST, op, rtype, name)

    txn_ok, group_ok = ok(A.WRITE, A.TRANSACTIONAL_ID, txn), ok(A.READ, A.GROUP, group)
    out = dict(base)
    if not txn_ok:
        out["add_partitions"] = {tp: TXN_AUTH for tp in parts}
    elif any(not ok(A.WRITE, A.TOPIC, t) for t, _ in parts):
        out["add_partitions"] = {
            (t, p): TOPIC_AUTH if not ok(A.WRITE, A.TOPIC, t)
            else base["add_partitions"][(t, p)] if base["add_partitions"][(t, p)] == 3
            else int(ErrorCode.OPERATION_NOT_ATTEMPTED) for t, p in parts}
    out["add_offsets"] = TXN_AUTH if not txn_ok else GROUP_AUTH if not group_ok \
        else base["add_offsets"]
    out["end_txn"] = TXN_AUTH if not txn_ok else base["end_txn"]
    out["txn_offset_commit"] = {
        (t, p): TXN_AUTH if not txn_ok else GROUP_AUTH if not group_ok
        else TOPIC_AUTH if not ok(A.READ, A.TOPIC, t) else base["txn_offset_commit"][(t, p)]
        for t, p in parts}
    out["produce"] = {(t, p): TXN_AUTH if not txn_ok else TOPIC_AUTH if not ok(A.WRITE, A.TOPIC, t)
                      else base["produce"][(t, p)] for t, p in parts}
    out["produce_plain"] = {(t, p): TOPIC_AUTH if not ok(A.WRITE, A.TOPIC, t)
                            else base["produce_plain"][(t, p)] for t, p in parts}
    idempotent = (ok(A.IDEMPOTENT_WRITE, A.CLUSTER, A.CLUSTER_NAME)
                  or by_type_oracle(acls, set(), True, ME, HOST, A.WRITE, A.TOPIC))
    out["idempotent_init"] = base["idempotent_init"] if idempotent else CLUSTER_AUTH
    out["describe"] = {
        i: (TXN_AUTH, "", ()) if not ok(A.DESCRIBE, A.TRANSACTIONAL_ID, i)
        else (code, state, tuple((t, ps) for t, ps in topics if ok(A.DESCRIBE, A.TOPIC, t)))
        for i, (code, state, topics) in base["describe"].items()}
    out["list"] = [i for i in base["list"] if ok(A.DESCRIBE, A.TRANSACTIONAL_ID, i)]
    return out


def _acl_call(raw: KafkaSocket, key: int, body: dict[str, Any]) -> Any:
    got = raw.request(key, 2, body)
    codes = [r.error_code for r in (got.results if key == 30 else got.filter_results)]
    assert codes == [0] * len(codes)
    return got


def set_acls(raw: KafkaSocket, acls: list[AclBinding]) -> None:
    for batch in ([MANAGE], acls):  # MANAGE first: it is what lets the second batch in
        _acl_call(raw, 30, {"creations": [
            {"resource_type": b.resource_type, "resource_name": b.resource_name,
             "resource_pattern_type": b.pattern_type, "principal": b.principal, "host": b.host,
             "operation": b.operation, "permission_type": b.permission} for b in batch]})


def clear_acls(raw: KafkaSocket) -> None:
    _acl_call(raw, 31, {"filters": [{
        "resource_type_filter": A.ANY, "resource_name_filter": None, "pattern_type_filter": A.ANY,
        "principal_filter": None, "host_filter": None, "operation": A.ANY,
        "permission_type": A.ANY}]})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(bindings(), max_size=8), st.sampled_from(TXN_IDS), st.sampled_from(["ga", "gb"]),
       st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=4, unique=True))
def test_transaction_apis_answer_what_kafkas_checks_decide(txn_broker, acls, txn, group, parts):
    broker, wrong_pid = txn_broker
    raw = KafkaSocket(broker.port)
    try:
        base = ask(raw, txn, wrong_pid, group, parts)
        set_acls(raw, acls)
        try:
            got = ask(raw, txn, wrong_pid, group, parts)
        finally:
            clear_acls(raw)
        assert got == expected(list({MANAGE, *acls}), base, txn, group, parts)
    finally:
        raw.sock.close()


def test_baseline_is_not_itself_an_authorization_failure(txn_broker):
    """Guards the oracle: with no ACLs, no answer is an authorization error, and the open
    transaction xa is described with both of its partitions."""
    broker, wrong_pid = txn_broker
    raw = KafkaSocket(broker.port)
    try:
        base = ask(raw, "xa", wrong_pid, "ga", [("ta", 0), ("tb", 0)])
    finally:
        raw.sock.close()
    auth = {TXN_AUTH, TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH}
    flat = [v for k in ("add_partitions", "txn_offset_commit", "produce", "produce_plain")
            for v in base[k].values()]
    assert not auth & {*flat, base["add_offsets"], base["end_txn"], base["idempotent_init"]}
    # Transactional records under a null id are refused whenever an authorizer is on.
    assert set(base["produce_null_id"].values()) == {TXN_AUTH}
    assert base["describe"]["xa"] == (0, "Ongoing", (("ta", (0,)), ("tb", (0,))))
    assert base["list"] == ["xa", "xb"]
