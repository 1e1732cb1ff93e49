"""DescribeConfigs (32) codecs, every version: round trips, what each version puts on the
wire, and aiokafka's hand-written v0-v2 structs as a second independent oracle
(kafka-python's generated codecs check v1-v4 in test_cross_kafka_python.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.protocol import admin as aio
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import describe_configs as dc
from protocol.api import (
    API_VERSIONS,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from tests.protocol.frames import request_round_trip, response_round_trip
from tests.protocol.strategies import expected_fields, plain, request_body, response_body

KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = range(API_VERSIONS[KEY].min_version, API_VERSIONS[KEY].max_version + 1)


def test_served_range_and_first_flexible_version_are_kafkas() -> None:
    rng = API_VERSIONS[KEY]
    assert (rng.min_version, rng.max_version, rng.first_flexible) == (0, 4, 4)


@pytest.mark.parametrize("version", VERSIONS)
@given(data=st.data())
@settings(max_examples=60)
def test_request_and_response_round_trip(version: int, data: st.DataObject) -> None:
    flexible = version >= 4
    req = data.draw(request_body(KEY, version))
    _, decoded = request_round_trip(KEY, version, 11, "dc", req)
    assert plain(decoded.body) == expected_fields(dc.REQUEST.fields, version, flexible, req)
    resp = data.draw(response_body(KEY, version))
    _, body = response_round_trip(KEY, version, 12, resp)
    assert plain(body) == expected_fields(dc.RESPONSE.fields, version, flexible, resp)


def _config(**extra: Any) -> dict[str, Any]:
    return {"name": "retention.ms", "value": "1000", "read_only": False, "is_default": False,
            "config_source": 1, "is_sensitive": False,
            "synonyms": [{"name": "retention.ms", "value": "1000", "source": 1}],
            "config_type": 5, "documentation": "doc", **extra}


def _response(config: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "results": [
        {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t",
         "configs": [config]}]}


def test_each_version_carries_only_its_fields() -> None:
    sizes = {v: len(encode_response(KEY, v, 1, _response(_config()))) for v in VERSIONS}
    body = {v: decode_response(KEY, v, encode_response(KEY, v, 1, _response(_config()))[4:])[1]
            for v in VERSIONS}
    c = {v: body[v].results[0].configs[0] for v in VERSIONS}
    # v0: is_default, no source/synonyms/type/doc; v1-2: source + synonyms; v3: type + doc.
    assert (c[0].config_source, list(c[0].synonyms), c[0].config_type) == (-1, [], 0)
    assert (c[1].config_source, len(c[1].synonyms), c[1].config_type, c[1].documentation) == (1, 1, 0, "")
    assert sizes[1] == sizes[2]
    assert (c[3].config_type, c[3].documentation) == (5, "doc")
    assert c[4] == c[3]
    req = {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
           "include_synonyms": True, "include_documentation": True}
    got = {v: decode_request(encode_request(KEY, v, 1, None, req)[4:]).body for v in VERSIONS}
    assert [(got[v].include_synonyms, got[v].include_documentation) for v in VERSIONS] == [
        (False, False), (True, False), (True, False), (True, True), (True, True)]


@pytest.mark.parametrize("version", VERSIONS)
def test_null_and_empty_configuration_keys_stay_distinct(version: int) -> None:
    out = []
    for keys in (None, [], ["a"]):
        req = {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": keys}]}
        out.append(decode_request(encode_request(KEY, version, 1, None, req)[4:]).body
                   .resources[0].configuration_keys)
    assert out == [None, [], ["a"]]


def _aio_resources(req: dict[str, Any]) -> list[tuple[int, str, list[str] | None]]:
    return [(r["resource_type"], r["resource_name"], r["configuration_keys"]) for r in req["resources"]]


@pytest.mark.parametrize("version", [0, 1, 2])
@given(data=st.data())
@settings(max_examples=40)
def test_aiokafka_structs_agree_with_ours(version: int, data: st.DataObject) -> None:
    req = data.draw(request_body(KEY, version))
    struct_cls = getattr(aio, f"DescribeConfigsRequest_v{version}")
    args: list[Any] = [_aio_resources(req)]
    if version >= 1:
        args.append(req["include_synonyms"])
    theirs = struct_cls(*args).encode()
    header = 2 + 2 + 4 + 2 + 1  # key, version, correlation id, client id "x" (header v1)
    ours = encode_request(KEY, version, 1, "x", req)[4 + header:]
    assert bytes(theirs) == ours

    resp = data.draw(response_body(KEY, version))
    frame = encode_response(KEY, version, 1, resp)[4 + 4:]
    decoded = aio.__dict__[f"DescribeConfigsResponse_v{version}"].decode(frame)
    assert decoded.throttle_time_ms == resp["throttle_time_ms"]
    for mine, (code, msg, rtype, rname, entries) in zip(resp["results"], decoded.resources, strict=True):
        assert (code, msg, rtype, rname) == (mine["error_code"], mine["error_message"],
                                             mine["resource_type"], mine["resource_name"])
        for c, e in zip(mine["configs"], entries, strict=True):
            if version == 0:
                assert e == (c["name"], c["value"], c["read_only"], c["is_default"], c["is_sensitive"])
            else:
                assert e[:5] == (c["name"], c["value"], c["read_only"], c["config_source"],
                                 c["is_sensitive"])
                assert list(e[5]) == [(s["name"], s["value"], s["source"]) for s in c["synonyms"]]
