"""Kafka's encoding rules, byte by byte: null vs empty, defaults, tagged fields, headers."""

from __future__ import annotations

import struct

import pytest

from protocol.api import (
    API_VERSIONS,
    ApiKey,
    EncodeError,
    MalformedRequestError,
    MalformedResponseError,
    UnsupportedVersionError,
    advertised_api_keys,
    codec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    unsupported_api_versions_response,
)
from protocol.api_versions import valid_client_software
from protocol.wire import uvarint_bytes
from tests.protocol.frames import request_round_trip, response_round_trip


def test_null_and_empty_topic_lists_stay_distinct_in_metadata_v1_and_v9() -> None:
    for version in (1, 4, 9, 12):
        null = request_round_trip(ApiKey.METADATA, version, 1, "c", {"topics": None}).decoded
        empty = request_round_trip(ApiKey.METADATA, version, 1, "c", {"topics": []}).decoded
        assert null.body.topics is None
        assert empty.body.topics == []


def test_null_array_is_minus_one_int32_and_zero_uvarint() -> None:
    v1 = encode_request(ApiKey.METADATA, 1, 1, None, {"topics": None})
    # size, key, version, corr, client id -1, then topics = -1
    assert v1[4 + 8 :] == b"\xff\xff" + b"\xff\xff\xff\xff"
    v9 = encode_request(ApiKey.METADATA, 9, 1, None, {"topics": None, "allow_auto_topic_creation": False})
    # header v2: client id stays an int16 string, then header tags; body: compact null, 3 bools, tags
    assert v9[4 + 8 :] == b"\xff\xff" + b"\x00" + b"\x00" + b"\x00" * 3 + b"\x00"


def test_null_and_empty_strings_stay_distinct_in_both_encodings() -> None:
    for version in (3, 8, 9, 11):
        for tid in (None, "", "tx"):
            body: dict[str, object] = {"transactional_id": tid, "acks": 1, "timeout_ms": 5, "topic_data": []}
            req = request_round_trip(ApiKey.PRODUCE, version, 1, "c", body).decoded
            assert req.body.transactional_id == tid
    nonflex = encode_request(ApiKey.PRODUCE, 3, 1, "", {"transactional_id": None, "acks": 1, "timeout_ms": 0, "topic_data": []})
    assert nonflex[4 + 10 : 4 + 12] == b"\xff\xff"
    flex = encode_request(ApiKey.PRODUCE, 9, 1, "", {"transactional_id": None, "acks": 1, "timeout_ms": 0, "topic_data": []})
    assert flex[4 + 10 + 1] == 0  # after the header tag byte: compact null string


def test_null_and_empty_records_stay_distinct() -> None:
    for version in (3, 9, 11):
        for records in (None, b"", b"\x01\x02"):
            body: dict[str, object] = {"acks": -1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
            req = request_round_trip(ApiKey.PRODUCE, version, 1, "c", body).decoded
            got = req.body.topic_data[0].partition_data[0].records
            assert (None if got is None else bytes(got)) == records


def test_decoded_records_are_views_of_the_frame_not_copies() -> None:
    blob = bytes(range(256)) * 64
    body = {"acks": 1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": blob}]}]}
    for version in (3, 7, 9, 11):
        frame = encode_request(ApiKey.PRODUCE, version, 1, "c", body)[4:]
        got = decode_request(frame).body.topic_data[0].partition_data[0].records
        assert isinstance(got, memoryview)
        assert got.obj is frame
        assert got == blob


def test_records_accept_any_bytes_like_when_encoding() -> None:
    blob = b"x" * 100
    for records in (blob, bytearray(blob), memoryview(blob)):
        body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "high_watermark": 1, "records": records}]}]}
        for version in (4, 11, 12):
            _, decoded = response_round_trip(ApiKey.FETCH, version, 9, body)
            assert bytes(decoded.responses[0].partitions[0].records) == blob


def test_missing_fields_take_kafka_defaults_when_encoding() -> None:
    body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
    for version in (1, 4, 6, 10):
        _, decoded = response_round_trip(ApiKey.LIST_OFFSETS, version, 1, body)
        p = decoded.topics[0].partitions[0]
        assert (p.error_code, p.timestamp, p.offset, p.leader_epoch) == (0, -1, -1, -1)
    req = request_round_trip(ApiKey.METADATA, 4, 1, "c", {"topics": []}).decoded
    assert req.body.allow_auto_topic_creation is True


def test_fields_absent_from_a_version_decode_as_defaults_and_are_ignored_when_encoding() -> None:
    body = {"replica_id": -1, "isolation_level": 1, "timeout_ms": 500,
            "topics": [{"name": "t", "partitions": [{"partition_index": 2, "timestamp": 7, "current_leader_epoch": 9, "max_num_offsets": 4}]}]}
    v0 = request_round_trip(ApiKey.LIST_OFFSETS, 0, 1, "c", body).decoded.body
    assert (v0.isolation_level, v0.timeout_ms, v0.topics[0].partitions[0].current_leader_epoch) == (0, 0, -1)
    assert v0.topics[0].partitions[0].max_num_offsets == 4
    v10 = request_round_trip(ApiKey.LIST_OFFSETS, 10, 1, "c", body).decoded.body
    assert (v10.isolation_level, v10.timeout_ms, v10.topics[0].partitions[0].current_leader_epoch) == (1, 500, 9)
    assert v10.topics[0].partitions[0].max_num_offsets == 1


def _with_unknown_tags(flex_body: bytes, tags: list[tuple[int, bytes]]) -> bytes:
    """Replace the final (empty) tagged-field section of a body with unknown tags."""
    assert flex_body.endswith(b"\x00")
    out = bytearray(flex_body[:-1])
    out += uvarint_bytes(len(tags))
    for tag, data in tags:
        out += uvarint_bytes(tag) + uvarint_bytes(len(data)) + data
    return bytes(out)


def test_unknown_tagged_fields_are_skipped() -> None:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [], "timeout_ms": 3}
    frame = encode_request(ApiKey.LIST_OFFSETS, 10, 5, "c", body)
    tagged = _with_unknown_tags(frame[4:], [(7, b"abc"), (300, b"\x00" * 200)])
    req = decode_request(tagged)
    assert req.body == decode_request(frame[4:]).body
    # and in the request header: replace header tags (byte after the client id)
    hdr_end = 8 + 2 + 1 + 1
    raw = bytearray(frame[4:])
    assert raw[hdr_end - 1] == 0
    with_header_tags = bytes(raw[: hdr_end - 1]) + b"\x01\x05\x02zz" + bytes(raw[hdr_end:])
    assert decode_request(with_header_tags).body == req.body


def test_known_tagged_fields_decode_and_unknown_ones_beside_them_are_skipped() -> None:
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 6, "base_offset": -1, "current_leader": {"leader_id": 1, "leader_epoch": 3}}]}]}
    frame = encode_response(ApiKey.PRODUCE, 10, 1, body)
    _, decoded = decode_response(ApiKey.PRODUCE, 10, frame[4:])
    assert decoded.responses[0].partition_responses[0].current_leader == {"leader_id": 1, "leader_epoch": 3}
    _, plain_default = response_round_trip(ApiKey.PRODUCE, 10, 1, {"responses": []})
    assert plain_default.node_endpoints == []


def test_tagged_field_at_default_is_not_written() -> None:
    a = encode_response(ApiKey.API_VERSIONS, 3, 1, {"api_keys": [], "finalized_features_epoch": -1})
    b = encode_response(ApiKey.API_VERSIONS, 3, 1, {"api_keys": []})
    assert a == b
    c = encode_response(ApiKey.API_VERSIONS, 3, 1, {"api_keys": [], "finalized_features_epoch": 4})
    assert len(c) == len(b) + 1 + 1 + 8  # tag, size, int64


def test_api_versions_response_header_is_always_v0() -> None:
    for version in range(5):
        frame = encode_response(ApiKey.API_VERSIONS, version, 0x01020304, {"api_keys": advertised_api_keys()})
        assert frame[4:8] == b"\x01\x02\x03\x04"
        assert frame[8:10] == b"\x00\x00"  # error code follows directly, no header tags


def test_flexible_responses_carry_header_tags_and_others_do_not() -> None:
    for version, header in ((8, b""), (9, b"\x00"), (12, b"\x00")):
        body = codec(ApiKey.METADATA, version, True).build({"controller_id": 1})
        frame = encode_response(ApiKey.METADATA, version, 7, {"controller_id": 1})
        assert frame == struct.pack(">ii", 4 + len(header) + len(body), 7) + header + body


def test_unsupported_api_versions_answer_is_a_v0_body_with_error_35() -> None:
    frame = unsupported_api_versions_response(42)
    size, corr, err, n = struct.unpack_from(">iihi", frame)
    assert (size, corr, err, n) == (len(frame) - 4, 42, 35, 1)
    assert struct.unpack_from(">hhh", frame, 14) == (18, 0, API_VERSIONS[ApiKey.API_VERSIONS].max_version)
    for sent in (0, 3, 4):
        corr2, body = decode_response(ApiKey.API_VERSIONS, sent, frame[4:])
        assert corr2 == 42 and body.error_code == 35 and body.api_keys[0].max_version == 4


@pytest.mark.parametrize(("key", "version"), [(18, 5), (18, 127), (0, 2), (0, 12), (1, 3), (1, 13), (2, 11), (3, 13), (99, 0), (-1, 0), (4, 0)])
def test_unknown_keys_and_versions_raise_unsupported_with_the_correlation_id(key: int, version: int) -> None:
    frame = struct.pack(">hhih", key, version, 777, -1) + b"garbage"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (key, version, 777)


def test_short_header_is_malformed_without_correlation_id() -> None:
    with pytest.raises(MalformedRequestError) as info:
        decode_request(b"\x00\x12\x00")
    assert info.value.correlation_id is None


def test_truncated_body_is_malformed_with_correlation_id() -> None:
    frame = encode_request(ApiKey.LIST_OFFSETS, 5, 99, "c", {"replica_id": -1, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": 1}]}]})
    with pytest.raises(MalformedRequestError) as info:
        decode_request(frame[4:-3])
    assert info.value.correlation_id == 99


def test_null_in_non_nullable_field_is_malformed_on_decode_and_rejected_on_encode() -> None:
    frame = bytearray(encode_request(ApiKey.LIST_OFFSETS, 1, 5, "c", {"topics": [{"name": "t", "partitions": []}]})[4:])
    # topic name is the int16 after the topics count; make it -1 (null)
    pos = 8 + 2 + 1 + 4 + 4
    assert frame[pos : pos + 2] == b"\x00\x01"
    frame[pos : pos + 2] = b"\xff\xff"
    with pytest.raises(MalformedRequestError):
        decode_request(bytes(frame))
    with pytest.raises(EncodeError):
        encode_response(ApiKey.LIST_OFFSETS, 1, 1, {"topics": [{"name": None, "partitions": []}]})


def test_response_in_the_wrong_version_is_a_clear_error() -> None:
    frame = encode_response(ApiKey.METADATA, 1, 1, {"brokers": [{"node_id": 1, "host": "h", "port": 1}]})
    with pytest.raises(MalformedResponseError):
        decode_response(ApiKey.METADATA, 9, frame[4:])


def test_advertised_table_lists_produce_from_zero_and_serves_from_three() -> None:
    keys = {k["api_key"]: k for k in advertised_api_keys()}
    assert keys[0] == {"api_key": 0, "min_version": 0, "max_version": 11}
    assert API_VERSIONS[ApiKey.PRODUCE].min_version == 3
    assert keys[2]["max_version"] == 10 and keys[18]["max_version"] == 4


@pytest.mark.parametrize(("name", "version", "ok"), [
    ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0", True),
    ("kafka-python", "3.0.12", True),
    ("", "1.0", False),
    ("bad name", "1", False),
    ("x-", "1", False),
    ("a", "1.0.", False),
])
def test_client_software_validation_follows_kip_511(name: str, version: str, ok: bool) -> None:
    assert valid_client_software(name, version) is ok


def test_every_field_name_is_reachable_as_an_attribute() -> None:
    """Container methods shadow attribute access; no Kafka field may be named like one."""
    from construct import Container

    from protocol.api import MESSAGES
    from protocol.schema import Field, StructType

    def names(fields: tuple[Field, ...]) -> set[str]:
        out = set()
        for f in fields:
            out.add(f.name)
            if isinstance(f.type, StructType):
                out |= names(f.type.fields)
        return out

    shadowed = {n for n in dir(Container) if not n.startswith("_")}
    for request, response in MESSAGES.values():
        assert not (names(request.fields) | names(response.fields)) & shadowed


def test_decode_request_accepts_bytes_bytearray_and_memoryview_alike() -> None:
    for key, version, body in [
        (ApiKey.LIST_OFFSETS, 7, {"topics": [{"name": "t", "partitions": [{"timestamp": 5}]}]}),
        (ApiKey.METADATA, 12, {"topics": None}),
        (ApiKey.PRODUCE, 11, {"acks": 1, "topic_data": [{"name": "t", "partition_data": [{"records": b"abc"}]}]}),
    ]:
        frame = encode_request(key, version, 1, "c", body)[4:]
        ref = decode_request(frame).body
        assert decode_request(bytearray(frame)).body == ref
        assert decode_request(memoryview(frame)).body == ref


def test_compile_all_compiles_both_directions_of_every_served_version() -> None:
    from protocol.api import compile_all

    expected = 2 * sum(r.max_version - r.min_version + 1 for r in API_VERSIONS.values())
    assert compile_all() == expected


def test_client_side_calls_with_versions_we_do_not_speak_raise_unsupported() -> None:
    for call in (
        lambda: encode_request(ApiKey.PRODUCE, 2, 1, "c", {}),
        lambda: encode_request(77, 0, 1, "c", {}),
        lambda: decode_response(ApiKey.FETCH, 13, b"\x00\x00\x00\x01\x00"),
        lambda: decode_response(77, 0, b"\x00\x00\x00\x01"),
        lambda: encode_response(ApiKey.LIST_OFFSETS, 11, 1, {}),
    ):
        with pytest.raises(UnsupportedVersionError):
            call()


def test_api_versions_response_that_only_parses_as_v0_is_read_as_v0() -> None:
    """Kafka's Java client falls back to v0 when the version sent does not parse; so do we."""
    keys = advertised_api_keys()
    frame = encode_response(ApiKey.API_VERSIONS, 0, 9, {"error_code": 0, "api_keys": keys})[4:]
    for sent in (3, 4):
        corr, body = decode_response(ApiKey.API_VERSIONS, sent, frame)
        assert corr == 9 and body.error_code == 0 and [dict(k) for k in body.api_keys] == keys
    with pytest.raises(MalformedResponseError):
        decode_response(ApiKey.API_VERSIONS, 3, frame[:9])


def test_bytes_inside_tagged_fields_decode_correctly_with_zero_copy_frames() -> None:
    """Tagged fields are parsed from their own buffer: their bytes must not be sliced from the frame."""
    from io import BytesIO

    from protocol.schema import F, message, obj

    msg = message(
        "Synthetic",
        F("head", "bytes"),
        F("extra", obj(F("blob", "bytes"), F("n", "int32")), "0+", tag=0),
        F("blob_tag", "bytes", "0+", tag=1),
    )
    value = {"head": b"HEAD", "extra": {"blob": b"tagged-bytes", "n": 7}, "blob_tag": b"second"}
    for codec_ in (msg.codec(0, True), msg.interpreted(0, True)):
        built = codec_.build(value)
        framed = b"\x00" * 5 + built  # positions in the frame differ from the tag buffers'
        stream = BytesIO(framed)
        stream.seek(5)
        got = codec_._parse(stream, {"frame": memoryview(framed)}, "(test)")
        assert bytes(got.head) == b"HEAD"
        assert bytes(got.extra.blob) == b"tagged-bytes" and got.extra.n == 7
        assert bytes(got.blob_tag) == b"second"
