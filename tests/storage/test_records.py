"""The record-batch codec, checked against real Kafka client implementations.

Oracles: kafka-python's pure-Python ``DefaultRecordBatchBuilder``/``DefaultRecordBatch``
(uncompressed and gzip; it has no other codec libraries here) and aiokafka's
compiled ones (every codec, via cramjam). Bytes go both ways: our build -> their
parse, and their build -> our parse.
"""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from hypothesis import assume, given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from storage import records as R
from storage.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from storage.records import Record

CODECS = [0, 1, 2, 3, 4]
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# ---------------------------------------------------------------- strategies

maybe_bytes = st.one_of(st.none(), st.binary(max_size=40))
headers_st = st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3)


@st.composite
def record_lists(draw: st.DrawFn, max_size: int = 30) -> list[Record]:
    """Records whose timestamps stay within int64 deltas of the first one."""
    n = draw(st.integers(0, max_size))
    base = draw(st.one_of(st.integers(-(1 << 40), 1 << 45), st.integers(INT64_MIN // 2, INT64_MAX // 2)))
    out = []
    for _ in range(n):
        delta = draw(
            st.one_of(
                st.integers(-70, 70),
                st.integers(-(1 << 20), 1 << 20),
                st.integers(INT64_MIN // 2 - min(base, 0), INT64_MAX // 2 - max(base, 0)),
            )
        )
        out.append(Record(0, base + delta, draw(maybe_bytes), draw(maybe_bytes), draw(headers_st)))
    return out


def view(rs: list[Record]) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [(r.timestamp, r.key, r.value, list(r.headers)) for r in rs]


def build(rs: list[Record], **kw: int) -> bytes:
    return R.build_batch(rs, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", CODECS)
@given(rs=record_lists(), base_offset=st.integers(0, 1 << 40))
def test_build_then_decode_round_trips_every_field(codec: int, rs: list[Record], base_offset: int) -> None:
    buf = build(rs, compression=codec, base_offset=base_offset)
    h = R.parse_header(buf)
    assert h.size == len(buf)
    assert h.compression == codec
    assert h.records_count == len(rs) == h.last_offset_delta + 1
    assert R.crc_ok(buf, 0, h)
    got = R.decode_batch(buf)
    assert view(got) == view(rs)
    assert [r.offset for r in got] == list(range(base_offset, base_offset + len(rs)))
    if rs:
        assert h.base_timestamp == rs[0].timestamp
        assert h.max_timestamp == max(r.timestamp for r in rs)
        scan = R.scan_timestamps(buf)
        ts = [r.timestamp for r in rs]
        assert (scan.min_timestamp, scan.max_timestamp) == (min(ts), max(ts))
        assert scan.offset_delta_of_max == ts.index(max(ts))


@pytest.mark.parametrize("codec", CODECS)
@given(rs=record_lists())
def test_aiokafka_reads_what_we_build(codec: int, rs: list[Record]) -> None:
    buf = build(rs, compression=codec, producer_id=7, producer_epoch=3, base_sequence=11)
    theirs = AioBatch(bytearray(buf))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (7, 3, 11)
    got = [(r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == view(rs)


@given(rs=record_lists(), gzip=st.booleans())
def test_kafka_python_reads_what_we_build(rs: list[Record], gzip: bool) -> None:
    buf = build(rs, compression=1 if gzip else 0)
    theirs = KpBatch(bytes(buf))
    assert theirs.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [(i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(rs)]


def _their_records(data: st.DataObject) -> list[Record]:
    rs = data.draw(record_lists(max_size=40))
    assume(rs)
    return rs


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.data())
def test_we_read_what_aiokafka_builds(codec: int, data: st.DataObject) -> None:
    rs = _their_records(data)
    # aiokafka's builder treats a first timestamp of -1 as "unset" and rebases the
    # batch on the next record's; its own reader then agrees with ours, not with rs.
    assume(rs[0].timestamp != -1)
    b = AioBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for i, r in enumerate(rs):
        assert b.append(i, r.timestamp, r.key, r.value, r.headers) is not None
    buf = bytes(b.build())
    h = R.parse_header(buf)
    assert R.crc_ok(buf, 0, h)
    assert view(R.decode_batch(buf)) == view(rs)
    scan = R.validate_client_batch(buf)
    ts = [r.timestamp for r in rs]
    assert (scan.min_timestamp, scan.max_timestamp, scan.offset_delta_of_max) == (
        min(ts), max(ts), ts.index(max(ts)))


@given(data=st.data(), gzip=st.booleans())
def test_we_read_what_kafka_python_builds(data: st.DataObject, gzip: bool) -> None:
    rs = _their_records(data)
    b = KpBuilder(2, 1 if gzip else 0, False, -1, -1, -1, 1 << 30)
    for i, r in enumerate(rs):
        assert b.append(i, r.timestamp, r.key, r.value, r.headers) is not None
    buf = bytes(b.build())
    assert view(R.decode_batch(buf)) == view(rs)
    assert R.validate_client_batch(buf).max_timestamp == max(r.timestamp for r in rs)


# ---------------------------------------------------------------- headers and walking


def test_parse_header_reads_each_field_at_kafkas_offset() -> None:
    rs = [Record(0, 1_000, b"k", b"v", []), Record(0, 900, None, None, [])]
    buf = build(rs, base_offset=42, producer_id=5, producer_epoch=2, base_sequence=9,
                partition_leader_epoch=3, is_transactional=True, compression=0)
    h = R.parse_header(buf)
    assert h == R.BatchHeader(42, len(buf) - 12, 3, 2, struct.unpack_from(">I", buf, 17)[0],
                              0x10, 1, 1_000, 1_000, 5, 2, 9, 2)
    assert (h.last_offset, h.is_transactional, h.is_control, h.timestamp_type) == (43, True, False, 0)


def test_parse_header_rejects_short_wrong_magic_and_overlong() -> None:
    buf = build([Record(0, 1, None, b"x", [])])
    with pytest.raises(CorruptRecordError):
        R.parse_header(buf[:60])
    bad = bytearray(buf)
    bad[16] = 1
    with pytest.raises(CorruptRecordError):
        R.parse_header(bad)
    with pytest.raises(CorruptRecordError):
        R.parse_header(buf[:-1])
    assert R.parse_header(buf[:61], require_body=False).size == len(buf)
    small = bytearray(buf)
    struct.pack_into(">i", small, 8, 48)
    with pytest.raises(CorruptRecordError):
        R.parse_header(small)


@given(sizes=st.lists(st.integers(0, 5), min_size=1, max_size=6), cut=st.integers(0, 10_000))
def test_iter_batches_walks_whole_batches_and_stops_at_a_torn_tail(sizes: list[int], cut: int) -> None:
    batches = [build([Record(0, i, None, b"v" * j, []) for i in range(n)], base_offset=k * 10)
               for k, (n, j) in enumerate(zip(sizes, range(len(sizes)), strict=True))]
    log = b"".join(batches)
    cut = min(cut, len(log))
    torn = log[:cut]
    got = list(R.iter_batches(torn))
    starts = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    whole = [(s, b) for s, b in zip(starts, batches, strict=True) if s + len(b) <= cut]
    assert [p for p, _ in got] == [s for s, _ in whole]
    assert [h.size for _, h in got] == [len(b) for _, b in whole]
    assert all(R.crc_ok(torn, p, h) for p, h in got)


def test_crc_ok_is_false_when_any_byte_after_the_crc_field_flips() -> None:
    buf = build([Record(0, 5, b"key", b"value", [("h", b"x")]) for _ in range(3)])
    h = R.parse_header(buf)
    for i in range(21, len(buf)):
        bad = bytearray(buf)
        bad[i] ^= 0x01
        assert not R.crc_ok(bad, 0, h), i
    # Bytes before attributes are not covered, so the broker can rewrite them freely.
    for i in list(range(0, 16)):
        bad = bytearray(buf)
        bad[i] ^= 0xFF
        assert R.crc_ok(bad, 0, h)


def test_unknown_codec_is_unsupported_compression() -> None:
    buf = bytearray(build([Record(0, 5, None, b"v", [])]))
    buf[22] |= 0x05
    R.set_max_timestamp(buf, 0, 6, 0)  # re-CRC
    with pytest.raises(UnsupportedCompressionError):
        R.decode_batch(buf)
    with pytest.raises(UnsupportedCompressionError):
        R.validate_client_batch(buf)


def test_log_append_time_batch_reports_max_timestamp_for_every_record() -> None:
    rs = [Record(0, t, None, b"v", []) for t in (10, 30, 20)]
    buf = bytearray(build(rs))
    assert R.set_max_timestamp(buf, 0, 99_999, 1)
    h = R.parse_header(buf)
    assert h.timestamp_type == 1 and h.max_timestamp == 99_999 and h.base_timestamp == 10
    assert R.crc_ok(buf, 0, h)
    assert [r.timestamp for r in R.decode_batch(buf)] == [99_999] * 3
    assert R.scan_timestamps(buf)[1:4] == (99_999, 99_999, 0)
    theirs = KpBatch(bytes(buf))
    assert theirs.validate_crc()
    assert [r.timestamp for r in theirs] == [99_999] * 3


@given(ts=st.integers(INT64_MIN, INT64_MAX), ttype=st.sampled_from([0, 1]), codec=st.sampled_from(CODECS))
def test_set_max_timestamp_keeps_a_crc_that_kafka_clients_accept(ts: int, ttype: int, codec: int) -> None:
    buf = bytearray(build([Record(0, 1000, b"a", b"b", []), Record(0, 1001, None, b"c", [])],
                          compression=codec))
    before = bytes(buf)
    changed = R.set_max_timestamp(buf, 0, ts, ttype)
    assert changed == (bytes(buf) != before)
    assert changed == (ts != 1001 or ttype != 0)
    assert KpBatch(bytes(buf)).validate_crc()
    assert AioBatch(bytearray(buf)).validate_crc()
    h = R.parse_header(buf)
    assert (h.max_timestamp, h.timestamp_type) == (ts, ttype)


def test_set_base_offset_and_epoch_leave_the_crc_valid() -> None:
    buf = bytearray(build([Record(0, 1, None, b"x", [])] * 3))
    R.set_base_offset(buf, 0, 1234)
    R.set_partition_leader_epoch(buf, 0, 17)
    h = R.parse_header(buf)
    assert (h.base_offset, h.last_offset, h.partition_leader_epoch) == (1234, 1236, 17)
    assert R.crc_ok(buf, 0, h)
    assert [r.offset for r in R.decode_batch(buf)] == [1234, 1235, 1236]


# ---------------------------------------------------------------- corruption


@pytest.mark.parametrize("codec", CODECS)
@given(rs=record_lists(max_size=8), data=st.data())
def test_mangled_records_raise_only_storage_errors(codec: int, rs: list[Record], data: st.DataObject) -> None:
    """Any change to the records region, or to the count, is an error we name or a valid parse."""
    buf = bytearray(build(rs, compression=codec))
    n = len(buf)
    if n > 61:
        i = data.draw(st.integers(61, n - 1))
        buf[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        struct.pack_into(">i", buf, 57, data.draw(st.integers(-3, 50)))
    if data.draw(st.booleans()):
        del buf[data.draw(st.integers(61, n)):]
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, R.compute_crc(buf, 0, len(buf)))
    for fn in (R.decode_batch, R.scan_timestamps, R.validate_client_batch):
        try:
            fn(buf)
        except (CorruptRecordError, InvalidRecordError):
            pass


# ---------------------------------------------------------------- client append checks


def _client_batch(**kw: int) -> bytearray:
    return bytearray(build([Record(0, 100 + i, None, b"v%d" % i, []) for i in range(5)], **kw))


def _recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, R.compute_crc(buf, 0, len(buf)))
    return buf


def test_validate_accepts_a_well_formed_client_batch() -> None:
    scan = R.validate_client_batch(_client_batch(producer_id=1, producer_epoch=0, base_sequence=0))
    assert (scan.min_timestamp, scan.max_timestamp, scan.offset_delta_of_max) == (100, 104, 4)


def test_validate_rejects_a_bad_crc_as_corrupt() -> None:
    buf = _client_batch()
    buf[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        R.validate_client_batch(buf)


def test_validate_rejects_two_batches_or_trailing_bytes() -> None:
    buf = _client_batch()
    with pytest.raises(InvalidRecordError):
        R.validate_client_batch(bytes(buf) + bytes(buf))
    with pytest.raises(InvalidRecordError):
        R.validate_client_batch(bytes(buf) + b"\x00")
    with pytest.raises(CorruptRecordError):
        R.validate_client_batch(bytes(buf)[:-1])


def test_validate_rejects_nonzero_base_offset() -> None:
    with pytest.raises(InvalidRecordError):
        R.validate_client_batch(_client_batch(base_offset=1))


@pytest.mark.parametrize("count,last_delta", [(4, 4), (6, 4), (0, -1), (5, 3)])
def test_validate_rejects_count_not_matching_last_offset_delta(count: int, last_delta: int) -> None:
    buf = _client_batch()
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">i", buf, 23, last_delta)
    with pytest.raises(InvalidRecordError):
        R.validate_client_batch(_recrc(buf))


def test_validate_rejects_a_control_batch() -> None:
    buf = _client_batch()
    buf[22] |= 0x20
    with pytest.raises(InvalidRecordError):
        R.validate_client_batch(_recrc(buf))


def test_validate_rejects_idempotent_batch_without_sequence() -> None:
    with pytest.raises(InvalidRecordError):
        R.validate_client_batch(_client_batch(producer_id=9, producer_epoch=0, base_sequence=-1))


def test_validate_rejects_offset_deltas_out_of_order() -> None:
    rs = [(None, b"a"), (None, b"b")]
    b = KpBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    b.append(1, 5, *rs[0], [])
    b.append(0, 6, *rs[1], [])
    buf = bytearray(b.build())
    struct.pack_into(">i", buf, 23, 1)
    with pytest.raises(InvalidRecordError):
        R.validate_client_batch(_recrc(buf))


def test_validate_rejects_records_that_end_before_the_batch() -> None:
    buf = _client_batch()
    struct.pack_into(">i", buf, 57, 4)
    struct.pack_into(">i", buf, 23, 3)
    with pytest.raises(InvalidRecordError):
        R.validate_client_batch(_recrc(buf))


@given(
    ts=st.lists(st.one_of(st.just(-1), st.integers(0, 30_000)), min_size=1, max_size=30),
    now=st.integers(0, 30_000), before=st.integers(0, 20_000), after=st.integers(0, 20_000),
    codec=st.sampled_from(CODECS),
)
def test_timestamp_errors_name_every_offending_record(
        ts: list[int], now: int, before: int, after: int, codec: int) -> None:
    """Oracle: KIP-937's rule per record; -1 (no timestamp) is never out of range."""
    buf = build([Record(0, t, None, b"v", []) for t in ts], compression=codec)
    errs = R.timestamp_errors(buf, 0, now_ms=now, before_max_ms=before, after_max_ms=after)
    bad = [i for i, t in enumerate(ts) if t != -1 and (now - t > before or t - now > after)]
    assert [i for i, _ in errs] == bad
    for i, msg in errs:
        assert msg.startswith(f"Timestamp {ts[i]} of message with offset {i} is out of range.")
        assert f"[{now - before}, {now + after}]" in msg
    # The append path calls timestamp_errors only when min/max show a violation.
    scan = R.validate_client_batch(buf)
    assert bool(bad) <= (now - scan.min_timestamp > before or scan.max_timestamp - now > after)


# ---------------------------------------------------------------- fast walk == scalar walk
#
# The append path decodes runs of same-layout records column-wise (see the
# comment above ``_scan`` in storage/records.py). These tests hand-encode
# batches, including non-canonical (padded) varints that Kafka's reader accepts,
# and require the column walk, the plain per-record walk and kafka-python's
# reader to agree on every batch.


def _uvarint(u: int, pad: int = 0) -> bytes:
    """LEB128 of u, with ``pad`` redundant zero groups (a valid, non-canonical encoding)."""
    out = bytearray()
    while True:
        out.append(u & 0x7F)
        u >>= 7
        if not u:
            break
        out[-1] |= 0x80
    if pad:
        out[-1] |= 0x80
        out += b"\x80" * (pad - 1) + b"\x00"
    return bytes(out)


def _zz(n: int) -> int:
    return ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF


def _raw_record(td: int, od: int, key: bytes | None, value: bytes | None,
                headers: list[tuple[bytes, bytes | None]], pads: dict[str, int]) -> bytes:
    def v(n: int, field: str) -> bytes:
        # Padding stays within Kafka's limits: 10 bytes for the varlong, 5 for varints.
        canonical = len(_uvarint(_zz(n)))
        return _uvarint(_zz(n), min(pads.get(field, 0), (10 if field == "ts" else 5) - canonical))

    body = b"\x00" + v(td, "ts") + v(od, "od")
    body += v(-1, "k") if key is None else v(len(key), "k") + key
    body += v(-1, "v") if value is None else v(len(value), "v") + value
    body += v(len(headers), "h")
    for hk, hv in headers:
        body += v(len(hk), "hk") + hk + (v(-1, "hv") if hv is None else v(len(hv), "hv") + hv)
    return v(len(body), "len") + body


def _raw_batch(records: list[bytes], base_ts: int, last_delta: int | None = None) -> bytearray:
    n = len(records)
    payload = b"".join(records)
    buf = bytearray(61 + len(payload))
    struct.pack_into(">qiibIhiqqqhii", buf, 0, 0, len(buf) - 12, -1, 2, 0, 0,
                     n - 1 if last_delta is None else last_delta, base_ts, base_ts, -1, -1, -1, n)
    buf[61:] = payload
    struct.pack_into(">I", buf, 17, R.compute_crc(buf, 0, len(buf)))
    return buf


def _width_class(w: int) -> st.SearchStrategy[int]:
    """Deltas whose zig-zag varint is (almost always) exactly w bytes long."""
    lo = 0 if w == 1 else 1 << (7 * (w - 1) - 1)
    hi = min((1 << (7 * w - 1)) - 1, (1 << 62))
    return st.builds(lambda m, neg: -m if neg else m, st.integers(lo, hi), st.booleans())


TS_REGIMES = {
    "same_ms": st.just(0),
    "ms_spread": st.integers(0, 100_000),
    **{f"width_{w}": _width_class(w) for w in range(1, 10)},
}


RawFields = tuple[int, int, bytes | None, bytes | None, list[tuple[bytes, bytes | None]]]


@st.composite
def run_heavy_batches(draw: st.DrawFn) -> tuple[list[RawFields], list[bytes]]:
    """Records mostly sharing one layout, with some perturbed ones; returns (fields, encoded)."""
    n = draw(st.one_of(st.integers(0, 60), st.integers(60, 400)))
    # Mostly width-uniform deltas, so that long runs (the column walk's input) are common.
    names = sorted(TS_REGIMES)
    regime = TS_REGIMES[draw(st.sampled_from(names + [n for n in names if n.startswith("width")] * 2))]
    key = draw(st.one_of(st.none(), st.binary(max_size=12)))
    vlen = draw(st.sampled_from([0, 5, 60, 100, 200]))
    headers: list[tuple[bytes, bytes | None]] = draw(
        st.lists(st.tuples(st.text(max_size=3).map(str.encode), st.one_of(st.none(), st.binary(max_size=4))),
                 max_size=2))
    p_odd = draw(st.sampled_from([0.0, 0.02, 0.2]))
    pad_field = draw(st.sampled_from(["", "ts", "od", "len", "k", "v", "h"]))
    uniform = draw(st.sampled_from([True, True, True, False]))
    fields: list[RawFields] = []
    encoded: list[bytes] = []
    for i in range(n):
        td = draw(regime) if uniform or draw(st.booleans()) else i // 7
        k, hs, pads = key, headers, {}
        val: bytes | None = bytes(vlen)
        if p_odd and draw(st.floats(0, 1)) < p_odd:
            which = draw(st.sampled_from(["value", "header", "pad", "null"]))
            if which == "value":
                val = bytes(draw(st.integers(0, 300)))
            elif which == "header":
                hs = headers + [(b"x", b"y")]
            elif which == "pad" and pad_field:
                pads = {pad_field: draw(st.integers(1, 3))}
            else:
                val = None
        fields.append((td, i, k, val, hs))
        encoded.append(_raw_record(td, i, k, val, hs, pads))
    return fields, encoded


def _outcome(fn: object, *args: object) -> object:
    try:
        return fn(*args)  # type: ignore[operator]
    except (CorruptRecordError, InvalidRecordError) as exc:
        return type(exc)


@given(batch=run_heavy_batches(), base_ts=st.integers(-(1 << 40), 1 << 40))
def test_column_walk_agrees_with_record_walk_and_kafka_python(
        batch: tuple[list[RawFields], list[bytes]],
        base_ts: int) -> None:
    fields, encoded = batch
    buf = _raw_batch(encoded, base_ts)
    n, end = len(encoded), len(buf)
    for check in (False, True):
        fast = R._scan(buf, 61, end, n, check, True)
        assert fast == R._scan(buf, 61, end, n, check, False)
    if not fields:
        return
    ts = [base_ts + f[0] for f in fields]
    scan = R.validate_client_batch(buf)
    assert (scan.min_timestamp, scan.max_timestamp, scan.offset_delta_of_max) == (
        min(ts), max(ts), ts.index(max(ts)))
    theirs = list(KpBatch(bytes(buf)))
    assert [r.timestamp for r in theirs] == ts
    ours = R.decode_batch(buf)
    assert [(r.timestamp, r.key, r.value) for r in ours] == [(r.timestamp, r.key, r.value) for r in theirs]


@given(batch=run_heavy_batches(), data=st.data())
def test_column_walk_agrees_with_record_walk_on_damaged_batches(
        batch: tuple[list[RawFields], list[bytes]], data: st.DataObject) -> None:
    """Any byte changed, any offset delta wrong, any count: both walks accept or both reject."""
    _fields, encoded = batch
    if not encoded:
        return
    buf = _raw_batch(encoded, 1000)
    mode = data.draw(st.sampled_from(["byte", "offset", "count"]))
    count = len(encoded)
    if mode == "byte":
        i = data.draw(st.integers(61, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    elif mode == "offset":
        j = data.draw(st.integers(0, len(encoded) - 1))
        td, _od, key, value, headers = _fields[j]
        wrong = data.draw(st.integers(-2, len(encoded) + 70).filter(lambda x: x != j))
        encoded = list(encoded)
        encoded[j] = _raw_record(td, wrong, key, value, headers, {})
        buf = _raw_batch(encoded, 1000)
    else:
        count = data.draw(st.integers(0, len(encoded) + 3))
    for check in (False, True):
        fast = _outcome(R._scan, buf, 61, len(buf), count, check, True)
        slow = _outcome(R._scan, buf, 61, len(buf), count, check, False)
        if isinstance(fast, type) or isinstance(slow, type):
            # Both reject; which of the two errors comes first may differ within one record.
            assert isinstance(fast, type) and isinstance(slow, type), (fast, slow)
        else:
            assert fast == slow
    try:
        R.validate_client_batch(buf)
    except (CorruptRecordError, InvalidRecordError):
        pass


def test_column_walk_handles_a_large_regular_batch_exactly() -> None:
    """10,000 same-size records crossing every varint width boundary of offsets and deltas."""
    n = 10_000
    tds = [(i * 37) % 20_000 - 9_000 for i in range(n)]
    tds[7_777] = 1 << 45
    tds[8_888] = 1 << 45
    tds[3] = -(1 << 45)
    rs = [Record(0, 5_000_000 + td, b"key", bytes(100), []) for td in tds]
    buf = build(rs, compression=4)
    scan = R.validate_client_batch(buf)
    assert (scan.min_timestamp, scan.max_timestamp, scan.offset_delta_of_max) == (
        5_000_000 - (1 << 45), 5_000_000 + (1 << 45), 7_777)
    data = R.codecs.decompress(4, buf[61:])
    assert R._scan(data, 0, len(data), n, True, True) == R._scan(data, 0, len(data), n, True, False)


@pytest.mark.parametrize("width", range(1, 11))
@given(data=st.data())
def test_column_walk_decodes_every_timestamp_varint_width(width: int, data: st.DataObject) -> None:
    """Runs whose timestamp deltas all take ``width`` bytes: min, max, first max are exact."""
    n = data.draw(st.integers(R._MIN_RUN, 3 * R._MIN_RUN))
    lo = 0 if width == 1 else 1 << (7 * (width - 1) - 1)
    hi = (1 << min(7 * width - 1, 63)) - 1
    mags = data.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    tds = [m if m == 0 or m > (1 << 62) or data.draw(st.booleans()) else -m for m in mags]
    tds = [max(-(1 << 63), min((1 << 63) - 1, t)) for t in tds]
    dup = data.draw(st.integers(0, n - 1))
    tds[dup] = max(tds)  # a repeated max: the first one must be reported
    buf = _raw_batch([_raw_record(td, i, b"k", b"v" * 20, [], {}) for i, td in enumerate(tds)], 0)
    got = R._scan(buf, 61, len(buf), n, True, True)
    assert got == (min(tds), max(tds), tds.index(max(tds)))
    assert got == R._scan(buf, 61, len(buf), n, True, False)


def test_validate_refuses_a_batch_that_would_inflate_beyond_the_limit() -> None:
    rs = [Record(0, 1, None, bytes(1000), []) for _ in range(3000)]  # ~3 MB of zeros
    buf = build(rs, compression=4)
    assert len(buf) < 10_000
    assert R.validate_client_batch(buf).max_timestamp == 1
    with pytest.raises(CorruptRecordError):
        R.validate_client_batch(buf, max_uncompressed_bytes=1_000_000)


@pytest.mark.parametrize("codec", [0, 3])
@given(rs=record_lists(max_size=40), pad=st.binary(max_size=5))
def test_memoryview_and_bytearray_inputs_read_like_bytes(codec: int, rs: list[Record], pad: bytes) -> None:
    """The broker hands slices of request frames (memoryview) and the log bytearrays."""
    raw = build(rs, compression=codec)
    framed = pad + raw + pad
    start, stop = len(pad), len(pad) + len(raw)
    want = view(R.decode_batch(raw))
    for buf in (memoryview(framed)[start:stop], bytearray(raw), memoryview(bytearray(framed))[start:stop]):
        assert view(R.decode_batch(buf)) == want
        assert R.scan_timestamps(buf) == R.scan_timestamps(raw)
        if rs:
            assert R.validate_client_batch(buf) == R.validate_client_batch(raw)
    # Positions inside a larger buffer work without slicing.
    assert view(R.decode_batch(framed, start)) == want
    if rs:
        assert R.validate_client_batch(framed, start, stop) == R.validate_client_batch(raw)
    assert [p for p, _ in R.iter_batches(framed, start, stop)] == [start]


def test_column_walk_reads_memoryview_and_bytearray_runs() -> None:
    # Deltas after the first all take two bytes, so records 1.. form long runs.
    rs = [Record(0, 7_000 + (i and 100 + (i * 13) % 500), b"k", b"v" * 90, [("h", b"1")])
          for i in range(3_000)]
    raw = build(rs)
    want = R.validate_client_batch(raw)
    ts = [r.timestamp for r in rs]
    assert (want.min_timestamp, want.max_timestamp, want.offset_delta_of_max) == (
        min(ts), max(ts), ts.index(max(ts)))
    framed = b"\xff" * 3 + raw
    assert R.validate_client_batch(memoryview(framed)[3:]) == want
    assert R.validate_client_batch(bytearray(raw)) == want
    assert R.validate_client_batch(memoryview(bytearray(framed)), 3) == want


@given(rs=record_lists(max_size=6), codec=st.sampled_from(CODECS), data=st.data())
def test_mangled_headers_and_arbitrary_bytes_raise_only_storage_errors(
        rs: list[Record], codec: int, data: st.DataObject) -> None:
    """Any header field rewritten (CRC fixed up or not), or pure noise: named errors only."""
    buf = bytearray(build(rs, compression=codec))
    choice = data.draw(st.sampled_from(["field", "noise"]))
    if choice == "field":
        offset, fmt = data.draw(st.sampled_from(
            [(8, ">i"), (16, ">b"), (21, ">h"), (23, ">i"), (57, ">i"), (27, ">q"), (35, ">q")]))
        bits = struct.calcsize(fmt) * 8
        struct.pack_into(fmt, buf, offset, data.draw(st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)))
        if data.draw(st.booleans()) and len(buf) >= 61:
            struct.pack_into(">I", buf, 17, R.compute_crc(buf, 0, len(buf)))
    else:
        buf = bytearray(data.draw(st.binary(max_size=200)))
    for fn in (R.decode_batch, R.scan_timestamps, R.validate_client_batch, R.record_timestamps,
               R.parse_header, lambda b: list(R.iter_batches(b))):
        try:
            fn(buf)
        except (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError):
            pass
    try:
        h = R.parse_header(buf, require_body=False)
    except CorruptRecordError:
        return
    assert R.crc_ok(buf, 0, h) in (True, False)


def _decode_outcome(buf: bytes | bytearray, count: int, fast: bool, lat: int | None) -> object:
    try:
        return [(r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in R._decode_records(buf, 61, len(buf), count, 1_000, 5_000, lat, fast)]
    except CorruptRecordError:
        return CorruptRecordError


@given(batch=run_heavy_batches(), data=st.data())
def test_column_decode_agrees_with_record_decode(
        batch: tuple[list[RawFields], list[bytes]], data: st.DataObject) -> None:
    """decode_batch's run path builds the same Records as the per-record path, damaged or not."""
    fields, encoded = batch
    buf = _raw_batch(encoded, 5_000)
    count = len(encoded)
    if len(encoded) > 0 and data.draw(st.booleans()):
        i = data.draw(st.integers(61, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    elif data.draw(st.booleans()):
        count = data.draw(st.integers(0, len(encoded) + 2))
    lat = data.draw(st.sampled_from([None, 77]))
    fast = _decode_outcome(buf, count, True, lat)
    assert fast == _decode_outcome(buf, count, False, lat)
    if count == len(encoded) and bytes(buf) == bytes(_raw_batch(encoded, 5_000)):
        want = [(1_000 + od, 5_000 + td if lat is None else lat, k, v,
                 [(hk.decode(), hv) for hk, hv in hs]) for td, od, k, v, hs in fields]
        assert fast == want


@pytest.mark.parametrize("od_width", [1, 2, 3, 4])
@given(data=st.data())
def test_column_decode_reads_offset_deltas_with_gaps(od_width: int, data: st.DataObject) -> None:
    """Compacted batches keep their offsets, so deltas have gaps: decoded from the lanes."""
    lo = 0 if od_width == 1 else 1 << (7 * (od_width - 1) - 1)
    hi = (1 << (7 * od_width - 1)) - 1
    n = data.draw(st.integers(R._MIN_RUN, min(2 * R._MIN_RUN, hi - lo + 1)))
    ods = sorted(data.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n, unique=True)))
    encoded = [_raw_record(0, od, b"key", b"value", [(b"h", b"v")], {}) for od in ods]
    buf = _raw_batch(encoded, 5_000, last_delta=ods[-1])
    got = R.decode_batch(buf)
    assert [r.offset for r in got] == ods
    assert _decode_outcome(buf, n, True, None) == _decode_outcome(buf, n, False, None)
    if ods != list(range(n)):
        with pytest.raises(InvalidRecordError):
            R.validate_client_batch(buf)  # gaps are not allowed from a client


@pytest.mark.parametrize("n", [R._MIN_RUN, 3 * R._MIN_RUN + 1])
def test_column_decode_keeps_every_record_when_the_last_field_is_empty(n: int) -> None:
    """An empty last header value sits at the record's end, where the next record starts."""
    encoded = [_raw_record(0, i, None, b"", [(b"", b"")], {}) for i in range(n)]
    buf = _raw_batch(encoded, 0)
    got = R.decode_batch(buf)
    assert [(r.offset, r.value, r.headers) for r in got] == [(i, b"", [("", b"")]) for i in range(n)]
    assert _decode_outcome(buf, n, True, None) == _decode_outcome(buf, n, False, None)


def test_iter_batches_refuses_a_negative_position() -> None:
    """struct would read from the end of the buffer; a caller bug must not look like data."""
    buf = build([Record(0, 1, None, b"x", [])])
    with pytest.raises(ValueError):
        list(R.iter_batches(buf, -len(buf)))
