"""The generated codecs and classes agree with the one declaration they come from.

For every API, every version, both directions: hypothesis draws a body from the
schema (thinned half the time: missing fields take their defaults), and the
generated encoder must produce the construct codec's exact bytes, the generated
decoder the construct codec's exact values, and damaged frames must fail in both
or decode alike in both. ``protocol/messages.py`` must be what the declarations
generate today.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import generate, messages
from protocol.api import (
    API_VERSIONS,
    CLASSES,
    MESSAGES,
    ApiKey,
    EncodeError,
    decode_request,
    decode_request_declarative,
    decode_response,
    decode_response_declarative,
    encode_request,
    encode_request_declarative,
    encode_request_parts,
    encode_response,
    encode_response_declarative,
)
from protocol.codegen import from_mapping
from tests.protocol.strategies import (
    all_versions,
    is_flexible,
    plain,
    request_body,
    response_body,
    rich_body,
    version_ids,
)

VERSIONS = all_versions()
IDS = version_ids(VERSIONS)


def thin(data: st.DataObject, value: Any) -> Any:
    """Randomly leave fields out of (nested) dicts: they must take their defaults in both paths."""
    if isinstance(value, dict):
        return {k: thin(data, v) for k, v in value.items() if data.draw(st.booleans())}
    if isinstance(value, list):
        return [thin(data, v) for v in value]
    return value


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        result = fn(*args)
    except Exception as exc:  # both paths must fail alike; the type is checked by the caller
        return ("error", type(exc).__name__)
    return ("ok", result)


def _typed(key: ApiKey, body: dict[str, Any], response: bool) -> Any:
    """The body as its message (defaults filled in) for the construct codec: given a
    thinned dict, construct writes a tagged struct given as ``{}`` although it equals
    its default (it compares dicts); a message has no such "present but default" state."""
    try:
        return from_mapping(CLASSES[key][1 if response else 0], body)
    except Exception:
        return body  # let both paths refuse it


def _damage(data: st.DataObject, frame: bytes, keep: int) -> bytes:
    cut = data.draw(st.integers(keep, len(frame)))
    mutated = bytearray(frame[:cut])
    if cut > keep and data.draw(st.booleans()):
        mutated[data.draw(st.integers(keep, cut - 1))] = data.draw(st.integers(0, 255))
    return bytes(mutated)


def test_committed_messages_module_is_what_the_declarations_generate() -> None:
    assert generate.PATH.read_text() == generate.source(), "run `make generate`"


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=IDS)
@given(data=st.data())
@settings(max_examples=10, deadline=None)
def test_generated_request_codec_matches_construct(key: ApiKey, version: int, data: st.DataObject) -> None:
    body = data.draw(request_body(key, version))
    if data.draw(st.booleans()):
        body = thin(data, body)
    client_id = data.draw(st.none() | st.text(max_size=8))
    corr = data.draw(st.integers(-(2**31), 2**31 - 1))
    generated = _outcome(encode_request, key, version, corr, client_id, body)
    construct = _outcome(encode_request_declarative, key, version, corr, client_id, _typed(key, body, False))
    assert generated == construct or (construct[0] == "error" and generated == ("error", "EncodeError"))
    if generated[0] != "ok":
        return
    frame = generated[1]
    assert b"".join(encode_request_parts(key, version, corr, client_id, body)) == frame
    as_view = data.draw(st.booleans())
    arg = memoryview(frame)[4:] if as_view else frame[4:]
    got, ref = decode_request(arg), decode_request_declarative(arg)
    assert (got.api_key, got.api_version, got.correlation_id, got.client_id) == (
        ref.api_key, ref.api_version, ref.correlation_id, ref.client_id)
    assert plain(got.body) == plain(ref.body)
    damaged = _damage(data, frame[4:], 8)
    fast = _outcome(decode_request, damaged)
    slow = _outcome(decode_request_declarative, damaged)
    if slow[0] == "ok":
        assert fast[0] == "ok" and plain(fast[1].body) == plain(slow[1].body)
    else:
        assert fast == ("error", "MalformedRequestError")


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=IDS)
@given(data=st.data())
@settings(max_examples=10, deadline=None)
def test_generated_response_codec_matches_construct(key: ApiKey, version: int, data: st.DataObject) -> None:
    body = data.draw(response_body(key, version))
    if key == ApiKey.API_VERSIONS and body["error_code"] == 35:
        body["error_code"] = 0  # 35 means "parse me as v0", tested on its own
    if data.draw(st.booleans()):
        body = thin(data, body)
    corr = data.draw(st.integers(-(2**31), 2**31 - 1))
    generated = _outcome(encode_response, key, version, corr, body)
    construct = _outcome(encode_response_declarative, key, version, corr, _typed(key, body, True))
    assert generated == construct or (construct[0] == "error" and generated == ("error", "EncodeError"))
    if generated[0] != "ok":
        return
    frame = generated[1][4:]
    got, ref = decode_response(key, version, frame), decode_response_declarative(key, version, frame)
    assert got[0] == ref[0]
    assert plain(got[1]) == plain(ref[1])
    damaged = _damage(data, frame, 0)
    fast = _outcome(decode_response, key, version, damaged)
    slow = _outcome(decode_response_declarative, key, version, damaged)
    if slow[0] == "ok" and key != ApiKey.API_VERSIONS:  # ApiVersions may fall back to v0
        assert fast[0] == "ok" and plain(fast[1][1]) == plain(slow[1][1])
    elif slow[0] == "error" and key != ApiKey.API_VERSIONS:
        assert fast == ("error", "MalformedResponseError")


@pytest.mark.parametrize("direction", ["request", "response"])
def test_multi_byte_lengths_agree_between_generated_and_construct(direction: str) -> None:
    """Hypothesis keeps lengths small; here every length needs a two-byte uvarint."""
    for key, rng in API_VERSIONS.items():
        for version in range(rng.min_version, rng.max_version + 1):
            flexible = is_flexible(key, version)
            if direction == "request":
                body = rich_body(MESSAGES[key][0].fields, version, flexible, big=True)
                frame = encode_request(key, version, 3, "c" * 200, body)
                assert frame == encode_request_declarative(key, version, 3, "c" * 200, body)
                got, ref = decode_request(frame[4:]), decode_request_declarative(frame[4:])
                assert (got.client_id, plain(got.body)) == (ref.client_id, plain(ref.body))
            else:
                body = rich_body(MESSAGES[key][1].fields, version, flexible, big=True)
                if key == ApiKey.API_VERSIONS:
                    body["error_code"] = 0
                frame = encode_response(key, version, 3, body)
                assert frame == encode_response_declarative(key, version, 3, body)
                corr, decoded = decode_response(key, version, frame[4:])
                assert (corr, plain(decoded)) == (3, plain(decode_response_declarative(key, version, frame[4:])[1]))


def test_generated_produce_decoder_hands_out_views_of_the_frame() -> None:
    blob = bytes(range(200))
    body = {"acks": -1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": blob}]}]}
    for version in (3, 9, 11):
        frame = encode_request(ApiKey.PRODUCE, version, 1, "c", body)[4:]
        records = decode_request(frame).body.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and records.obj is frame and records == blob


def test_records_are_pieces_of_their_own_in_a_request_never_copied() -> None:
    blob = b"x" * 1000
    body = messages.ProduceRequest(acks=-1, topic_data=[messages.ProduceRequestTopicData(
        name="t", partition_data=[messages.ProduceRequestTopicDataPartitionData(index=0, records=blob)])])
    parts = encode_request_parts(ApiKey.PRODUCE, 9, 1, "c", body)
    assert any(p is blob for p in parts)


def test_a_misspelt_field_is_an_error_when_a_message_is_built() -> None:
    with pytest.raises(TypeError, match="eror_code"):
        messages.ListOffsetsResponseTopicsPartitions(partition_index=0, eror_code=3)  # type: ignore[call-arg]
    with pytest.raises(EncodeError, match="eror_code"):
        encode_response(ApiKey.LIST_OFFSETS, 7, 1, {"topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "eror_code": 3}]}]})


def test_missing_fields_take_the_declared_defaults() -> None:
    p = messages.ListOffsetsResponseTopicsPartitions(partition_index=2)
    assert (p.error_code, p.timestamp, p.offset, p.leader_epoch, p.old_style_offsets) == (0, -1, -1, -1, [])
    assert messages.ProduceRequest().transactional_id is None
    fetch = messages.FetchRequest()
    assert (fetch.max_bytes, fetch.session_epoch, fetch.replica_state.replica_epoch) == (0x7FFFFFFF, -1, -1)
    assert fetch.topics is not messages.FetchRequest().topics  # mutable defaults are fresh


def test_every_declared_message_has_a_generated_class_with_every_field() -> None:
    for request, response in MESSAGES.values():
        for msg in (request, response):
            cls = getattr(messages, msg.name)
            assert issubclass(cls, msgspec.Struct)
            assert cls.__struct_fields__ == tuple(f.name for f in msg.fields)
