"""Kafka's end-transaction marker, byte for byte (transactions-facts §3), and how the
log indexes and searches it like any batch (markers carry timestamps too)."""

from __future__ import annotations

import struct
from pathlib import Path

from storage.config import LogConfig
from storage.log import Log
from storage.records import (
    Record,
    build_batch,
    build_control_batch,
    control_type,
    crc_ok,
    decode_batch,
    parse_header,
)


def test_marker_is_kafkas_78_byte_control_batch() -> None:
    for commit in (False, True):
        raw = build_control_batch_for(commit)
        h = parse_header(raw)
        assert len(raw) == 78 and crc_ok(raw, 0, h)
        assert h.attributes == 0x30 and h.base_sequence == -1 and h.last_offset_delta == 0
        assert (h.producer_id, h.producer_epoch) == (42, 3)
        [rec] = decode_batch(raw)
        assert rec.key == struct.pack(">hh", 0, int(commit))
        assert rec.value == struct.pack(">hi", 0, 5)
        assert control_type(raw) == int(commit)


def build_control_batch_for(commit: bool) -> bytes:
    return build_control_batch(commit, producer_id=42, producer_epoch=3, coordinator_epoch=5,
                               timestamp=1_000)


def test_a_marker_is_searched_by_time_like_any_batch(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append(build_batch([Record(0, 100, None, b"a", []), Record(0, 200, None, b"b", [])]),
               now_ms=200)
    at = log.append_control(True, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                            now_ms=300).base_offset
    assert at == 2
    # Nothing in the data reaches 250; the COMMIT marker at 300 does (Kafka's search).
    hit = log.offset_for_timestamp(250)
    assert hit is not None and (hit.offset, hit.timestamp) == (2, 300)
    top = log.offset_for_timestamp(-3)
    assert top is not None and (top.offset, top.timestamp) == (2, 300)
    assert log.offset_for_timestamp(301) is None
    log.close()


def test_markers_on_a_log_append_time_topic_share_its_monotonic_clock(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    log.append(build_batch([Record(0, 5, None, b"a", [])]), now_ms=1_000)
    marker = log.append_control(False, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                now_ms=900)  # the clock stepped back: never stamp below 1000
    raw = log.read(marker.base_offset, 1000)
    h = parse_header(raw)
    assert h.attributes == 0x38 and h.max_timestamp == 1_000
    assert control_type(raw) == 0
    log.close()
