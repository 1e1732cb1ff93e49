"""client.Client against the real broker: negotiation, admin, produce options, errors."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from client_oracle import unique_topic

from client import Client, KafkaError, ProducerRecord, TopicPartition
from client.aio import CLIENT_VERSIONS, LIST_OFFSETS, PRODUCE, decode_records
from client.partitioner import partition_for_key
from client.producer import Producer
from protocol import api
from protocol.errors import ErrorCode
from storage import records as rec

# Two days ago: in the past (the broker refuses > 1 h ahead) and inside the
# default 7-day retention, so no retention check can delete what a test wrote.
T0 = (time.time_ns() // 1_000_000 - 2 * 86_400_000) // 1000 * 1000


@pytest.fixture
def broker(shared_broker):  # type: ignore[no-untyped-def]
    """One broker for the module: every test here makes its own topics (unique_topic)."""
    return shared_broker


async def test_connect_uses_the_highest_version_both_sides_support(broker) -> None:  # type: ignore[no-untyped-def]
    async with await Client.connect(broker.bootstrap) as c:
        for key in (PRODUCE, LIST_OFFSETS):
            lo, hi = CLIENT_VERSIONS[key]
            ours = api.API_VERSIONS[key]  # type: ignore[index]
            broker_lo, broker_hi = c._broker_ranges[key]
            assert c.api_version(key) == min(hi, ours.max_version, broker_hi)


async def test_connect_to_a_closed_port_is_a_clear_network_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(KafkaError) as ei:
        await Client.connect(f"127.0.0.1:{port}", request_timeout=2)
    assert ei.value.code == ErrorCode.NETWORK_EXCEPTION
    assert str(port) in str(ei.value)


async def test_topics_create_list_delete_and_their_errors(broker) -> None:  # type: ignore[no-untyped-def]
    async with await Client.connect(broker.bootstrap) as c:
        name = unique_topic("admin")
        await c.create_topic(name, partitions=4, configs={"retention.ms": "3600000"})
        assert (await c.list_topics())[name] == [0, 1, 2, 3]
        with pytest.raises(KafkaError) as ei:
            await c.create_topic(name)
        assert ei.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        with pytest.raises(KafkaError) as ei:
            await c.create_topic(unique_topic("badcfg"), configs={"no.such.config": "1"})
        assert ei.value.code == ErrorCode.INVALID_CONFIG
        await c.delete_topic(name)
        assert name not in await c.list_topics()
        with pytest.raises(KafkaError) as ei:
            await c.delete_topic(name)
        assert ei.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_produce_to_unknown_topic_raises_with_the_code(broker) -> None:  # type: ignore[no-untyped-def]
    async with await Client.connect(broker.bootstrap) as c:
        with pytest.raises(KafkaError) as ei:
            await c.produce("no-such-topic", [ProducerRecord(value=b"x")], partition=0)
        assert ei.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("acks", [-1, 1])
async def test_every_codec_round_trips_byte_exact(broker, compression, acks) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("codec")
    records = [
        ProducerRecord(key=None, value=None, timestamp=T0),
        ProducerRecord(key=b"", value=b"", timestamp=1_700_000_000_005, headers=[("a", None)]),
        ProducerRecord(key="k\u00e9", value=bytes(range(256)) * 4, timestamp=1_700_000_000_001,
                       headers=[("x", b"1"), ("x", b"2"), ("\u00fc", b"")]),
    ]
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic)
        offsets = await c.produce(topic, records, partition=0, acks=acks, compression=compression)
        assert offsets == [0, 1, 2]
        got = [r async for r in c.consume(topic, 0, 0)]
        want = [
            (0, T0, None, None, []),
            (1, 1_700_000_000_005, b"", b"", [("a", None)]),
            (2, 1_700_000_000_001, "k\u00e9".encode(), bytes(range(256)) * 4,
             [("x", b"1"), ("x", b"2"), ("\u00fc", b"")]),
        ]
        assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in got] == want
        assert all(r.topic == topic and r.partition == 0 for r in got)
        # The stored batch kept the codec we asked for.
        raw = await c.fetch_raw(topic, 0, 0)
        (_, h), = list(rec.iter_batches(raw.records_bytes))
        assert h.compression == {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[compression]


async def test_acks_zero_returns_minus_one_and_data_arrives(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("acks0")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic)
        offs = await c.produce(topic, [ProducerRecord(value=b"%d" % i) for i in range(5)],
                               partition=0, acks=0)
        assert offs == [-1] * 5
        # A request after it on the same connection is answered after the broker appended.
        for _ in range(200):  # up to 10 s on a loaded machine
            if (await c.latest(topic))[0] == 5:
                break
            await asyncio.sleep(0.05)
        assert [r.value async for r in c.consume(topic, 0, 0)] == [b"%d" % i for i in range(5)]


async def test_default_partitioner_places_keys_like_kafka(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("keys")
    keys = [f"user-{i}".encode() for i in range(60)]
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=5)
        await c.produce(topic, [ProducerRecord(key=k, value=k) for k in keys])
        for p in range(5):
            got = [r.key async for r in c.consume(topic, p, 0)]
            assert got == [k for k in keys if partition_for_key(k, 5) == p]


async def test_produce_batch_appends_a_prebuilt_batch(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("prebuilt")
    rs = [rec.Record(i, T0 + i, None, b"v%d" % i) for i in range(10)]
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=2)
        assert await c.produce_batch(topic, 1, rec.build_batch(rs)) == 0
        assert await c.produce_batch(topic, 1, rec.build_batch(rs)) == 10
        records, hw = await c.fetch(topic, 1, 12)
        assert hw == 20
        assert [(r.offset, r.value) for r in records] == [(o, b"v%d" % (o - 10)) for o in range(12, 20)]


async def test_producer_batches_by_linger_and_keeps_order(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("producer")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=3)
        async with Producer(c, linger_ms=20, batch_bytes=2000) as p:
            futs = [
                await p.send(topic, ProducerRecord(key=b"k%d" % (i % 7), value=b"%d" % i,
                                                   timestamp=T0 + i))
                for i in range(500)
            ]
        metas = [f.result() for f in futs]
        # Each partition's offsets are 0..n-1 in send order, and keys land by murmur2.
        for part in range(3):
            mine = [m.offset for m in metas if m.partition == part]
            assert mine == list(range(len(mine)))
        for i, m in enumerate(metas):
            assert m.partition == partition_for_key(b"k%d" % (i % 7), 3)
        # batch_bytes=2000 forced several batches per partition.
        raw = await c.fetch_raw(topic, metas[0].partition, 0)
        assert len(list(rec.iter_batches(raw.records_bytes))) > 1
        by_value = {}
        for part in range(3):
            async for r in c.consume(topic, part, 0):
                by_value[r.value] = (part, r.offset)
        assert by_value == {b"%d" % i: (m.partition, m.offset) for i, m in enumerate(metas)}


async def test_producer_fails_every_future_of_a_rejected_batch(broker) -> None:  # type: ignore[no-untyped-def]
    async with await Client.connect(broker.bootstrap) as c:
        p = Producer(c, linger_ms=1)
        fut = await p.send("missing-topic", ProducerRecord(value=b"x"), partition=0)
        with pytest.raises(KafkaError) as ei:
            await p.flush()
        assert ei.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert isinstance(fut.exception(), KafkaError)


async def test_pipelined_requests_on_one_connection_get_their_own_answers(broker) -> None:  # type: ignore[no-untyped-def]
    topics = [unique_topic("pipe") for _ in range(5)]
    async with await Client.connect(broker.bootstrap) as c:
        for i, t in enumerate(topics):
            await c.create_topic(t)
            await c.produce(t, [ProducerRecord(value=b"x", timestamp=T0 + i)] * (i + 1),
                            partition=0)
        answers = await asyncio.gather(*(c.latest(t) for t in topics for _ in range(4)))
        assert answers == [{0: i + 1} for i in range(5) for _ in range(4)]
        assert len(c._conns) <= 1


async def test_broker_death_fails_pending_requests_instead_of_hanging(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("death")
    c = await Client.connect(broker.bootstrap, request_timeout=10)
    try:
        await c.create_topic(topic)
        follow = asyncio.ensure_future(
            c.fetch_raw(topic, 0, 0, max_wait_ms=5000)  # long poll, parked on the broker
        )
        await asyncio.sleep(0.3)
        broker.kill()
        with pytest.raises(KafkaError) as ei:
            await asyncio.wait_for(follow, 5)
        assert ei.value.code == ErrorCode.NETWORK_EXCEPTION
    finally:
        await c.close()


def test_decode_records_skips_control_batches_and_earlier_offsets() -> None:
    data = rec.build_batch([rec.Record(0, 5, None, b"a"), rec.Record(1, 6, None, b"b")], base_offset=10)
    data += rec.build_batch([rec.Record(0, 7, None, b"c")], base_offset=12)
    out, nxt = decode_records(data, "t", 0, 11, None)
    assert [(r.offset, r.value) for r in out] == [(11, b"b"), (12, b"c")]
    assert nxt == 13
    out, nxt = decode_records(data, "t", 0, 10, 12)
    assert [r.offset for r in out] == [10, 11] and nxt == 12
    # A torn trailing batch is left for the next fetch.
    out, nxt = decode_records(data[:-3], "t", 0, 10, None)
    assert [r.offset for r in out] == [10, 11] and nxt == 12
    # A control batch (transaction marker) is not data, but the next offset moves past it.
    control = bytearray(rec.build_batch([rec.Record(0, 8, b"\x00\x00\x00\x01", b"")], base_offset=13))
    control[rec.ATTRIBUTES_OFFSET + 1] |= rec.CONTROL_MASK
    control[rec.CRC_OFFSET:rec.CRC_OFFSET + 4] = rec.compute_crc(control, 0, len(control)).to_bytes(4, "big")
    out, nxt = decode_records(data + bytes(control), "t", 0, 12, None)
    assert [r.offset for r in out] == [12] and nxt == 14


async def test_list_offsets_for_unknown_partition_raises(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("lo")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic)
        with pytest.raises(KafkaError) as ei:
            await c.list_offsets({TopicPartition(topic, 7): 0})
        assert ei.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_produce_splits_inputs_larger_than_one_batch(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("big")
    values = [bytes([i % 251]) * 1000 for i in range(2500)]  # ~2.5 MB for one partition
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=2)
        offsets = await c.produce(topic, [ProducerRecord(key=b"k", value=v) for v in values])
        part = partition_for_key(b"k", 2)
        assert offsets == list(range(2500))
        got = [r async for r in c.consume(topic, part, 0)]
        assert [r.value for r in got] == values
        raw = await c.fetch_raw(topic, part, 0, max_bytes=8 << 20)
        sizes = [h.size for _, h in rec.iter_batches(raw.records_bytes)]
        assert len(sizes) >= 3 and max(sizes) <= 1_048_588


async def test_timed_out_request_fails_alone_and_its_late_answer_is_dropped(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("timeout")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic)
        with pytest.raises(KafkaError) as ei:
            # The broker parks an empty long poll for 1.5 s; we give up after 0.3 s.
            await c.fetch_raw(topic, 0, 0, max_wait_ms=1500, timeout=0.3)
        assert ei.value.code == ErrorCode.REQUEST_TIMED_OUT
        await c.produce(topic, [ProducerRecord(value=b"after")], partition=0)
        await asyncio.sleep(1.5)  # the late Fetch answer arrives meanwhile and is discarded
        assert await c.latest(topic) == {0: 1}
        assert [r.value async for r in c.consume(topic, 0, 0)] == [b"after"]


def test_keys_land_where_librdkafka_murmur2_random_puts_them(broker) -> None:  # type: ignore[no-untyped-def]
    """confluent-kafka with partitioner=murmur2_random is the Java-compatible oracle."""
    from confluent_kafka import Producer as CKProducer

    from client import SyncClient

    topic = unique_topic("ckkeys")
    keys = [f"k{i}".encode() for i in range(40)] + [b"", bytes(range(7))]
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic, partitions=7)
        p = CKProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                        "linger.ms": 0})
        placed: dict[bytes, int] = {}

        def report(err, msg) -> None:  # type: ignore[no-untyped-def]
            assert err is None, err
            placed[msg.key()] = msg.partition()

        for k in keys:
            p.produce(topic, value=b"v", key=k, on_delivery=report)
        assert p.flush(30) == 0
        assert placed == {k: partition_for_key(k, 7) for k in keys}
        # And our client put the same keys in the same partitions.
        c.produce(topic, [ProducerRecord(key=k, value=b"ours") for k in keys])
        ours = {
            r.key: r.partition
            for part in range(7)
            for r in c.consume(topic, part, 0)
            if r.value == b"ours"
        }
        assert ours == placed


async def test_future_timestamp_is_rejected_with_invalid_timestamp(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("future")
    far = time.time_ns() // 1_000_000 + 3 * 3_600_000  # beyond the default 1 h after.max
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic)
        with pytest.raises(KafkaError) as ei:
            await c.produce(topic, [ProducerRecord(value=b"ok", timestamp=T0),
                                    ProducerRecord(value=b"late", timestamp=far)], partition=0)
        assert ei.value.code == ErrorCode.INVALID_TIMESTAMP
        # The whole batch was rejected: nothing of it is in the log.
        assert await c.latest(topic) == {0: 0}


async def test_log_append_time_lookups_use_the_stored_timestamps(broker) -> None:  # type: ignore[no-untyped-def]
    from client_oracle import Produced, first_at_or_after

    topic = unique_topic("lat")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, configs={"message.timestamp.type": "LogAppendTime"})
        for i in range(6):
            await c.produce(topic, [ProducerRecord(value=b"%d" % i, timestamp=1_000 + i)] * 3,
                            partition=0)
            await asyncio.sleep(0.003)
        stored = [r async for r in c.consume(topic, 0, 0)]
        assert all(r.timestamp > T0 for r in stored)  # broker time, not the 1_000 + i we sent
        log = [Produced(0, r.offset, r.timestamp, r.key, r.value) for r in stored]
        for t in sorted({r.timestamp for r in stored} | {stored[0].timestamp - 1,
                                                          stored[-1].timestamp + 1}):
            assert (await c.offsets_for_times(topic, t))[0] == first_at_or_after(log, t)


def test_lookups_survive_a_broker_restart_on_the_same_client(broker) -> None:  # type: ignore[no-untyped-def]
    from client import SyncClient

    topic = unique_topic("restart")
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic, partitions=2)
        ts = [T0 + (i * 37) % 100 for i in range(200)]
        c.produce(topic, [ProducerRecord(value=b"%d" % i, timestamp=t) for i, t in enumerate(ts)],
                  partition=1)
        before = {t: c.offsets_for_times(topic, t) for t in range(min(ts) - 1, max(ts) + 2)}
        broker.restart()
        after = {t: c.offsets_for_times(topic, t) for t in before}
        assert after == before
        assert c.latest(topic) == {0: 0, 1: 200}


async def test_null_keys_stick_per_batch_and_rotate_over_partitions(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("sticky")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=3)
        for _ in range(3):
            await c.produce(topic, [ProducerRecord(value=b"x")] * 10)
        # Each call went to one partition, and three calls covered all three.
        assert await c.latest(topic) == {0: 10, 1: 10, 2: 10}
        async with Producer(c, linger_ms=50, batch_bytes=600) as p:
            metas = [await p.send(topic, ProducerRecord(value=b"y" * 10)) for _ in range(300)]
        counts = {part: sum(1 for m in metas if m.result().partition == part) for part in range(3)}
        assert all(n > 0 for n in counts.values()), counts


async def test_reads_retry_once_on_a_connection_the_broker_dropped(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("stale")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic)
        await c.produce(topic, [ProducerRecord(value=b"a", timestamp=T0)], partition=0)
        broker.restart()  # blocks this loop: the client cannot notice the old socket died
        assert await c.offsets_for_times(topic, 0) == {0: (0, T0)}
        broker.restart()
        assert [r.value for r in (await c.fetch(topic, 0, 0))[0]] == [b"a"]
        broker.restart()
        assert topic in await c.list_topics()


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_reads_what_our_client_wrote(broker, compression) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    from client import SyncClient

    topic = unique_topic("ckread")
    sent = [
        ProducerRecord(key=b"k%d" % i if i % 3 else None, value=(b"v%d" % i) * (i % 50),
                       headers=[("h", b"%d" % i)] if i % 2 else [], timestamp=T0 + i)
        for i in range(300)
    ]
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic)
        c.produce(topic, sent, partition=0, compression=compression)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t",
                         "enable.auto.commit": False})
    try:
        consumer.assign([CKTopicPartition(topic, 0, 0)])
        got: list[tuple[object, ...]] = []
        while len(got) < len(sent):
            msgs = consumer.consume(len(sent) - len(got), 10)
            assert msgs, "librdkafka returned nothing"
            for m in msgs:
                assert m.error() is None, m.error()
                got.append((m.offset(), m.timestamp()[1], m.key(), m.value(), m.headers() or []))
    finally:
        consumer.close()
    assert got == [
        (i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(sent)
    ]


async def test_idempotent_producer_resends_over_a_dropped_connection_without_duplicates(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("idem")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic, partitions=2)
        async with Producer(c, linger_ms=1, acks=-1, idempotent=True, retry_backoff_ms=50) as p:
            first = [await p.send(topic, ProducerRecord(value=b"a%d" % i), partition=i % 2)
                     for i in range(20)]
            await p.flush()
            broker.restart()  # blocks the loop: the producer's socket is stale, its next send fails
            second = [await p.send(topic, ProducerRecord(value=b"b%d" % i), partition=i % 2)
                      for i in range(20)]
        metas = [f.result() for f in first + second]
        for part in range(2):
            got = [r async for r in c.consume(topic, part, 0)]
            want = [b"a%d" % i for i in range(part, 20, 2)] + [b"b%d" % i for i in range(part, 20, 2)]
            assert [r.value for r in got] == want  # each once, in order
            assert [m.offset for m in metas if m.partition == part] == list(range(20))
        # The stored batches carry our producer id and consecutive sequences.
        raw = await c.fetch_raw(topic, 0, 0)
        heads = [h for _, h in rec.iter_batches(raw.records_bytes)]
        assert all(h.producer_id >= 0 for h in heads)
        seqs = [(h.base_sequence, h.records_count) for h in heads]
        assert all(s0 + n0 == s1 for (s0, n0), (s1, _) in zip(seqs, seqs[1:], strict=False))


def test_idempotent_producer_refuses_acks_zero() -> None:
    with pytest.raises(ValueError, match="acknowledgements"):
        Producer(None, acks=0, idempotent=True)  # type: ignore[arg-type]


async def test_recreated_topic_is_seen_once_metadata_expires(broker, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import client.parts.core as aio_module

    topic = unique_topic("recreate")
    async with await Client.connect(broker.bootstrap) as c, \
            await Client.connect(broker.bootstrap) as admin:
        await admin.create_topic(topic, partitions=1)
        assert await c.partitions_for(topic) == [0]
        await admin.delete_topic(topic)
        await admin.create_topic(topic, partitions=3)
        assert await c.partitions_for(topic) == [0]  # still cached
        monkeypatch.setattr(aio_module, "METADATA_MAX_AGE_S", 0.0)
        assert await c.partitions_for(topic) == [0, 1, 2]


def test_parse_bootstrap_forms_and_errors() -> None:
    from client.connection import parse_bootstrap

    assert parse_bootstrap("h1:1, h2:2,h3") == [("h1", 1), ("h2", 2), ("h3", 9092)]
    assert parse_bootstrap("[::1]:9093") == [("::1", 9093)]
    for bad in ("", " , ", "h:notaport", "h:0", ":9092", "h:70000"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


async def test_connect_skips_an_unreachable_bootstrap_server(broker) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    async with await Client.connect(f"127.0.0.1:{dead},{broker.bootstrap}", request_timeout=5) as c:
        assert isinstance(await c.list_topics(), dict)


async def test_producer_futures_all_resolve_when_the_broker_dies(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("dies")
    async with await Client.connect(broker.bootstrap, request_timeout=5) as c:
        await c.create_topic(topic)
        p = Producer(c, linger_ms=1)
        before = [await p.send(topic, ProducerRecord(value=b"a"), partition=0) for _ in range(10)]
        await p.flush()
        broker.kill()
        after = [await p.send(topic, ProducerRecord(value=b"b"), partition=0) for _ in range(10)]
        with pytest.raises(KafkaError) as ei:
            await asyncio.wait_for(p.flush(), 30)
        assert ei.value.code == ErrorCode.NETWORK_EXCEPTION
        assert all(f.result().offset == i for i, f in enumerate(before))
        assert all(f.done() and isinstance(f.exception(), KafkaError) for f in after)


async def test_producer_compresses_its_batches(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("pzstd")
    async with await Client.connect(broker.bootstrap) as c:
        await c.create_topic(topic)
        async with Producer(c, linger_ms=2, acks=-1, compression="zstd") as p:
            for i in range(200):
                await p.send(topic, ProducerRecord(value=b"%d" % i * 20, headers=[("i", b"%d" % i)]),
                             partition=0)
        raw = await c.fetch_raw(topic, 0, 0)
        assert {h.compression for _, h in rec.iter_batches(raw.records_bytes)} == {4}
        got = [r async for r in c.consume(topic, 0, 0)]
        assert [(r.value, r.headers) for r in got] == [
            (b"%d" % i * 20, [("i", b"%d" % i)]) for i in range(200)
        ]
