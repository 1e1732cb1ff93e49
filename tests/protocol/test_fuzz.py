"""Hostile bytes: decode_request raises only its two documented exceptions, never anything else."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.api import (
    API_VERSIONS,
    MESSAGES,
    ApiKey,
    EncodeError,
    MalformedRequestError,
    MalformedResponseError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from tests.protocol.strategies import (
    all_versions,
    is_flexible,
    request_body,
    response_body,
    rich_body,
    version_ids,
)

VERSIONS = all_versions()


def for_every_version(max_examples: int) -> Callable[[Callable[..., None]], Any]:
    """Run the test for every served (key, version), each with ``max_examples`` draws of
    ``data`` (the test takes ``key``, ``version`` and ``data``)."""
    def wrap(test: Callable[..., None]) -> Any:
        drawn = given(data=st.data())(settings(max_examples=max_examples)(test))
        return pytest.mark.parametrize(("key", "version"), VERSIONS, ids=version_ids(VERSIONS))(drawn)
    return wrap


def _decode_or_documented_error(frame: bytes | memoryview) -> None:
    try:
        decode_request(frame)
    except (UnsupportedVersionError, MalformedRequestError):
        pass


@given(st.binary(max_size=200))
def test_random_bytes_raise_only_documented_errors(frame: bytes) -> None:
    _decode_or_documented_error(frame)


@given(st.sampled_from(VERSIONS), st.binary(max_size=300), st.booleans())
@settings(max_examples=400)
def test_random_bodies_behind_valid_headers_raise_only_documented_errors(
    kv: tuple[ApiKey, int], body: bytes, view: bool
) -> None:
    key, version = kv
    flexible = version >= API_VERSIONS[key].first_flexible
    frame = struct.pack(">hhih", key, version, 1, 1) + b"c" + (b"\x00" if flexible else b"") + body
    _decode_or_documented_error(memoryview(frame) if view else frame)


@for_every_version(max_examples=15)
def test_truncated_and_mutated_valid_frames_raise_only_documented_errors(
    key: ApiKey, version: int, data: st.DataObject
) -> None:
    frame = encode_request(key, version, 3, "client", data.draw(request_body(key, version)))[4:]
    cut = data.draw(st.integers(0, len(frame) - 1))
    with pytest.raises((MalformedRequestError, UnsupportedVersionError)) if cut < 8 else _maybe():
        decode_request(frame[:cut])
    for _ in range(3):
        pos = data.draw(st.integers(0, len(frame) - 1))
        mutated = bytearray(frame)
        mutated[pos] = data.draw(st.integers(0, 255))
        _decode_or_documented_error(bytes(mutated))


@for_every_version(max_examples=10)
def test_truncated_responses_raise_only_malformed_response(
    key: ApiKey, version: int, data: st.DataObject
) -> None:
    frame = encode_response(key, version, 3, data.draw(response_body(key, version)))[4:]
    cut = data.draw(st.integers(0, len(frame) - 1))
    try:
        decode_response(key, version, frame[:cut])
    except MalformedResponseError:
        pass


class _maybe:
    """A context manager that lets decoding succeed or fail with a documented error."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> bool:
        return exc is None or isinstance(exc, MalformedRequestError | UnsupportedVersionError)


def test_many_seeded_mutations_of_every_version_raise_only_documented_errors() -> None:
    """Breadth on top of hypothesis: 200 damaged copies of a rich frame of every version."""
    import random

    rng = random.Random(20260521)
    for key, version in VERSIONS:
        body = rich_body(MESSAGES[key][0].fields, version, is_flexible(key, version))
        frame = encode_request(key, version, 9, "fuzz", body)[4:]
        for _ in range(200):
            damaged = bytearray(frame)
            for _ in range(rng.randint(1, 4)):
                op = rng.random()
                pos = rng.randrange(8, len(damaged)) if len(damaged) > 8 else 8
                if op < 0.5 and pos < len(damaged):
                    damaged[pos] = rng.randrange(256)
                elif op < 0.75:
                    del damaged[pos:]
                else:
                    damaged[pos:pos] = rng.randbytes(rng.randint(1, 8))
            _decode_or_documented_error(bytes(damaged))


@given(st.sampled_from(VERSIONS), st.binary(max_size=200))
@settings(max_examples=300)
def test_random_response_bytes_raise_only_malformed_response(kv: tuple[ApiKey, int], frame: bytes) -> None:
    key, version = kv
    try:
        decode_response(key, version, frame)
    except MalformedResponseError:
        pass


def _corrupt(data: st.DataObject, value: Any) -> Any:
    """Replace one randomly chosen leaf or container of a body with a wrongly typed value."""
    wrong = st.sampled_from(["x", 5, -(2**70), None, [1], {"a": 1}, 1.5, b"\x00"])
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: _corrupt(data, value[key])}
    if isinstance(value, list) and value and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return [*value[:i], _corrupt(data, value[i]), *value[i + 1 :]]
    return data.draw(wrong)


@for_every_version(max_examples=8)
def test_wrongly_typed_bodies_raise_only_encode_error(key: ApiKey, version: int, data: st.DataObject) -> None:
    for strategy, encode in (
        (request_body, lambda b: encode_request(key, version, 1, "c", b)),
        (response_body, lambda b: encode_response(key, version, 1, b)),
    ):
        body = _corrupt(data, data.draw(strategy(key, version)))
        try:
            encode(body)
        except EncodeError:
            pass
