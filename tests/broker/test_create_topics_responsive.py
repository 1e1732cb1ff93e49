"""A CreateTopics, an auto-creating Metadata or a DeleteTopics of many topics does not
stop the broker serving everyone else.

Each topic's creation writes files and fsyncs them on the event loop; a request
creating a hundred topics used to run all of them in one go, so every other
connection waited for the whole batch: librdkafka's test 0042/0081 batches held the
loop for seconds under load, and consumers of other groups, whose heartbeats had to
wait, lost their sessions (librdkafka test 0045 "session timed out"). The handler now
yields to the loop between topics, so a request from another client is answered while
the batch is still going: a Metadata listing taken meanwhile sees part of the batch.
The Metadata handler's auto-creation (librdkafka's 0042 asks for 20 new topics in one
Metadata request) and DeleteTopics (the suite deletes its 60-topic batches at once)
yield the same way. Real clients only: confluent-kafka (CreateTopics)
or kafka-python (one Metadata request naming every topic) creates the batch, a second
confluent-kafka admin client (its own connection) lists topics meanwhile.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.protocol.metadata import MetadataRequest

from tests.helpers.broker import BrokerProcess

BATCH = 120


def _listings_during(broker: BrokerProcess, prefix: str, create: Callable[[], None]) -> list[int]:
    """Run ``create`` while another client lists topics in a loop; how many of the
    batch's topics each listing saw."""
    lister = AdminClient({"bootstrap.servers": broker.bootstrap})
    lister.list_topics(timeout=30)  # connected before the batch starts
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            listing = lister.list_topics(timeout=30)
            seen.append(sum(1 for t in listing.topics if t.startswith(prefix)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        create()
    finally:
        done.set()
        watcher.join(60)
    seen.append(sum(1 for t in lister.list_topics(timeout=30).topics if t.startswith(prefix)))
    return seen


def test_other_clients_are_served_during_a_large_create_topics(broker: BrokerProcess) -> None:
    prefix = f"batch-{uuid.uuid4().hex[:8]}-"
    names = [f"{prefix}{i}" for i in range(BATCH)]
    creator = AdminClient({"bootstrap.servers": broker.bootstrap})

    def create() -> None:
        futures = creator.create_topics(
            [NewTopic(n, num_partitions=4, replication_factor=1) for n in names],
            request_timeout=120,
            operation_timeout=120,
        )
        for name, fut in futures.items():
            assert fut.result(timeout=180) is None, name

    seen = _listings_during(broker, prefix, create)
    assert seen[-1] == BATCH
    assert [k for k in seen if 0 < k < BATCH], (
        f"no listing was answered while the {BATCH} topics were being created "
        f"(topics of the batch seen by each listing: {seen})"
    )


def test_other_clients_are_served_during_a_large_metadata_auto_create(
    broker: BrokerProcess,
) -> None:
    prefix = f"auto-{uuid.uuid4().hex[:8]}-"
    names = [f"{prefix}{i}" for i in range(BATCH)]
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=120_000)

    def create() -> None:
        req = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=True,
        )
        resp = kp._manager.run(kp._manager.send, req, 0)
        assert sorted((t.name, t.error_code) for t in resp.topics) == sorted(
            (n, 0) for n in names
        )

    try:
        seen = _listings_during(broker, prefix, create)
    finally:
        kp.close()
    assert seen[-1] == BATCH
    assert [k for k in seen if 0 < k < BATCH], (
        f"no listing was answered while the {BATCH} topics were being auto-created "
        f"(topics of the batch seen by each listing: {seen})"
    )


def test_other_clients_are_served_during_a_large_delete_topics(broker: BrokerProcess) -> None:
    prefix = f"gone-{uuid.uuid4().hex[:8]}-"
    names = [f"{prefix}{i}" for i in range(BATCH)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics(
        [NewTopic(n, num_partitions=4, replication_factor=1) for n in names],
        request_timeout=120,
        operation_timeout=120,
    ).values():
        fut.result(timeout=180)

    def delete() -> None:
        futures = admin.delete_topics(names, request_timeout=120, operation_timeout=120)
        for name, fut in futures.items():
            assert fut.result(timeout=180) is None, name

    seen = _listings_during(broker, prefix, delete)
    assert seen[-1] == 0
    assert [k for k in seen if 0 < k < BATCH], (
        f"no listing was answered while the {BATCH} topics were being deleted "
        f"(topics of the batch seen by each listing: {seen})"
    )
