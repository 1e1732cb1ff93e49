"""The record walk's shortcut for runs whose timestamps never decrease (what producers
usually send): min, max and the first max read off the first and last lanes.

Runs are drawn non-decreasing in every varint width, with ties, then optionally
broken by one decrease anywhere (the shortcut must notice and fall back); the
column walk must agree with the per-record walk and with a brute-force oracle.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage import records as R


def _uvarint(u: int) -> bytes:
    out = bytearray()
    while True:
        out.append(u & 0x7F)
        u >>= 7
        if not u:
            return bytes(out)
        out[-1] |= 0x80


def _zz(n: int) -> int:
    return ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF


def _record(td: int, od: int, value: bytes) -> bytes:
    body = (b"\x00" + _uvarint(_zz(td)) + _uvarint(_zz(od)) + _uvarint(_zz(-1))
            + _uvarint(_zz(len(value))) + value + b"\x00")
    return _uvarint(_zz(len(body))) + body


def _batch(tds: list[int], value: bytes) -> bytearray:
    payload = b"".join(_record(td, i, value) for i, td in enumerate(tds))
    n = len(tds)
    buf = bytearray(61 + len(payload))
    struct.pack_into(">qiibIhiqqqhii", buf, 0, 0, len(buf) - 12, -1, 2, 0, 0, n - 1, 0, 0,
                     -1, -1, -1, n)
    buf[61:] = payload
    struct.pack_into(">I", buf, 17, R.compute_crc(buf, 0, len(buf)))
    return buf


def _width_range(width: int) -> tuple[int, int]:
    """Magnitudes whose zig-zag varint takes exactly ``width`` bytes (either sign)."""
    lo = 0 if width == 1 else 1 << (7 * (width - 1) - 1)
    hi = (1 << min(7 * width - 1, 63)) - 1
    return lo, hi


@pytest.mark.parametrize("width", range(1, 9))
@given(data=st.data())
def test_non_decreasing_runs_and_one_decrease_agree_with_the_record_walk(
        width: int, data: st.DataObject) -> None:
    n = data.draw(st.integers(R._MIN_RUN, 4 * R._MIN_RUN))
    lo, hi = _width_range(width)
    sign = data.draw(st.sampled_from([1, -1, 0]))  # all positive, all negative, mixed
    mags = data.draw(st.lists(st.integers(lo, hi - 1), min_size=n, max_size=n))
    # -m-1 has the same varint width as m (zig-zag 2m+1 against 2m).
    tds = sorted(m if sign > 0 or (sign == 0 and data.draw(st.booleans())) else -m - 1
                 for m in mags)
    for _ in range(data.draw(st.integers(0, 3))):  # ties: many records in one millisecond
        i = data.draw(st.integers(0, n - 2))
        tds[i + 1] = tds[i]
    mode = data.draw(st.sampled_from(["sorted", "sorted", "swap", "last_low", "first_high"]))
    if mode == "swap":  # one decrease anywhere (a no-op on a tie)
        i = data.draw(st.integers(0, n - 2))
        tds[i], tds[i + 1] = tds[i + 1], tds[i]
    elif mode == "last_low":
        tds[-1] = tds[0]
    elif mode == "first_high":
        tds[0] = tds[-1]
    value = data.draw(st.sampled_from([b"", b"v" * 20, bytes(100)]))
    buf = _batch(tds, value)
    want = (min(tds), max(tds), tds.index(max(tds)))
    fast = R._scan(buf, 61, len(buf), len(tds), True, True)
    assert fast == want
    assert R._scan(buf, 61, len(buf), len(tds), True, False) == want
    scan = R.validate_client_batch(memoryview(bytes(buf)))
    assert (scan.min_timestamp, scan.max_timestamp, scan.offset_delta_of_max) == want


def test_a_long_in_order_batch_takes_the_shortcut_exactly() -> None:
    """librdkafka's shape: one timestamp per produce() call, increasing, ties included."""
    tds = [i // 3 for i in range(9_000)]
    tds[5_000] = tds[4_999]  # a tie across what would be a block boundary
    buf = _batch(tds, bytes(100))
    want = (0, tds[-1], tds.index(tds[-1]))
    assert R._scan(buf, 61, len(buf), len(tds), True, True) == want
    assert R._scan(buf, 61, len(buf), len(tds), True, False) == want
