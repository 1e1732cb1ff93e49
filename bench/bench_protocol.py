"""Protocol codec cost per message: declarative (compiled construct) vs struct fast path.

Side by side in one run, on the messages every produce, fetch and timestamp
lookup pays for, plus the ListOffsets round trip (request decode + response
encode) against the ApiVersions round trip — the protocol's share of the
issue's "lookup p50 within 20 µs of the no-op floor" target.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from bench.report import Report, median, time_calls
from protocol.api import (
    ApiKey,
    advertised_api_keys,
    decode_request,
    decode_request_declarative,
    decode_response,
    decode_response_declarative,
    encode_request,
    encode_request_declarative,
    encode_response,
    encode_response_declarative,
)

N = 5000
SECTION = "protocol"


def _us(fn: Callable[[], object], n: int = N) -> float:
    for _ in range(200):
        fn()
    return median(time_calls(fn, n))


def _pair(report: Report, name: str, slow: Callable[[], object], fast: Callable[[], object], n: int = N) -> float:
    d = _us(slow, n)
    f = _us(fast, n)
    report.add(SECTION, f"{name} declarative", d, "µs")
    report.add(SECTION, f"{name} fast path", f, "µs", note=f"{d / f:.1f}x faster")
    return f


def _broker_side(report: Report, label: str, key: ApiKey, version: int,
                 request: dict[str, Any], response: dict[str, Any]) -> float:
    """The broker's codec work for one exchange: request decode + response encode, each
    declarative beside fast path; returns the fast paths' µs."""
    frame = encode_request(key, version, 1, "rdkafka", request)[4:]
    dec = _pair(report, f"{label} v{version} request decode",
                partial(decode_request_declarative, frame),
                partial(decode_request, frame))
    enc = _pair(report, f"{label} v{version} response encode",
                partial(encode_response_declarative, key, version, 1, response),
                partial(encode_response, key, version, 1, response))
    return dec + enc


def run(report: Report, scratch: str) -> None:
    lo_body = {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": "events", "partitions": [{"partition_index": 0, "timestamp": 1_700_000_000_000}]}]}
    lo_resp = {"topics": [{"name": "events", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": 1_700_000_000_000, "offset": 123_456, "leader_epoch": 0}]}]}
    av_keys = {"api_keys": advertised_api_keys()}
    floor_total = 0.0
    lookup_total = 0.0
    for version in (1, 7, 10):
        total = _broker_side(report, "ListOffsets", ApiKey.LIST_OFFSETS, version, lo_body, lo_resp)
        if version == 7:
            lookup_total = total
    av_rdkafka = {"client_software_name": "librdkafka", "client_software_version": "2.16.0"}
    for version in (0, 3):
        total = _broker_side(report, "ApiVersions", ApiKey.API_VERSIONS, version, av_rdkafka, av_keys)
        if version == 3:
            floor_total = total
    report.add(SECTION, "ListOffsets v7 round trip minus ApiVersions v3 round trip",
               lookup_total - floor_total, "µs", target="< 20 µs (whole lookup)",
               note="broker codec share of the lookup-over-floor budget")

    # the client side of the same exchanges (bundled client, lookup benchmark)
    lo_frame = encode_response(ApiKey.LIST_OFFSETS, 7, 1, lo_resp)[4:]
    av_frame = encode_response(ApiKey.API_VERSIONS, 3, 1, av_keys)[4:]
    client_lookup = _pair(report, "client: ListOffsets v7 request encode",
                          partial(encode_request_declarative, ApiKey.LIST_OFFSETS, 7, 1, "bench", lo_body),
                          partial(encode_request, ApiKey.LIST_OFFSETS, 7, 1, "bench", lo_body))
    client_lookup += _pair(report, "client: ListOffsets v7 response decode",
                           partial(decode_response_declarative, ApiKey.LIST_OFFSETS, 7, lo_frame),
                           partial(decode_response, ApiKey.LIST_OFFSETS, 7, lo_frame))
    av_req = {"client_software_name": "bench", "client_software_version": "1"}
    client_floor = _us(partial(encode_request, ApiKey.API_VERSIONS, 3, 1, "bench", av_req))
    report.add(SECTION, "client: ApiVersions v3 request encode (declarative only)", client_floor, "µs")
    client_floor += _pair(report, "client: ApiVersions v3 response decode",
                          partial(decode_response_declarative, ApiKey.API_VERSIONS, 3, av_frame),
                          partial(decode_response, ApiKey.API_VERSIONS, 3, av_frame))
    report.add(SECTION, "whole ListOffsets v7 exchange minus ApiVersions v3 exchange (both sides)",
               lookup_total + client_lookup - floor_total - client_floor, "µs",
               target="< 20 µs (whole lookup)", note="codec share, broker + client, fast paths")

    batch = b"r" * 16_384
    for version in (7, 9, 11):
        frame = encode_request(ApiKey.PRODUCE, version, 1, "rdkafka", {"acks": -1, "timeout_ms": 30_000, "topic_data": [
            {"name": "events", "partition_data": [{"index": p, "records": batch} for p in range(4)]}]})[4:]
        _pair(report, f"Produce v{version} request decode (4 x 16 KiB)",
              partial(decode_request_declarative, frame),
              partial(decode_request, frame))

    blob = b"f" * (1 << 20)
    fetch_body = {"responses": [{"topic": "events", "partitions": [
        {"partition_index": 0, "high_watermark": 10, "last_stable_offset": 10, "log_start_offset": 0,
         "aborted_transactions": None, "records": memoryview(blob)}]}]}
    for version in (4, 11, 12):
        _pair(report, f"Fetch v{version} response encode (1 MiB records)",
              partial(encode_response_declarative, ApiKey.FETCH, version, 1, fetch_body),
              partial(encode_response, ApiKey.FETCH, version, 1, fetch_body), n=500)
