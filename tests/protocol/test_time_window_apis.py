"""Chronolog's own APIs, PlanTimeWindow (10000) and CountTimeWindows (10001): declared like
every API, flexible from v0, no socket needed."""

from __future__ import annotations

import pytest

from protocol.api import API_VERSIONS, ApiKey, is_flexible
from tests.protocol.frames import request_round_trip, response_round_trip


@pytest.mark.parametrize(("key", "number", "name"), [
    (ApiKey.PLAN_TIME_WINDOW, 10000, "PlanTimeWindow"),
    (ApiKey.COUNT_TIME_WINDOWS, 10001, "CountTimeWindows"),
])
def test_the_key_is_outside_kafkas_range_and_v0_is_flexible(key: ApiKey, number: int,
                                                            name: str) -> None:
    assert key == number > 1000
    assert API_VERSIONS[key].name == name
    assert is_flexible(number, 0)


def test_plan_time_window_request_and_response_round_trip() -> None:
    body = {"isolation_level": 1, "start_timestamp": 5, "end_timestamp": 9,
            "topics": [{"name": "t", "partitions": [0, 2]}]}
    _, req = request_round_trip(ApiKey.PLAN_TIME_WINDOW, 0, 7, "c", body)
    assert req.api_key == ApiKey.PLAN_TIME_WINDOW and req.correlation_id == 7
    assert req.body["topics"][0]["partitions"] == [0, 2]
    assert (req.body["isolation_level"], req.body["start_timestamp"],
            req.body["end_timestamp"]) == (1, 5, 9)
    part = {"partition_index": 2, "error_code": 0, "log_start_offset": 3, "high_watermark": 90,
            "last_stable_offset": 80, "late_records": 4, "max_lateness_ms": 1000, "records": 87,
            "ranges": [{"start_offset": 3, "end_offset": 10, "bytes": 700},
                       {"start_offset": 40, "end_offset": 80, "bytes": 4000}]}
    resp = {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [part]}]}
    _, back = response_round_trip(ApiKey.PLAN_TIME_WINDOW, 0, 7, resp)  # checks the correlation id
    got = back["topics"][0]["partitions"][0]
    assert {k: got[k] for k in part if k != "ranges"} == {k: v for k, v in part.items()
                                                         if k != "ranges"}
    assert [dict(r) for r in got["ranges"]] == part["ranges"]


def test_count_time_windows_request_and_response_round_trip() -> None:
    body = {"isolation_level": 1, "boundaries": [-5, 0, 1 << 40, (1 << 63) - 1],
            "topics": [{"name": "t", "partitions": [0, 2]}]}
    _, req = request_round_trip(ApiKey.COUNT_TIME_WINDOWS, 0, 7, "c", body)
    assert req.api_key == ApiKey.COUNT_TIME_WINDOWS and req.correlation_id == 7
    assert list(req.body["boundaries"]) == body["boundaries"]
    assert req.body["isolation_level"] == 1
    assert list(req.body["topics"][0]["partitions"]) == [0, 2]
    part = {"partition_index": 2, "error_code": 0, "log_start_offset": 3, "high_watermark": 90,
            "last_stable_offset": 80, "counts": [4, 0, 1 << 35]}
    err = {"partition_index": 0, "error_code": 42, "log_start_offset": -1, "high_watermark": -1,
           "last_stable_offset": -1, "counts": []}
    resp = {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [part, err]}]}
    _, back = response_round_trip(ApiKey.COUNT_TIME_WINDOWS, 0, 7, resp)  # checks the correlation id
    for want, got in zip([part, err], back["topics"][0]["partitions"], strict=True):
        assert {k: (list(v) if k == "counts" else v) for k, v in got.items()} == want
