"""The hand-written struct codecs agree with the declarative schema, byte for byte.

For every (API, version) with a fast path, hypothesis generates bodies from the
schema (including tagged fields, nulls and fields left out of the dict) and the
fast path must produce exactly what the declarative codec produces; on damaged
frames both must fail, or both return the same thing.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.api import (
    FAST_REQUEST_DECODERS,
    FAST_REQUEST_ENCODERS,
    FAST_REQUEST_PART_ENCODERS,
    FAST_RESPONSE_DECODERS,
    FAST_RESPONSE_ENCODERS,
    ApiKey,
    EncodeError,
    decode_request,
    decode_request_declarative,
    decode_response,
    decode_response_declarative,
    encode_request,
    encode_request_declarative,
    encode_response,
    encode_response_declarative,
)
from tests.protocol.strategies import plain, request_body, response_body, version_ids

DECODERS = sorted(FAST_REQUEST_DECODERS)
ENCODERS = sorted(FAST_RESPONSE_ENCODERS)
CLIENT_ENCODERS = sorted(FAST_REQUEST_ENCODERS)
PART_ENCODERS = sorted(FAST_REQUEST_PART_ENCODERS)
CLIENT_DECODERS = sorted(FAST_RESPONSE_DECODERS)


def thin(data: st.DataObject, value: Any) -> Any:
    """Randomly leave fields out of (nested) dicts: they must take their defaults in both paths."""
    if isinstance(value, dict):
        return {k: thin(data, v) for k, v in value.items() if data.draw(st.booleans())}
    if isinstance(value, list):
        return [thin(data, v) for v in value]
    return value


def draw_body_and_correlation_id(data: st.DataObject, bodies: st.SearchStrategy[Any]) -> tuple[Any, int]:
    """A body (thinned half the time) and any int32 correlation id, for the encoder tests."""
    body = data.draw(bodies)
    if data.draw(st.booleans()):
        body = thin(data, body)
    return body, data.draw(st.integers(-(2**31), 2**31 - 1))


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        result = fn(*args)
    except Exception as exc:  # both paths must fail alike; the type is checked by the caller
        return ("error", type(exc).__name__)
    return ("ok", result)


def test_every_hot_message_has_a_fast_path_for_every_version() -> None:
    for key in (ApiKey.API_VERSIONS, ApiKey.LIST_OFFSETS, ApiKey.PRODUCE):
        assert {v for k, v in DECODERS if k == key}, key
    for key in (ApiKey.API_VERSIONS, ApiKey.LIST_OFFSETS, ApiKey.FETCH):
        assert {v for k, v in ENCODERS if k == key}, key


@pytest.mark.parametrize(("key", "version"), DECODERS, ids=version_ids(DECODERS))
@given(data=st.data())
@settings(max_examples=40)
def test_fast_request_decoder_matches_declarative(key: int, version: int, data: st.DataObject) -> None:
    body = data.draw(request_body(ApiKey(key), version))
    client_id = data.draw(st.none() | st.text(max_size=8))
    frame = encode_request(key, version, 11, client_id, body)[4:]
    as_view = data.draw(st.booleans())
    arg = memoryview(frame) if as_view else frame
    fast_client, fast_body = FAST_REQUEST_DECODERS[(key, version)](arg)
    ref = decode_request_declarative(arg)
    assert fast_client == ref.client_id
    assert plain(fast_body) == plain(ref.body)
    assert list(fast_body) == list(ref.body)  # same field order too
    # damaged frames: both fail, or both decode to the same body
    cut = data.draw(st.integers(8, len(frame)))
    mutated = bytearray(frame[:cut])
    if cut > 8 and data.draw(st.booleans()):
        mutated[data.draw(st.integers(8, cut - 1))] = data.draw(st.integers(0, 255))
    damaged = bytes(mutated)
    fast = _outcome(FAST_REQUEST_DECODERS[(key, version)], damaged)
    slow = _outcome(decode_request_declarative, damaged)
    assert fast[0] == slow[0]
    if fast[0] == "ok":
        assert fast[1][0] == slow[1].client_id
        assert plain(fast[1][1]) == plain(slow[1].body)


@pytest.mark.parametrize(("key", "version"), ENCODERS, ids=version_ids(ENCODERS))
@given(data=st.data())
@settings(max_examples=40)
def test_fast_response_encoder_matches_declarative(key: int, version: int, data: st.DataObject) -> None:
    body, corr = draw_body_and_correlation_id(data, response_body(ApiKey(key), version))
    fast = _outcome(FAST_RESPONSE_ENCODERS[(key, version)], corr, body)
    slow = _outcome(encode_response_declarative, key, version, corr, body)
    if slow[0] == "ok":
        assert fast == slow
    else:
        # a thinned body can lack a required key (e.g. aborted-transaction fields): both refuse
        assert fast[0] == "error"
        with pytest.raises(EncodeError):
            encode_response(key, version, corr, body)


def test_fast_produce_decoder_hands_out_views_of_the_frame() -> None:
    blob = bytes(range(200))
    body = {"acks": -1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": blob}]}]}
    for version in (3, 9, 11):
        frame = encode_request(ApiKey.PRODUCE, version, 1, "c", body)[4:]
        records = decode_request(frame).body.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and records.obj is frame and records == blob


@pytest.mark.parametrize(("key", "version"), CLIENT_ENCODERS,
                         ids=version_ids(CLIENT_ENCODERS))
@given(data=st.data())
@settings(max_examples=40)
def test_fast_request_encoder_matches_declarative(key: int, version: int, data: st.DataObject) -> None:
    body, corr = draw_body_and_correlation_id(data, request_body(ApiKey(key), version))
    client_id = data.draw(st.none() | st.text(max_size=8))
    fast = _outcome(FAST_REQUEST_ENCODERS[(key, version)], corr, client_id, body)
    slow = _outcome(encode_request_declarative, key, version, corr, client_id, body)
    assert fast == slow


@pytest.mark.parametrize(("key", "version"), PART_ENCODERS, ids=version_ids(PART_ENCODERS))
@given(data=st.data())
@settings(max_examples=40)
def test_a_request_in_pieces_joins_to_the_declarative_frame(key: int, version: int, data: st.DataObject) -> None:
    body, corr = draw_body_and_correlation_id(data, request_body(ApiKey(key), version))
    client_id = data.draw(st.none() | st.text(max_size=8))
    fast = _outcome(lambda *a: b"".join(FAST_REQUEST_PART_ENCODERS[(key, version)](*a)), corr, client_id, body)
    slow = _outcome(encode_request_declarative, key, version, corr, client_id, body)
    assert fast == slow


@pytest.mark.parametrize(("key", "version"), CLIENT_DECODERS,
                         ids=version_ids(CLIENT_DECODERS))
@given(data=st.data())
@settings(max_examples=40)
def test_fast_response_decoder_matches_declarative(key: int, version: int, data: st.DataObject) -> None:
    body = data.draw(response_body(ApiKey(key), version))
    if key == ApiKey.API_VERSIONS and body["error_code"] == 35:
        body["error_code"] = 0
    frame = encode_response(key, version, 5, body)[4:]
    fast = FAST_RESPONSE_DECODERS[(key, version)](frame)
    ref = decode_response_declarative(key, version, frame)
    if fast is None:  # ApiVersions with tagged fields: the schema decodes those
        assert key == ApiKey.API_VERSIONS and version >= 3
    else:
        assert fast[0] == ref[0]
        assert plain(fast[1]) == plain(ref[1])
        assert list(fast[1]) == list(ref[1])
    cut = data.draw(st.integers(0, len(frame)))
    mutated = bytearray(frame[:cut])
    if cut and data.draw(st.booleans()):
        mutated[data.draw(st.integers(0, cut - 1))] = data.draw(st.integers(0, 255))
    damaged = bytes(mutated)
    f = _outcome(FAST_RESPONSE_DECODERS[(key, version)], damaged)
    r = _outcome(decode_response_declarative, key, version, damaged)
    if f[0] == "ok" and f[1] is not None:
        assert r[0] == "ok" and f[1][0] == r[1][0] and plain(f[1][1]) == plain(r[1][1])
    elif f[0] == "error":
        assert r[0] == "error"


@pytest.mark.parametrize("direction", ["request", "response"])
def test_multi_byte_lengths_agree_between_fast_and_declarative_paths(direction: str) -> None:
    """Hypothesis keeps lengths small; here every length needs a two-byte uvarint."""
    from protocol.api import API_VERSIONS, MESSAGES
    from tests.protocol.strategies import is_flexible, rich_body

    for key, rng in API_VERSIONS.items():
        for version in range(rng.min_version, rng.max_version + 1):
            flexible = is_flexible(key, version)
            if direction == "request":
                body = rich_body(MESSAGES[key][0].fields, version, flexible, big=True)
                frame = encode_request(key, version, 3, "c" * 200, body)
                assert frame == encode_request_declarative(key, version, 3, "c" * 200, body)
                fast, ref = decode_request(frame[4:]), decode_request_declarative(frame[4:])
                assert (fast.client_id, plain(fast.body)) == (ref.client_id, plain(ref.body))
            else:
                body = rich_body(MESSAGES[key][1].fields, version, flexible, big=True)
                if key == ApiKey.API_VERSIONS:
                    body["error_code"] = 0
                frame = encode_response(key, version, 3, body)
                assert frame == encode_response_declarative(key, version, 3, body)
                corr, decoded = decode_response(key, version, frame[4:])
                assert (corr, plain(decoded)) == (3, plain(decode_response_declarative(key, version, frame[4:])[1]))
