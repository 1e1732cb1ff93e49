"""validate_client_batch on a slice of a request frame (a memoryview, as the broker's
Produce path hands it) answers exactly as on the same bytes.

An uncompressed memoryview payload is copied to bytes once before the record walk,
or, when large, read in place from the frame it is a slice of
(storage.records._records_data), paths the bytes input never takes: these
properties pin it to the bytes path (same BatchScan, or the same error class and
message) over random batch shapes, record sizes, timestamps, codecs, frame
offsets and corruptions, and pin both to a brute-force oracle (every record
decoded) when the batch is accepted.
"""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from storage import records as R
from storage.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from storage.records import Record

T0 = 1_700_000_000_000


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, int]:
    """A client batch (any codec) biased to long runs of same-layout records, as
    producers send them; returns (batch, codec)."""
    n = draw(st.one_of(st.integers(1, 8), st.integers(30, 120), st.integers(200, 700)))
    regime = draw(st.sampled_from(["librdkafka", "same_ms", "spread", "wide", "backwards"]))
    vsize = draw(st.sampled_from([0, 1, 60, 100, 150, 300]))
    key = draw(st.one_of(st.none(), st.binary(max_size=10)))
    header_sets: list[list[tuple[str, bytes | None]]] = [
        [], [("h", b"v")], [("trace", None), ("k", b"12345")]]
    headers = draw(st.sampled_from(header_sets))
    odd = draw(st.sampled_from([0.0, 0.0, 0.05, 0.3]))
    rng_seed = draw(st.integers(0, 2**32 - 1))
    import random

    rng = random.Random(rng_seed)
    filler = rng.randbytes(vsize)
    rs = []
    base = draw(st.integers(0, 1 << 45))
    for i in range(n):
        if regime == "librdkafka":
            ts = base + i  # one timestamp per produce() call, increasing
        elif regime == "same_ms":
            ts = base
        elif regime == "spread":
            ts = base + rng.randrange(0, 100_000)
        elif regime == "wide":
            ts = base + rng.choice([-1, 1]) * rng.randrange(0, 1 << 40)
        else:
            ts = base - i
        value: bytes | None = filler
        k, hs = key, headers
        if odd and rng.random() < odd:
            which = rng.randrange(3)
            if which == 0:
                value = rng.randbytes(rng.randrange(0, 400))
            elif which == 1:
                value = None
            else:
                hs = [*headers, ("x", b"y")]
        rs.append(Record(0, max(ts, 0), k, value, hs))
    codec = draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4]))
    ttype = draw(st.sampled_from([R.CREATE_TIME, R.CREATE_TIME, R.LOG_APPEND_TIME]))
    idem = draw(st.booleans())
    pid, seq = (7, 0) if idem else (-1, -1)
    batch = R.build_batch(rs, compression=codec, timestamp_type=ttype, producer_id=pid,
                          producer_epoch=0 if idem else -1, base_sequence=seq)
    return batch, codec


def _recrc(buf: bytearray) -> None:
    struct.pack_into(">I", buf, R.CRC_OFFSET, R.compute_crc(buf, 0, len(buf)))


@st.composite
def damaged(draw: st.DrawFn, batch: bytes) -> bytes:
    """The batch as sent, or with one kind of damage (CRC fixed up or not)."""
    buf = bytearray(batch)
    mode = draw(st.sampled_from(
        ["none", "none", "byte", "byte_recrc", "count", "last_delta", "trailing", "short",
         "base_offset", "max_ts"]))
    if mode in ("byte", "byte_recrc") and len(buf) > R.HEADER_SIZE:
        i = draw(st.integers(R.ATTRIBUTES_OFFSET, len(buf) - 1))
        buf[i] = draw(st.integers(0, 255))
        if mode == "byte_recrc":
            _recrc(buf)
    elif mode == "count":
        struct.pack_into(">i", buf, R.RECORDS_COUNT_OFFSET, draw(st.integers(-1, 1000)))
        _recrc(buf)
    elif mode == "last_delta":
        struct.pack_into(">i", buf, R.LAST_OFFSET_DELTA_OFFSET, draw(st.integers(-1, 1000)))
        _recrc(buf)
    elif mode == "trailing":
        buf += draw(st.binary(min_size=1, max_size=70))
    elif mode == "short":
        del buf[draw(st.integers(0, len(buf) - 1)):]
    elif mode == "base_offset":
        struct.pack_into(">q", buf, 0, draw(st.integers(1, 1 << 40)))
    elif mode == "max_ts":
        struct.pack_into(">q", buf, R.MAX_TIMESTAMP_OFFSET, draw(st.integers(-1, 1 << 50)))
        _recrc(buf)
    return bytes(buf)


def _outcome(buf: R.Buffer) -> object:
    try:
        return R.validate_client_batch(buf)
    except (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError) as exc:
        return (type(exc), str(exc))


@given(shape=batches(), data=st.data())
def test_validate_a_frame_slice_exactly_as_bytes(shape: tuple[bytes, int], data: st.DataObject) -> None:
    batch, _codec = shape
    payload = data.draw(damaged(batch))
    before = data.draw(st.binary(max_size=9))
    after = data.draw(st.binary(max_size=9))
    frame = before + payload + after
    view = memoryview(frame)[len(before):len(before) + len(payload)]
    want = _outcome(payload)
    limit = R._NO_COPY_BYTES
    try:
        for R._NO_COPY_BYTES in (limit, 0):  # copied, then read in place from the frame
            assert _outcome(view) == want
            assert _outcome(memoryview(bytearray(frame))[len(before):len(before) + len(payload)]) == want
    finally:
        R._NO_COPY_BYTES = limit
    if isinstance(want, R.BatchScan):
        # The oracle: every record decoded one by one.
        ts = [r.timestamp for r in R.decode_batch(payload)]
        assert (want.min_timestamp, want.max_timestamp) == (min(ts), max(ts))
        if not want.header.attributes & R.TIMESTAMP_TYPE_MASK:
            assert want.offset_delta_of_max == ts.index(max(ts))


@given(shape=batches(), pad=st.binary(max_size=9))
def test_scan_and_decode_a_frame_slice_exactly_as_bytes(shape: tuple[bytes, int], pad: bytes) -> None:
    batch, _codec = shape
    frame = pad + batch + pad
    view = memoryview(frame)[len(pad):len(pad) + len(batch)]
    assert R.scan_timestamps(view) == R.scan_timestamps(batch)
    assert R.decode_batch(view) == R.decode_batch(batch)
