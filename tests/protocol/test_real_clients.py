"""Golden bytes: what confluent-kafka (librdkafka), kafka-python and aiokafka really send.

Each live test points a real client at :class:`CaptureServer` (127.0.0.1, answers
with our encoders) while it bootstraps, produces (kafka-python idempotently),
looks up an offset by time and consumes back what it produced (served by our
Fetch encoder), and checks that every captured frame
decodes — through the fast paths where they exist — and re-encodes through the
declarative schema to the same bytes, and that the produced values are in the
decoded records. The pinned frames below were captured
the same way and keep the check even where a client's first bytes never change.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest

from protocol.api import ApiKey, decode_request, encode_request
from tests.protocol.capture import TOPIC, CaptureServer

# (hex frame without size prefix, client, expected api, version, body fields)
PINNED = [
    ("0012000300000001000e676f6c64656e2d72646b61666b610017636f6e666c75656e742d6b61666b612d707974686f6e16322e31362e312d72646b61666b612d322e31362e3000",
     "golden-rdkafka", ApiKey.API_VERSIONS, 3,
     {"client_software_name": "confluent-kafka-python", "client_software_version": "2.16.1-rdkafka-2.16.0"}),
    ("0003000c00000002000e676f6c64656e2d72646b61666b610001000000",
     "golden-rdkafka", ApiKey.METADATA, 12,
     {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}),
    ("00120004000000010009676f6c64656e2d6b70000d6b61666b612d707974686f6e07332e302e313200",
     "golden-kp", ApiKey.API_VERSIONS, 4,
     {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}),
    ("0003000c000000020009676f6c64656e2d6b700000010000",
     "golden-kp", ApiKey.METADATA, 12,
     {"topics": None, "allow_auto_topic_creation": True}),
    ("0012000000000001000a676f6c64656e2d61696f",
     "golden-aio", ApiKey.API_VERSIONS, 0, {}),
    ("0003000500000002000a676f6c64656e2d61696f0000000001",
     "golden-aio", ApiKey.METADATA, 5, {"topics": [], "allow_auto_topic_creation": True}),
]


@pytest.mark.parametrize(("hexframe", "client_id", "key", "version", "fields"), PINNED)
def test_pinned_client_frames_decode_to_what_the_client_meant(
    hexframe: str, client_id: str, key: ApiKey, version: int, fields: dict[str, object]
) -> None:
    frame = bytes.fromhex(hexframe)
    req = decode_request(frame)
    assert (req.api_key, req.api_version, req.client_id) == (key, version, client_id)
    for name, value in fields.items():
        assert req.body[name] == value
    assert encode_request(key, version, req.correlation_id, client_id, req.body)[4:] == frame


@pytest.fixture
def capture() -> Iterator[CaptureServer]:
    server = CaptureServer()
    yield server
    server.close()


def _check(frames: list[bytes], client_id: str, exact: bool = True) -> set[ApiKey]:
    assert frames, "the client sent nothing"
    seen = set()
    for frame in frames:
        req = decode_request(frame)
        assert req.client_id == client_id
        again = encode_request(req.api_key, req.api_version, req.correlation_id, req.client_id, req.body)[4:]
        if exact:
            assert again == frame
        else:
            assert frame.startswith(again)
        seen.add(req.api_key)
    return seen


def _produced_values(frames: list[bytes]) -> bytes:
    blobs = b""
    for frame in frames:
        req = decode_request(frame)
        if req.api_key == ApiKey.PRODUCE:
            for t in req.body.topic_data:
                assert t.name == TOPIC
                for p in t.partition_data:
                    blobs += bytes(p.records)
    return blobs


def _lookups(frames: list[bytes]) -> set[tuple[int, str, int, int]]:
    """(isolation level, topic, partition, timestamp) of every ListOffsets partition sent."""
    out = set()
    for frame in frames:
        req = decode_request(frame)
        if req.api_key == ApiKey.LIST_OFFSETS:
            for t in req.body.topics:
                for p in t.partitions:
                    out.add((req.body.isolation_level, t.name, p.partition_index, p.timestamp))
    return out


VALUES = [f"golden-value-{i}".encode() for i in range(3)]
T = 1_700_000_000_000


def test_librdkafka_frames_decode_and_reencode_byte_for_byte(capture: CaptureServer) -> None:
    import confluent_kafka as ck

    bootstrap = f"127.0.0.1:{capture.port}"
    producer = ck.Producer({"bootstrap.servers": bootstrap, "client.id": "golden-rdkafka",
                            "linger.ms": 0, "acks": 1, "log_level": 0})
    md = producer.list_topics(timeout=10)
    assert md.cluster_id == "capture" and md.controller_id == 1
    for value in VALUES:
        producer.produce(TOPIC, key=b"k", value=value)
    assert producer.flush(10) == 0
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "client.id": "golden-rdkafka",
                            "group.id": "golden", "enable.auto.commit": False, "log_level": 0})
    try:
        found = consumer.offsets_for_times([ck.TopicPartition(TOPIC, 0, T)], timeout=10)
        assert found[0].offset == 0
        consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
        got: list[tuple[int | None, bytes | None]] = []
        deadline = time.monotonic() + 10
        while len(got) < len(VALUES) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value()))
        assert got == list(enumerate(VALUES))  # read back through our Fetch encoder
    finally:
        consumer.close()
    frames = capture.snapshot()
    # librdkafka 2.16's "all topics" Metadata v12 request carries 3 bytes after
    # the body's tag section (01 00 00); decoding ignores trailing bytes, so
    # for librdkafka the re-encoded frame must be a prefix of what was sent.
    seen = _check(frames, "golden-rdkafka", exact=False)
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.LIST_OFFSETS} <= seen
    assert (1, TOPIC, 0, T) in _lookups(frames)  # librdkafka defaults to read_committed
    assert all(v in _produced_values(frames) for v in VALUES)


def test_kafka_python_frames_decode_and_reencode_byte_for_byte(capture: CaptureServer) -> None:
    import kafka

    bootstrap = f"127.0.0.1:{capture.port}"
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, client_id="golden-kp")  # idempotent
    for value in VALUES:
        producer.send(TOPIC, key=b"k", value=value)
    producer.flush(10)
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, client_id="golden-kp")
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        assert consumer.offsets_for_times({tp: T})[tp].offset == 0
        consumer.assign([tp])
        consumer.seek(tp, 0)
        records = [r for rs in consumer.poll(5000).values() for r in rs]
        assert [(r.offset, r.value) for r in records] == list(enumerate(VALUES))
    finally:
        consumer.close()
    frames = capture.snapshot()
    seen = _check(frames, "golden-kp")
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID, ApiKey.PRODUCE,
            ApiKey.LIST_OFFSETS, ApiKey.FETCH} <= seen
    assert (0, TOPIC, 0, T) in _lookups(frames)
    assert all(v in _produced_values(frames) for v in VALUES)


async def test_aiokafka_frames_decode_and_reencode_byte_for_byte(capture: CaptureServer) -> None:
    import aiokafka

    bootstrap = f"127.0.0.1:{capture.port}"
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="golden-aio")
    await producer.start()
    try:
        for value in VALUES:
            await producer.send_and_wait(TOPIC, key=b"k", value=value)
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="golden-aio")
    await consumer.start()
    try:
        tp = aiokafka.TopicPartition(TOPIC, 0)
        assert (await consumer.offsets_for_times({tp: T}))[tp].offset == 0
        consumer.assign([tp])
        consumer.seek(tp, 0)
        records = [r for rs in (await consumer.getmany(timeout_ms=5000)).values() for r in rs]
        assert [(r.offset, r.value) for r in records] == list(enumerate(VALUES))
    finally:
        await consumer.stop()
    frames = capture.snapshot()
    seen = _check(frames, "golden-aio")
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.LIST_OFFSETS, ApiKey.FETCH} <= seen
    assert (0, TOPIC, 0, T) in _lookups(frames)
    assert all(v in _produced_values(frames) for v in VALUES)


def _admin_facts(frames: list[bytes]) -> dict[str, object]:
    """What the admin/commit requests asked for, read through our decoder."""
    facts: dict[str, object] = {}
    for frame in frames:
        req = decode_request(frame)
        body = req.body
        if req.api_key == ApiKey.CREATE_TOPICS:
            t = body.topics[0]
            facts["create"] = (t.name, t.num_partitions, {c.name: c.value for c in t.configs})
        elif req.api_key == ApiKey.DELETE_TOPICS:
            facts["delete"] = list(body.topic_names) if req.api_version < 6 else [t.name for t in body.topics]
        elif req.api_key == ApiKey.OFFSET_COMMIT:
            p = body.topics[0].partitions[0]
            facts["commit"] = (body.group_id, body.topics[0].name, p.partition_index, p.committed_offset)
    return facts


CREATED = ("newt", 3, {"message.timestamp.type": "LogAppendTime"})


def test_librdkafka_admin_and_commit_frames_decode_and_reencode(capture: CaptureServer) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"127.0.0.1:{capture.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "golden-rdkafka", "log_level": 0})
    for f in admin.create_topics([NewTopic("newt", 3, 1, config={"message.timestamp.type": "LogAppendTime"})]).values():
        f.result(10)
    for f in admin.delete_topics(["newt"]).values():
        f.result(10)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "client.id": "golden-rdkafka", "group.id": "g",
                            "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.commit(offsets=[ck.TopicPartition(TOPIC, 0, 5)], asynchronous=False)
        assert consumer.committed([ck.TopicPartition(TOPIC, 0)], timeout=10)[0].offset < 0
    finally:
        consumer.close()
    frames = capture.snapshot()
    seen = _check(frames, "golden-rdkafka", exact=False)
    assert {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_COMMIT,
            ApiKey.OFFSET_FETCH} <= seen
    assert _admin_facts(frames) == {"create": CREATED, "delete": ["newt"], "commit": ("g", TOPIC, 0, 5)}


def test_kafka_python_admin_and_commit_frames_decode_and_reencode(capture: CaptureServer) -> None:
    import kafka
    from kafka.admin import KafkaAdminClient, NewTopic

    bootstrap = f"127.0.0.1:{capture.port}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="golden-kp")
    try:
        admin.create_topics([NewTopic("newt", 3, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})])
        admin.delete_topics(["newt"])
    finally:
        admin.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, client_id="golden-kp", group_id="g",
                                   enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        consumer.commit({tp: kafka.OffsetAndMetadata(5, "", -1)})
        assert consumer.committed(tp) is None
    finally:
        consumer.close()
    frames = capture.snapshot()
    seen = _check(frames, "golden-kp")
    assert {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_COMMIT,
            ApiKey.OFFSET_FETCH} <= seen
    assert _admin_facts(frames) == {"create": CREATED, "delete": ["newt"], "commit": ("g", TOPIC, 0, 5)}


async def test_aiokafka_admin_frames_decode_and_reencode(capture: CaptureServer) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{capture.port}", client_id="golden-aio")
    await admin.start()
    try:
        await admin.create_topics([NewTopic("newt", 3, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})])
        await admin.delete_topics(["newt"])
    finally:
        await admin.close()
    frames = capture.snapshot()
    seen = _check(frames, "golden-aio")
    assert {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS} <= seen
    assert _admin_facts(frames) == {"create": CREATED, "delete": ["newt"]}


@pytest.mark.parametrize("older_max", [0, 2])
def test_real_clients_recover_from_our_unsupported_api_versions_answer(older_max: int) -> None:
    """Playing a broker whose ApiVersions max is lower than what clients send: the error-35
    v0 answer from ``unsupported_api_versions_response`` makes them retry lower and go on."""
    import confluent_kafka as ck
    import kafka

    for client in ("librdkafka", "kafka-python"):
        server = CaptureServer(api_versions_max=older_max)
        try:
            bootstrap = f"127.0.0.1:{server.port}"
            if client == "librdkafka":
                producer = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 0})
                assert TOPIC in producer.list_topics(timeout=10).topics
                del producer
            else:
                consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
                try:
                    assert consumer.topics() == {TOPIC}
                finally:
                    consumer.close()
            frames = server.snapshot()
            assert any(struct.unpack_from(">h", f)[0] == ApiKey.METADATA for f in frames), client
            versions = [struct.unpack_from(">hh", f)[1] for f in frames
                        if struct.unpack_from(">h", f)[0] == ApiKey.API_VERSIONS]
            assert versions[0] > older_max, client  # first try was too new ...
            assert any(v <= older_max for v in versions[1:]), client  # ... then it retried lower
        finally:
            server.close()
