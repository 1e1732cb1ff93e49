"""ProducerRecord: a record made by the thousand in a caller's loop costs no garbage
collection, and behaves as the dataclass it replaced (fields, order, equality, copy)."""

from __future__ import annotations

import gc

import msgspec

from client import ProducerRecord


def test_ten_thousand_records_set_off_no_garbage_collection() -> None:
    # Each tracked allocation counts towards gen 0's threshold (700 by default), so a
    # list of 10k tracked records would set off 14 or more collections here.
    runs: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        records = [ProducerRecord(value=b"v" * 100, timestamp=i) for i in range(10_000)]
    finally:
        gc.callbacks.remove(count)
    assert len(records) == 10_000
    assert not gc.is_tracked(records[0])
    assert runs == []


def test_fields_keywords_positions_and_equality_are_a_dataclasss() -> None:
    a = ProducerRecord(b"k", "v", [("h", b"1")], 5)
    b = ProducerRecord(key=b"k", value="v", headers=[("h", b"1")], timestamp=5)
    assert a == b
    assert a != ProducerRecord(b"k", "v", [("h", b"1")], 6)
    assert (a.key, a.value, a.headers, a.timestamp) == (b"k", "v", [("h", b"1")], 5)
    empty = ProducerRecord()
    assert (empty.key, empty.value, empty.headers, empty.timestamp) == (None, None, (), None)
    assert repr(a) == "ProducerRecord(key=b'k', value='v', headers=[('h', b'1')], timestamp=5)"
    c = msgspec.structs.replace(a, timestamp=7)
    assert (c.timestamp, c.key, a.timestamp) == (7, b"k", 5)
