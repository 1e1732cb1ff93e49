"""Produce and Fetch are served by the broker's pump (broker/pump.py), later than the
cheap requests read in the same pass. That must never be visible to one connection:
pipelined on one socket, every answer comes back in request order and reflects
exactly the requests before it. Checked with hypothesis against a sequential oracle
over random mixes of Produce, ListOffsets (by time and LATEST), Fetch, Metadata and
ApiVersions, all sent in one write."""

from __future__ import annotations

import itertools
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.records import Record, build_batch
from tests.helpers.kafka_socket import KafkaSocket, create_topic, fetch_body
from tests.helpers.list_offsets_oracle import expected

NOW = int(time.time() * 1000)
_topics = itertools.count()

produce = st.tuples(st.just("produce"), st.lists(st.integers(NOW - 600_000, NOW), min_size=1,
                                                  max_size=4))
lookup = st.tuples(st.just("lookup"), st.one_of(st.integers(NOW - 700_000, NOW + 1),
                                                  st.just(-1)))
fetch = st.tuples(st.just("fetch"), st.integers(0, 20))
cheap = st.tuples(st.sampled_from(["metadata", "versions"]), st.none())
ops = st.lists(st.one_of(produce, lookup, fetch, cheap), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops)
def test_pipelined_mixes_are_answered_in_order_as_if_served_one_by_one(broker: Any,
                                                                       ops: list[Any]) -> None:
    raw = KafkaSocket(broker.port)
    topic = f"pump-{next(_topics)}"
    create_topic(raw, topic)
    frames: list[bytes] = []
    checks: list[tuple[int, str, Any]] = []
    stamps: list[int] = []  # the oracle: the partition after every request before this one
    for kind, arg in ops:
        if kind == "produce":
            cid, frame = _produce(raw, topic, arg)
            checks.append((cid, kind, len(stamps)))
            stamps += arg
        elif kind == "lookup":
            cid, frame = raw.frame(2, 7, {
                "replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                "topics": [{"name": topic, "partitions": [{
                    "partition_index": 0, "current_leader_epoch": -1, "timestamp": arg,
                    "max_num_offsets": 1}]}]})
            checks.append((cid, kind, expected(7, list(stamps), arg)))
        elif kind == "fetch":
            cid, frame = raw.frame(1, 12, fetch_body(topic, min(arg, len(stamps)), max_wait_ms=0))
            checks.append((cid, kind, (min(arg, len(stamps)), len(stamps))))
        elif kind == "metadata":
            cid, frame = raw.frame(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})
            checks.append((cid, kind, None))
        else:
            cid, frame = raw.frame(18, 3, {"client_software_name": "t",
                                           "client_software_version": "1"})
            checks.append((cid, kind, None))
        frames.append(frame)
    raw.send(*frames)
    for want_cid, kind, want in checks:
        cid, resp = raw.read()
        assert cid == want_cid, (kind, cid, want_cid)
        if kind == "produce":
            part = resp.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, want)
        elif kind == "lookup":
            got = resp.topics[0].partitions[0]
            err, ts, off, _epoch = want
            assert (got.error_code, got.timestamp, got.offset) == (err, ts, off), (ops, want)
        elif kind == "fetch":
            offset, end = want
            part = resp.responses[0].partitions[0]
            assert (part.error_code, part.high_watermark) == (0, end)
            assert bool(part.records) == (offset < end)
    raw.close()


def _produce(raw: KafkaSocket, topic: str, timestamps: list[int]) -> tuple[int, bytes]:
    batch = build_batch([Record(i, t, None, b"v", []) for i, t in enumerate(timestamps)])
    return raw.frame(0, 9, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })
