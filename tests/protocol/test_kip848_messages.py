"""KIP-848 messages byte for byte: the nullable Assignment struct is an int8 marker (-1/1)."""

from __future__ import annotations

import struct

from protocol.api import ApiKey, decode_request, decode_response, encode_request, encode_response

TOPIC_ID = bytes(range(16))


def body(assignment: object) -> dict[str, object]:
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m",
            "member_epoch": 7, "heartbeat_interval_ms": 5000, "assignment": assignment}


def test_heartbeat_response_without_assignment_writes_minus_one() -> None:
    frame = encode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, 9, body(None))
    expected = (struct.pack(">ii", 0, 9) + b"\x00"              # size (patched), correlation, header tags
                + struct.pack(">ih", 0, 0) + b"\x00" + b"\x02m"  # throttle, error, null message, "m"
                + struct.pack(">ii", 7, 5000) + b"\xff" + b"\x00")  # epoch, interval, null assignment, tags
    assert frame[4:] == expected[4:]
    _, back = decode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, frame[4:])
    assert back.assignment is None and back.member_epoch == 7


def test_heartbeat_response_with_assignment_writes_one_then_the_struct() -> None:
    frame = encode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, 9, body(
        {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 2]}]}))
    tail = (b"\x01" + b"\x02" + TOPIC_ID + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"  # one topic
            + b"\x00" + b"\x00")  # the Assignment's tags, the body's tags
    assert frame.endswith(tail)
    _, back = decode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, frame[4:])
    assert [(bytes(t.topic_id), list(t.partitions)) for t in back.assignment.topic_partitions] == [(TOPIC_ID, [0, 2])]


def test_heartbeat_request_regex_exists_from_v1_only() -> None:
    req = {"group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 1000,
           "subscribed_topic_names": ["t"], "subscribed_topic_regex": "t.*", "topic_partitions": []}
    v0 = decode_request(encode_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, "c", req)[4:])
    v1 = decode_request(encode_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, 1, "c", req)[4:])
    assert v0.body.subscribed_topic_regex is None and v1.body.subscribed_topic_regex == "t.*"
    assert v1.body.topic_partitions == [] and v1.body.instance_id is None
