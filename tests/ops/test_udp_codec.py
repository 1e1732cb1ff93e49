"""UDP ingest's pending batches build byte-for-byte storage.records.build_batch within
their size bound, and its parsers follow the documented framing (hypothesis against the
definitions)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.udp import MalformedDatagram, PendingBatch, parse_json, parse_tsv
from storage.records import Record, build_batch, decode_batch, validate_client_batch

NOW = 1_700_000_000_000

records = st.lists(
    st.tuples(
        st.integers(0, (1 << 62)),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=20_000)),
        st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=30))),
                 max_size=3),
    ),
    min_size=1, max_size=30,
)


@given(records)
def test_pending_batch_matches_build_batch_byte_for_byte_within_its_bound(
    recs: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
) -> None:
    b = PendingBatch()
    for ts, key, value, headers in recs:
        b.add(ts, key, value, headers, PendingBatch.record_bound(key, value, headers))
    built = b.build()
    assert built == build_batch([Record(0, ts, k, v, h) for ts, k, v, h in recs])
    assert len(built) <= b.bound
    validate_client_batch(built)  # what the broker's append path checks
    assert [(r.timestamp, r.key, r.value, r.headers) for r in decode_batch(built)] == [
        (ts, k, v, h) for ts, k, v, h in recs]


@given(st.binary(max_size=20).filter(lambda k: b"\t" not in k and b"\n" not in k),
       st.one_of(st.none(), st.integers(0, 1 << 60)), st.binary(max_size=100))
def test_tsv_fields_are_key_timestamp_and_the_rest(key: bytes, ts: int | None, value: bytes) -> None:
    data = key + b"\t" + (b"" if ts is None else str(ts).encode()) + b"\t" + value
    r = parse_tsv(data, NOW)
    expected_value = value[:-1] if value.endswith(b"\n") else value
    assert (r.key, r.timestamp, r.value) == (key or None, NOW if ts is None else ts,
                                             expected_value)


@pytest.mark.parametrize("bad", [b"", b"k", b"k\tv", b"k\t12x\tv", b"k\t-1\tv", b"k\t1.5\tv"])
def test_tsv_rejects_what_the_framing_does_not_allow(bad: bytes) -> None:
    with pytest.raises(MalformedDatagram):
        parse_tsv(bad, NOW)


@given(st.fixed_dictionaries({}, optional={
    "key": st.one_of(st.none(), st.text(max_size=10)),
    "timestamp": st.one_of(st.none(), st.integers(0, 1 << 62)),
    "value": st.one_of(st.none(), st.text(max_size=30), st.integers(), st.lists(st.booleans())),
    "headers": st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.text(max_size=5))),
}))
def test_json_members_map_to_record_fields(obj: dict[str, object]) -> None:
    r = parse_json(json.dumps(obj).encode(), NOW)
    key, value, ts = obj.get("key"), obj.get("value"), obj.get("timestamp")
    assert r.key == (key.encode() if isinstance(key, str) else None)
    assert r.timestamp == (NOW if ts is None else ts)
    if value is None:
        assert r.value is None
    elif isinstance(value, str):
        assert r.value == value.encode()
    else:
        assert json.loads(r.value or b"") == value
    headers = obj.get("headers") or {}
    assert isinstance(headers, dict)
    assert r.headers == [(k, None if v is None else v.encode()) for k, v in headers.items()]


@pytest.mark.parametrize("bad", [b"[]", b"1", b"{", b'{"key": 1}', b'{"timestamp": -1}',
                                 b'{"timestamp": true}', b'{"timestamp": 1.5}',
                                 b'{"headers": []}', b'{"headers": {"a": 1}}', b"\xff",
                                 b'{"key": "\\ud800"}', b'{"value": "\\udfff"}',
                                 b'{"headers": {"\\ud800": "x"}}'])
def test_json_rejects_wrong_types(bad: bytes) -> None:
    with pytest.raises(MalformedDatagram):
        parse_json(bad, NOW)
