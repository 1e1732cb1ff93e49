"""SyncClient: the blocking wrapper works from threads, after fork, and with a batching producer."""

from __future__ import annotations

import multiprocessing

import pytest
from client_oracle import unique_topic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import KafkaError, ProducerRecord, SyncClient
from protocol.errors import ErrorCode
from tests.helpers.threads import run_on_threads


@pytest.fixture
def broker(shared_broker):  # type: ignore[no-untyped-def]
    """One broker for the module: every test here makes its own topics (unique_topic)."""
    return shared_broker


def test_many_threads_share_one_client(sync_client: SyncClient) -> None:
    topic = unique_topic("threads")
    sync_client.create_topic(topic, partitions=4)

    def work(p: int) -> None:
        for i in range(20):
            sync_client.produce(topic, [ProducerRecord(value=b"%d-%d" % (p, i))], partition=p)

    assert run_on_threads(work, 4) == []
    for p in range(4):
        assert [r.value for r in sync_client.consume(topic, p, 0)] == [
            b"%d-%d" % (p, i) for i in range(20)
        ]


def _child(bootstrap: str, topic: str, parent: SyncClient, q: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        parent.latest(topic)
        q.put("parent client worked in the child")
        return
    except RuntimeError as e:
        assert "another process" in str(e)
    with SyncClient(bootstrap) as c:
        q.put(c.latest(topic))


def test_a_forked_child_gets_its_own_loop(broker, sync_client: SyncClient) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("fork")
    sync_client.create_topic(topic)
    sync_client.produce(topic, [ProducerRecord(value=b"a")] * 3, partition=0)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=_child, args=(broker.bootstrap, topic, sync_client, q))
    proc.start()
    result = q.get(timeout=30)
    proc.join(30)
    assert result == {0: 3}
    assert sync_client.latest(topic) == {0: 3}  # the parent is unaffected


def test_sync_producer_preserves_send_order_and_reports_offsets(sync_client: SyncClient) -> None:
    topic = unique_topic("syncprod")
    sync_client.create_topic(topic, partitions=2)
    with sync_client.producer(linger_ms=2, batch_bytes=500) as p:
        futs = [p.send(topic, ProducerRecord(value=b"%d" % i), partition=i % 2) for i in range(300)]
        p.flush()
        metas = [f.result(timeout=10) for f in futs]
    assert [m.offset for m in metas if m.partition == 0] == list(range(150))
    assert [r.value for r in sync_client.consume(topic, 1, 0)] == [
        b"%d" % i for i in range(1, 300, 2)
    ]


def test_sync_errors_are_the_same_kafka_errors(sync_client: SyncClient) -> None:
    with pytest.raises(KafkaError) as ei:
        sync_client.offsets_for_times("does-not-exist", 0)
    assert ei.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_abandoned_iterator_leaves_the_client_usable(sync_client: SyncClient) -> None:
    topic = unique_topic("abandon")
    sync_client.create_topic(topic)
    sync_client.produce(topic, [ProducerRecord(value=b"%d" % i) for i in range(100)], partition=0)
    it = sync_client.consume(topic, 0, 0)
    assert next(it).offset == 0
    it.close()
    assert len(list(sync_client.consume(topic, 0, 50))) == 50


def test_consume_chunks_cover_the_same_records_as_consume(sync_client: SyncClient) -> None:
    topic = unique_topic("chunks")
    sync_client.create_topic(topic)
    for start in range(0, 3000, 500):
        sync_client.produce(
            topic, [ProducerRecord(value=b"%d" % i) for i in range(start, start + 500)], partition=0
        )
    chunks = list(sync_client.consume_chunks(topic, 0, 123, 2900))
    assert len(chunks) >= 1
    flat = [r.offset for ch in chunks for r in ch]
    assert flat == list(range(123, 2900)) == [r.offset for r in sync_client.consume(topic, 0, 123, 2900)]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=15)
@given(
    sends=st.lists(
        st.tuples(st.one_of(st.none(), st.binary(min_size=1, max_size=4)),
                  st.binary(max_size=300)),
        min_size=1, max_size=120,
    ),
    batch_bytes=st.integers(min_value=64, max_value=4000),
    linger_ms=st.sampled_from([0.0, 1.0, 20.0]),
)
def test_batching_producer_stores_exactly_what_was_sent(
    sync_client: SyncClient, sends: list[tuple[bytes | None, bytes]], batch_bytes: int,
    linger_ms: float,
) -> None:
    from client.partitioner import partition_for_key

    topic = unique_topic("prodprop")
    sync_client.create_topic(topic, partitions=3)
    with sync_client.producer(linger_ms=linger_ms, batch_bytes=batch_bytes) as p:
        futs = [p.send(topic, ProducerRecord(key=k, value=v)) for k, v in sends]
        p.flush()
    metas = [f.result(timeout=10) for f in futs]
    stored = {
        (r.partition, r.offset): (r.key, r.value)
        for part in range(3)
        for r in sync_client.consume(topic, part, 0)
    }
    # Every acknowledged (partition, offset) holds exactly the record sent, and nothing else exists.
    assert stored == {(m.partition, m.offset): kv for m, kv in zip(metas, sends, strict=True)}
    for m, (k, _) in zip(metas, sends, strict=True):
        if k is not None:
            assert m.partition == partition_for_key(k, 3)
    # Per partition, send order is offset order.
    for part in range(3):
        offs = [m.offset for m in metas if m.partition == part]
        assert offs == sorted(offs)
    sync_client.delete_topic(topic)
