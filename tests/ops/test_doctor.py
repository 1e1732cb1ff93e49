"""doctor: a clean data dir passes; torn tails, bad CRCs, bad indexes and bad checkpoints are found.

The data directory is written by the real storage layer (``storage.logdir.LogDir``,
which also writes the checkpoints and the clean-shutdown marker), then damaged
the way crashes and disks damage it.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from client.cli import main as cli_main
from client.cli.dump_log import segments_in
from storage.config import LogConfig
from storage.logdir import LogDir
from storage.records import Record, build_batch

NOW = 1_700_000_000_000


def make_data_dir(root: Path) -> Path:
    config = LogConfig.from_kafka({"segment.bytes": "5000", "index.interval.bytes": "256"})
    ld = LogDir(root, config)
    rnd = random.Random(3)
    for topic, parts in (("orders", 2), ("clicks", 1)):
        for p in range(parts):
            log = ld.get_or_create(topic, p, config)
            for _ in range(120):
                recs = [Record(0, NOW + rnd.randint(-9000, 9000), b"k", b"x" * rnd.randint(1, 90))
                        for _ in range(rnd.randint(1, 4))]
                log.append(build_batch(recs), now_ms=NOW)
    ld.checkpoint()
    ld.close()
    return root


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return make_data_dir(tmp_path / "data")


def doctor(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = cli_main(["doctor", str(path)])
    return code, capsys.readouterr().out.splitlines()


def test_a_cleanly_closed_data_dir_has_no_problems(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = doctor(data_dir, capsys)
    assert code == 0, lines
    assert not [ln for ln in lines if ln.startswith("PROBLEM")]
    assert "checked 3 partitions" in lines[-1] and "last shutdown clean" in lines[-1]


def test_doctor_finds_a_torn_tail(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    active = segments_in(data_dir / "orders-1")[-1].log
    whole = build_batch([Record(0, NOW, b"k", b"torn" * 50)])
    with open(active, "ab") as fh:
        fh.write(whole[: len(whole) // 2])  # the write a crash interrupted
    code, lines = doctor(data_dir, capsys)
    assert code == 1
    problems = [ln for ln in lines if ln.startswith("PROBLEM")]
    assert problems == [
        f"PROBLEM {active}: torn tail: {len(whole) // 2} bytes after the last complete batch "
        f"(ending at position {active.stat().st_size - len(whole) // 2}) are not a whole batch; "
        "recovery truncates them"
    ]


def test_doctor_finds_a_flipped_bit_by_its_crc(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sealed = segments_in(data_dir / "clicks-0")[0].log
    data = bytearray(sealed.read_bytes())
    data[100] ^= 0x01  # inside the first batch's records (headers are 61 bytes)
    sealed.write_bytes(bytes(data))
    code, lines = doctor(data_dir, capsys)
    assert code == 1
    problems = [ln for ln in lines if ln.startswith("PROBLEM")]
    assert len(problems) == 1
    assert problems[0].startswith(f"PROBLEM {sealed}: batch at position 0") and "CRC-32C" in problems[0]


def test_doctor_finds_an_index_that_disagrees_with_its_log(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seg = segments_in(data_dir / "orders-0")[0]
    raw = bytearray(seg.index.read_bytes())
    raw[4:8] = (int.from_bytes(raw[4:8], "big") + 3).to_bytes(4, "big")
    seg.index.write_bytes(bytes(raw))
    code, lines = doctor(data_dir, capsys)
    assert code == 1
    assert [ln for ln in lines if ln.startswith("PROBLEM")] == [
        ln for ln in lines if ln.startswith(f"PROBLEM {seg.index}: entry 0")
    ]


def test_doctor_finds_a_checkpoint_beyond_the_log_end(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = data_dir / "recovery-point-offset-checkpoint"
    lines = cp.read_text().splitlines()
    lines = lines[:2] + [" ".join(ln.split()[:2] + ["999999"]) if ln.startswith("clicks ")
                         else ln for ln in lines[2:]]
    cp.write_text("\n".join(lines) + "\n")
    code, out = doctor(data_dir, capsys)
    assert code == 1
    assert [ln for ln in out if ln.startswith("PROBLEM")] == [
        f"PROBLEM {cp}: clicks-0: offset 999999 is beyond the log end offset "
        f"{_leo(data_dir / 'clicks-0')}"
    ]


def test_doctor_reports_a_malformed_checkpoint(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = data_dir / "log-start-offset-checkpoint"
    cp.write_text("0\n5\norders 0 0\n")
    code, out = doctor(data_dir, capsys)
    assert code == 1
    assert f"PROBLEM {cp}: declares 5 entries but holds 1" in out


def test_doctor_exit_status_through_the_installed_command(data_dir: Path) -> None:
    cmd = [str(Path(sys.executable).with_name("chronolog")), "doctor", str(data_dir)]
    assert subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0
    active = segments_in(data_dir / "clicks-0")[-1].log
    with open(active, "ab") as fh:
        fh.write(b"\x00" * 30)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "torn tail" in res.stdout


def _leo(partition_dir: Path) -> int:
    from client.cli.dump_log import scan_log

    return scan_log(segments_in(partition_dir)[-1].log).next_offset


def _produce_mixed(bootstrap: str, topic: str, batches: int) -> None:
    from client import ProducerRecord, SyncClient

    rnd = random.Random(9)
    with SyncClient(bootstrap) as c:
        c.create_topic(topic, 2)
        for i in range(batches):
            recs = [ProducerRecord(key=b"k", value=b"x" * rnd.randint(1, 200),
                                   timestamp=NOW + rnd.randint(-10_000, 10_000))
                    for _ in range(rnd.randint(1, 4))]
            c.produce(topic, recs, partition=i % 2, compression=rnd.choice([None, "gzip", "zstd"]))


def test_a_real_broker_data_dir_is_clean_after_shutdown_and_after_crash_recovery(
    broker_factory: object, capsys: pytest.CaptureFixture[str]
) -> None:
    b = broker_factory(overrides={"log.segment.bytes": "5000",  # type: ignore[operator]
                                  "log.index.interval.bytes": "300"})
    _produce_mixed(b.bootstrap, "live", 150)
    b.stop()
    code, lines = doctor(b.data_dir, capsys)
    assert code == 0, lines
    assert not [ln for ln in lines if ln.startswith(("PROBLEM", "WARNING"))], lines
    # A crash, then the broker's own recovery: the directory must be clean again.
    b.start()
    _produce_mixed(b.bootstrap, "crash", 60)
    b.kill()
    b.start()
    b.stop()
    code, lines = doctor(b.data_dir, capsys)
    assert code == 0, lines


def test_doctor_says_how_to_force_recovery_when_the_dir_claims_a_clean_shutdown(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (data_dir / ".kafka_cleanshutdown").exists()
    active = segments_in(data_dir / "orders-0")[-1].log
    with open(active, "ab") as fh:
        fh.write(b"\x00" * 20)
    code, lines = doctor(data_dir, capsys)
    assert code == 1
    assert f"WARNING {data_dir / '.kafka_cleanshutdown'}: present, so the next start skips " \
        "recovery and will not repair the problems above; delete this file to force recovery" \
        in lines


def test_doctor_reports_a_corrupt_batch_header_and_what_cannot_be_read(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from client.cli.dump_log import scan_log

    seg = segments_in(data_dir / "orders-0")[0].log
    third = scan_log(seg).batches[2].position
    data = bytearray(seg.read_bytes())
    data[third + 16] = 7  # magic byte of the third batch
    seg.write_bytes(bytes(data))
    code, lines = doctor(data_dir, capsys)
    assert code == 1
    problems = [ln for ln in lines if ln.startswith(f"PROBLEM {seg}:")]
    assert problems == [
        f"PROBLEM {seg}: corrupt batch header at position {third}: batch at {third} has magic 7, "
        f"only magic 2 is supported; {len(data) - third} bytes from there cannot be read"
    ]
