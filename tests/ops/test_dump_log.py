"""dump-log: prints what is on disk and --verify-index catches index corruption.

Logs are written by the real storage layer (``storage.log.Log``) with small
segments and a small index interval, so every file kind and several index
entries per segment exist; records come from hypothesis or a seeded generator
and are the oracle for what the dump must show.
"""

from __future__ import annotations

import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.cli import main as cli_main
from client.cli.dump_log import scan_log, segments_in, verify_indexes
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

NOW = 1_700_000_000_000
CONFIG = {"segment.bytes": "6000", "index.interval.bytes": "300"}


def write_log(directory: Path, batches: list[list[tuple[int, bytes | None, bytes]]]) -> list[Record]:
    """Append each batch (timestamp offset, key, value) through Log; return the oracle records."""
    log = Log(directory, LogConfig.from_kafka(CONFIG))
    expected: list[Record] = []
    offset = 0
    for batch in batches:
        recs = [Record(0, NOW + dt, k, v, [("h", str(dt).encode())]) for dt, k, v in batch]
        log.append(build_batch(recs), now_ms=NOW)
        for r in recs:
            expected.append(Record(offset, r.timestamp, r.key, r.value, r.headers))
            offset += 1
    log.close()
    return expected


def random_batches(seed: int, n: int) -> list[list[tuple[int, bytes | None, bytes]]]:
    rnd = random.Random(seed)
    return [
        [(rnd.randint(-60_000, 60_000), f"k{rnd.randint(0, 9)}".encode() if rnd.random() < 0.9
          else None, b"v" * rnd.randint(0, 120)) for _ in range(rnd.randint(1, 6))]
        for _ in range(n)
    ]


@pytest.fixture
def healthy_log(tmp_path: Path) -> tuple[Path, list[Record]]:
    d = tmp_path / "events-0"
    return d, write_log(d, random_batches(7, 250))


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli_main(args)
    return code, capsys.readouterr().out


def test_verify_index_passes_on_a_healthy_multi_segment_log(
    healthy_log: tuple[Path, list[Record]], capsys: pytest.CaptureFixture[str]
) -> None:
    d, _ = healthy_log
    segs = segments_in(d)
    assert len(segs) >= 3, "the fixture must span several segments"
    code, out = run_cli(["dump-log", "--verify-index", str(d)], capsys)
    assert code == 0, out
    assert "PROBLEM" not in out
    assert out.strip().endswith("verify-index: ok")
    index_lines = [ln for ln in out.splitlines() if ln.startswith("offset: ")]
    time_lines = [ln for ln in out.splitlines() if ln.startswith("timestamp: ")]
    assert index_lines and time_lines


@settings(max_examples=12)
@given(st.lists(
    st.lists(st.tuples(st.integers(-5_000, 5_000), st.one_of(st.none(), st.binary(max_size=8)),
                       st.binary(max_size=200)), min_size=1, max_size=8),
    min_size=1, max_size=80))
def test_every_log_written_by_storage_verifies_clean(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[tuple[int, bytes | None, bytes]]]
) -> None:
    d = tmp_path_factory.mktemp("log") / "t-0"
    write_log(d, batches)
    segs = segments_in(d)
    for i, seg in enumerate(segs):
        scan = scan_log(seg.log)
        found = scan.findings() + verify_indexes(seg, scan, sealed=i < len(segs) - 1)
        assert [f.line() for f in found if f.problem] == []


def test_print_records_shows_every_record_as_written(
    healthy_log: tuple[Path, list[Record]], capsys: pytest.CaptureFixture[str]
) -> None:
    d, expected = healthy_log
    logs = [str(s.log) for s in segments_in(d)]
    code, out = run_cli(["dump-log", "--print-records", *logs], capsys)
    assert code == 0
    pat = re.compile(r"^\| offset: (\d+) CreateTime: (\d+) keySize: (-?\d+) valueSize: (\d+) "
                     r"headers: \[h=(-?\d+)\] key: (\S+) payload: (\S*)$")
    seen = []
    for ln in out.splitlines():
        if ln.startswith("| "):
            m = pat.match(ln)
            assert m, ln
            seen.append(m.groups())
    want = [(str(r.offset), str(r.timestamp), str(-1 if r.key is None else len(r.key)),
             str(len(r.value or b"")), str(r.timestamp - NOW),
             "null" if r.key is None else r.key.decode(), (r.value or b"").decode())
            for r in expected]
    assert seen == want
    batch_lines = [ln for ln in out.splitlines() if ln.startswith("baseOffset: ")]
    assert all("crcValid: true" in ln for ln in batch_lines)


def _rewrite(path: Path, fmt: str, entry: int, fn: object) -> None:
    data = bytearray(path.read_bytes())
    size = struct.calcsize(fmt)
    fields = struct.unpack_from(fmt, data, entry * size)
    struct.pack_into(fmt, data, entry * size, *fn(*fields))  # type: ignore[operator]
    path.write_bytes(bytes(data))


def verify_index_fails(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``dump-log --verify-index path`` must exit 1; returns what it printed."""
    code, out = run_cli(["dump-log", "--verify-index", str(path)], capsys)
    assert code == 1
    return out


def test_verify_index_reports_an_offset_index_entry_pointing_inside_a_batch(
    healthy_log: tuple[Path, list[Record]], capsys: pytest.CaptureFixture[str]
) -> None:
    d, _ = healthy_log
    seg = segments_in(d)[1]
    _rewrite(seg.index, ">ii", 0, lambda rel, pos: (rel, pos + 5))
    out = verify_index_fails(d, capsys)
    problems = [ln for ln in out.splitlines() if ln.startswith("PROBLEM")]
    assert len(problems) == 1
    assert str(seg.index) in problems[0] and "no batch starts at that position" in problems[0]


@pytest.mark.parametrize(("index", "fmt", "entry", "change", "verified", "problem"), [
    pytest.param("index", ">ii", 1, lambda rel, pos: (rel - 1, pos), "index",
                 "but the batch there ends at log offset", id="offset-entry-with-the-wrong-offset"),
    pytest.param("timeindex", ">qi", 0, lambda ts, rel: (ts - 1, rel), "log",
                 "has max timestamp", id="time-entry-not-the-batch-max"),
])
def test_verify_index_reports_a_wrong_entry_given_any_file_of_the_segment(
    healthy_log: tuple[Path, list[Record]], capsys: pytest.CaptureFixture[str],
    index: str, fmt: str, entry: int, change: object, verified: str, problem: str,
) -> None:
    """One entry of the first segment's offset or time index changed; --verify-index on
    the index itself or on the segment's .log names that index file and the problem."""
    seg = segments_in(healthy_log[0])[0]
    _rewrite(getattr(seg, index), fmt, entry, change)
    out = verify_index_fails(getattr(seg, verified), capsys)
    assert f"PROBLEM {getattr(seg, index)}" in out and problem in out


def test_verify_index_reports_a_truncated_index_file_as_failing_kafkas_sanity_check(
    healthy_log: tuple[Path, list[Record]], capsys: pytest.CaptureFixture[str]
) -> None:
    d, _ = healthy_log
    seg = segments_in(d)[0]
    seg.timeindex.write_bytes(seg.timeindex.read_bytes()[:-5])
    out = verify_index_fails(d, capsys)
    assert "is not a multiple of 12" in out


def test_dump_log_exit_code_through_the_installed_command(
    healthy_log: tuple[Path, list[Record]]
) -> None:
    d, _ = healthy_log
    seg = segments_in(d)[0]
    cmd = [str(Path(sys.executable).with_name("chronolog")), "dump-log", "--verify-index", str(d)]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    _rewrite(seg.index, ">ii", 0, lambda rel, pos: (rel, pos + 1))
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert "verify-index: 1 mismatch(es)" in bad.stdout


def test_a_preallocated_all_zero_index_pair_is_empty_not_corrupt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The active segment of a running (or crashed) broker: 10 MiB of zeros in each index."""
    d = tmp_path / "live-0"
    write_log(d, random_batches(3, 4))  # small: no index entry yet
    seg = segments_in(d)[-1]
    seg.index.write_bytes(bytes(8 * 1000))
    seg.timeindex.write_bytes(bytes(12 * 1000))
    code, out = run_cli(["dump-log", "--verify-index", str(d)], capsys)
    assert code == 0, out
    assert "(1000 zero-filled preallocated entries not shown)" in out
