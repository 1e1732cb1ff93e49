"""Our codecs both ways, for the protocol tests: where a frame's body starts, and round
trips that check the size prefix, the correlation id, and that encoding what was decoded
gives the same bytes again."""

from __future__ import annotations

from typing import Any, NamedTuple

from protocol.api import decode_request, decode_response, encode_request, encode_response


class RoundTrip(NamedTuple):
    frame: bytes  # as encoded, size prefix included
    decoded: Any  # the decoded Request, or the decoded response body


def body_of(frame: bytes, header_len: int) -> bytes:
    """A frame's body: what follows the 4-byte size prefix and a header of ``header_len`` bytes."""
    return frame[4 + header_len:]


def request_round_trip(key: int, version: int, correlation_id: int, client_id: str | None,
                       body: Any) -> RoundTrip:
    """Encode a request, decode it as the broker does, and encode the decoded body again;
    returns the frame and the decoded request."""
    frame = encode_request(key, version, correlation_id, client_id, body)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    req = decode_request(frame[4:])
    assert encode_request(key, version, correlation_id, client_id, req.body) == frame
    return RoundTrip(frame, req)


def response_round_trip(key: int, version: int, correlation_id: int, body: Any) -> RoundTrip:
    """Encode a response, decode it as the client does, and encode the decoded body again;
    returns the frame and the decoded body."""
    frame = encode_response(key, version, correlation_id, body)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    got_correlation_id, decoded = decode_response(key, version, frame[4:])
    assert got_correlation_id == correlation_id
    assert encode_response(key, version, correlation_id, decoded) == frame
    return RoundTrip(frame, decoded)
