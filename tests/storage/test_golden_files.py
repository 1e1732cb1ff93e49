"""The exact bytes of ``.log``, ``.index`` and ``.timeindex`` for fixed appends.

Expected files are computed here with ``struct`` from Kafka's documented rules
(kafka-facts §1-§3: baseOffset/leader-epoch rewrite outside the CRC, KAFKA-806
per-batch indexing every index.interval.bytes with the running max and the last
offset of the first batch reaching it, roll when size > segment.bytes - incoming
or an index is full, final time entry and trimming on roll and close,
preallocation to segment.index.bytes rounded down to the entry size) — never by
calling the storage code under test.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

NOW = 1_700_000_100_000
T = 1_700_000_000_000

# (record timestamps, value size) per append: out-of-order and equal maxima on purpose.
APPENDS = [
    ([T + 10, T + 5, T + 12], 30),
    ([T + 3], 80),
    ([T + 11, T + 12], 10),
    ([T + 20, T + 1, T + 2, T + 19], 25),
    ([T + 20], 60),
    ([T + 15, T + 16], 5),
    ([T + 25], 90),
    ([T + 24, T + 26, T + 26], 15),
    ([T + 2], 40),
    ([T + 30], 70),
    ([T + 29, T + 31], 20),
    ([T + 31], 33),
]


@dataclass
class SegModel:
    base: int
    log: bytearray = field(default_factory=bytearray)
    index: list[tuple[int, int]] = field(default_factory=list)  # (relative offset, position)
    times: list[tuple[int, int]] = field(default_factory=list)  # (timestamp, relative offset)
    max_ts: int = -1
    shallow: int = 0
    since: int = 0

    def seal(self) -> None:
        if self.max_ts >= 0 and (not self.times or self.max_ts > self.times[-1][0]):
            self.times.append((self.max_ts, self.shallow - self.base))

    def index_bytes(self) -> bytes:
        return b"".join(struct.pack(">ii", r, p) for r, p in self.index)

    def time_bytes(self) -> bytes:
        return b"".join(struct.pack(">qi", t, r) for t, r in self.times)


def expected_segments(raw_batches: list[bytes], cfg: LogConfig, epoch: int,
                      log_append_time: int | None = None) -> list[SegModel]:
    max_index_entries = cfg.segment_index_bytes // 8
    max_time_entries = cfg.segment_index_bytes // 12
    segs = [SegModel(0)]
    offset = 0
    for raw in raw_batches:
        b = bytearray(raw)
        count = struct.unpack_from(">i", b, 23)[0] + 1
        struct.pack_into(">q", b, 0, offset)        # baseOffset
        struct.pack_into(">i", b, 12, epoch)        # partitionLeaderEpoch
        if log_append_time is not None:
            attrs = struct.unpack_from(">h", b, 21)[0] | 0x08
            struct.pack_into(">h", b, 21, attrs)
            struct.pack_into(">q", b, 35, log_append_time)
            struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
        max_ts = struct.unpack_from(">q", b, 35)[0]
        last = offset + count - 1
        seg = segs[-1]
        size = len(b)
        full = (len(seg.index) >= max_index_entries or len(seg.times) >= max_time_entries - 1)
        if len(seg.log) > 0 and (len(seg.log) > cfg.segment_bytes - size or full):
            seg.seal()
            seg = SegModel(offset)
            segs.append(seg)
        if max_ts > seg.max_ts:
            seg.max_ts, seg.shallow = max_ts, last
        if seg.since > cfg.index_interval_bytes:
            seg.index.append((last - seg.base, len(seg.log)))
            if not seg.times or seg.max_ts > seg.times[-1][0]:
                seg.times.append((seg.max_ts, seg.shallow - seg.base))
            seg.since = 0
        seg.since += size
        seg.log += b
        offset = last + 1
    return segs


def build_raw() -> list[bytes]:
    return [
        build_batch([Record(0, ts, b"key", bytes([65 + i]) * vs, []) for ts in tss])
        for i, (tss, vs) in enumerate(APPENDS)
    ]


def names(d: Path, base: int) -> tuple[Path, Path, Path]:
    stem = d / f"{base:020d}"
    return Path(f"{stem}.log"), Path(f"{stem}.index"), Path(f"{stem}.timeindex")


def run_golden(tmp_path: Path, cfg: LogConfig, log_append_time: int | None) -> None:
    raws = build_raw()
    want = expected_segments(raws, cfg, epoch=7, log_append_time=log_append_time)
    assert len(want) >= 3, "the fixture must exercise rolling"
    log = Log(tmp_path / "golden-0", cfg)
    for raw in raws:
        log.append(raw, now_ms=NOW if log_append_time is None else log_append_time,
                   leader_epoch=7)
    d = tmp_path / "golden-0"
    assert sorted(p.name for p in d.iterdir() if p.suffix == ".log") == [
        f"{s.base:020d}.log" for s in want
    ]
    # Sealed segments: final time entry written and files trimmed at roll time.
    for s in want[:-1]:
        s.seal()
        lp, ip, tp = names(d, s.base)
        assert lp.read_bytes() == bytes(s.log)
        assert ip.read_bytes() == s.index_bytes()
        assert tp.read_bytes() == s.time_bytes()
    # The active segment: preallocated, zero padded, no final entry yet.
    active = want[-1]
    lp, ip, tp = names(d, active.base)
    assert lp.read_bytes() == bytes(active.log)
    ib = ip.read_bytes()
    tb = tp.read_bytes()
    assert len(ib) == cfg.segment_index_bytes // 8 * 8
    assert len(tb) == cfg.segment_index_bytes // 12 * 12
    assert ib == active.index_bytes().ljust(len(ib), b"\0")
    assert tb == active.time_bytes().ljust(len(tb), b"\0")
    log.close()
    active.seal()
    assert ip.read_bytes() == active.index_bytes()
    assert tp.read_bytes() == active.time_bytes()
    assert lp.read_bytes() == bytes(active.log)


def test_create_time_appends_produce_kafkas_exact_bytes(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=150, segment_index_bytes=100)
    run_golden(tmp_path, cfg, None)


def test_full_index_rolls_and_interval_zero_indexes_every_later_batch(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=0, segment_index_bytes=40)
    run_golden(tmp_path, cfg, None)


def test_log_append_time_rewrites_only_max_timestamp_bit_and_crc(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=120,
                    message_timestamp_type="LogAppendTime")
    run_golden(tmp_path, cfg, NOW)
