"""The group APIs' layouts that differ from the usual pattern, checked against bytes built
by hand from Kafka's message JSON (the round-trip and kafka-python cross tests cover
every field of every version; these pin the oddities)."""

from __future__ import annotations

import struct

import pytest

from protocol.api import (
    ApiKey,
    EncodeError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from tests.protocol.frames import body_of, response_round_trip


def test_offset_delete_response_puts_the_error_code_before_the_throttle_time() -> None:
    body = {"error_code": 69, "throttle_time_ms": 7, "topics": [
        {"name": "t", "partitions": [{"partition_index": 2, "error_code": 86}]}]}
    frame = encode_response(ApiKey.OFFSET_DELETE, 0, 1, body)
    expected = (struct.pack(">hi", 69, 7) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
                + struct.pack(">i", 1) + struct.pack(">ih", 2, 86))
    assert body_of(frame, 4) == expected


def test_join_group_protocol_name_is_nullable_only_from_v7() -> None:
    body = {"throttle_time_ms": 0, "error_code": 79, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False, "member_id": "m", "members": []}
    v7 = body_of(encode_response(ApiKey.JOIN_GROUP, 7, 1, body), 5)
    # throttle, error, generation, ProtocolType null (0), ProtocolName null (0), leader "" (1),
    # member id "m" (2, 'm'), no members (1), no tagged fields (0)
    assert v7 == struct.pack(">ihi", 0, 79, -1) + b"\x00\x00\x01\x02m\x01\x00"
    with pytest.raises(EncodeError):
        encode_response(ApiKey.JOIN_GROUP, 6, 1, body)
    _, decoded = response_round_trip(ApiKey.JOIN_GROUP, 7, 1, body)
    assert decoded.protocol_name is None and decoded.protocol_type is None


def test_leave_group_names_one_member_up_to_v2_and_a_batch_from_v3() -> None:
    v2 = encode_request(ApiKey.LEAVE_GROUP, 2, 3, None, {"group_id": "g", "member_id": "m"})
    assert body_of(v2, 10) == struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"m"
    v3 = encode_request(ApiKey.LEAVE_GROUP, 3, 3, None, {"group_id": "g", "members": [
        {"member_id": "", "group_instance_id": "i"}]})
    assert body_of(v3, 10) == (struct.pack(">h", 1) + b"g" + struct.pack(">i", 1)
                             + struct.pack(">h", 0) + struct.pack(">h", 1) + b"i")
    assert decode_request(v3[4:]).body.member_id == ""  # no top-level member id from v3: its default


def test_offset_fetch_v9_carries_a_nullable_member_id_and_an_epoch_per_group() -> None:
    frame = encode_request(ApiKey.OFFSET_FETCH, 9, 1, None, {
        "groups": [{"group_id": "g", "member_id": None, "member_epoch": -1, "topics": None}],
        "require_stable": True})
    # header v2: key, version, correlation id, null client id, no tags; then the body
    assert body_of(frame, 11) == b"\x02\x02g\x00" + struct.pack(">i", -1) + b"\x00\x00\x01\x00"
    req = decode_request(frame[4:])
    (g,) = req.body.groups
    assert (g.member_id, g.member_epoch, g.topics, req.body.require_stable) == (None, -1, None, True)


def test_describe_groups_authorized_operations_default_is_int_min() -> None:
    body = {"throttle_time_ms": 0, "groups": [
        {"error_code": 0, "group_id": "g", "group_state": "Dead", "protocol_type": "",
         "protocol_data": "", "members": []}]}
    frame = encode_response(ApiKey.DESCRIBE_GROUPS, 3, 1, body)
    assert frame.endswith(struct.pack(">i", -(2**31)))
    _, decoded = decode_response(ApiKey.DESCRIBE_GROUPS, 3, frame[4:])
    assert decoded.groups[0].authorized_operations == -(2**31)
