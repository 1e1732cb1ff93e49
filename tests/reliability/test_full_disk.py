"""A full disk and a failing disk: writers get KAFKA_STORAGE_ERROR, nothing is torn, and
writes resume once space is back.

The full disk is real: a small tmpfs the test mounts (it runs as root here, as CI
does; elsewhere the test is skipped and says why). A broker writes to it until
appends fail, goes on being asked, is read from, has its space given back, takes
writes again and restarts; every acknowledged record is there, in order, with
contiguous offsets, and time lookups equal the oracle's over what was acknowledged.
Writing index entries through a mapping into blocks a full tmpfs cannot supply
used to kill the broker with SIGBUS; they are now allocated before the batch is
written. EIO cannot be produced on demand by a real disk, so it comes through the
segment's file layer (``storage.fsutil.FILES``).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import ProducerRecord, SyncClient
from protocol.errors import ErrorCode, KafkaError
from storage import fsutil
from storage.config import LogConfig
from storage.errors import LogStorageError
from storage.log import Log
from storage.records import Record, build_batch, decode_batch, iter_batches
from tests.helpers.broker import BrokerProcess, free_port_number

T0 = 1_700_000_000_000


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _read(c: SyncClient, topic: str, p: int) -> list[tuple[int, int, bytes]]:
    end = c.latest(topic, [p])[p]
    out: list[tuple[int, int, bytes]] = []
    offset = 0
    while offset < end:
        buf = c.fetch_raw(topic, p, offset, 4 << 20).records_bytes
        for pos, h in iter_batches(buf):
            out += [(r.offset, r.timestamp, bytes(r.value or b"")) for r in decode_batch(buf, pos)
                    if r.offset >= offset]
            offset = max(offset, h.last_offset + 1)
    return out


def _check(c: SyncClient, topic: str, acked: dict[int, list[tuple[int, int, bytes]]]) -> None:
    for p, want in acked.items():
        assert _read(c, topic, p) == want
        for t in [T0 - 1, T0 + 7, T0 + len(want) // 2, T0 + 10**6]:
            exp = next(((o, ts) for o, ts, _ in want if ts >= t), None)
            assert c.offsets_for_times(topic, t, [p])[p] == exp


def test_a_full_disk_answers_storage_error_and_loses_nothing(small_fs: Path) -> None:
    data = small_fs / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number(), {"log.segment.bytes": "262144"}).start()
    topic = "full"
    acked: dict[int, list[tuple[int, int, bytes]]] = {0: [], 1: []}

    def write(p: int, ts: int) -> bool:
        value = uuid.uuid4().bytes * 4
        try:
            (off,) = c.produce(topic, [ProducerRecord(value=value, timestamp=ts)],
                               partition=p, acks=-1)
        except KafkaError as e:
            assert e.code == ErrorCode.KAFKA_STORAGE_ERROR, e
            return False
        acked[p].append((off, ts, value))
        return True

    try:
        c = SyncClient(b.bootstrap, request_timeout=10)
        c.create_topic(topic, 2, {"index.interval.bytes": "1"})
        errors = i = 0
        while errors < 300:  # keep writing well past the first failure
            errors += not write(i % 2, T0 + i)
            i += 1
            assert i < 200_000, "the disk never filled"
        assert b.proc is not None and b.proc.poll() is None, b.log()[-2000:]
        _check(c, topic, acked)  # reads keep working on the full disk
        # Space comes back (an operator grows the volume): writes resume, no restart.
        subprocess.run(["mount", "-o", "remount,size=32m", str(small_fs)], check=True)
        for j in range(200):
            assert write(j % 2, T0 + i + j)
        _check(c, topic, acked)
        c.close()
        b.restart()  # a clean stop and start on the once-full disk
        c = SyncClient(b.bootstrap, request_timeout=10)
        _check(c, topic, acked)
        c.close()
        b.kill()
        b.start()
        c = SyncClient(b.bootstrap, request_timeout=10)
        _check(c, topic, acked)
        c.close()
    finally:
        b.stop()


class FailingDisk(fsutil.FileLayer):
    """pwritev fails with EIO after ``ok`` successful writes (or writes only part first)."""

    def __init__(self, ok: int, partial: bool) -> None:
        self.ok = ok
        self.partial = partial

    def pwritev(self, fd: int, buffers: list[memoryview], offset: int) -> int:  # type: ignore[override]
        if self.ok > 0:
            self.ok -= 1
            return os.pwritev(fd, buffers, offset)
        if self.partial and buffers and len(buffers[0]) > 10:
            os.pwrite(fd, bytes(buffers[0][:10]), offset)  # a torn write, then the error
        raise OSError(errno.EIO, os.strerror(errno.EIO))


@pytest.mark.parametrize("partial", [False, True])
def test_eio_on_append_leaves_the_log_as_it_was_and_writes_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partial: bool
) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=4096, index_interval_bytes=1))
    batches = [build_batch([Record(0, T0 + i, None, b"v%d" % i, [])]) for i in range(30)]
    for bt in batches[:10]:
        log.append(bt, now_ms=T0)
    size = log.active.size
    monkeypatch.setattr(fsutil, "FILES", FailingDisk(0, partial))
    with pytest.raises(LogStorageError):
        log.append(batches[10], now_ms=T0)
    assert log.log_end_offset == 10 and log.active.size == size
    assert os.path.getsize(log.active.log_path) == size  # no torn bytes left behind
    monkeypatch.setattr(fsutil, "FILES", fsutil.FileLayer())
    for bt in batches[10:]:
        log.append(bt, now_ms=T0)
    log.close()
    reopened = Log(tmp_path / "t-0", LogConfig(segment_bytes=4096, index_interval_bytes=1),
                   clean_shutdown=False, recovery_point=0)
    assert reopened.recovered_bytes_cut == 0
    got = [r.timestamp for seg in reopened.segments for r in _records(seg.log_path)]
    assert got == [T0 + i for i in range(30)]
    for t in range(T0 - 1, T0 + 31):
        hit = reopened.offset_for_timestamp(t)
        assert (hit.offset if hit is not None else None) == (t - T0 if T0 <= t < T0 + 30 else
                                                             0 if t < T0 else None)
    reopened.close()


def _records(path: Path) -> list[Record]:
    buf = path.read_bytes()
    return [r for pos, _ in iter_batches(buf) for r in decode_batch(buf, pos)]


_INDEX_PAGE_ON_A_FULL_DISK = """
import os, sys
from storage.config import LogConfig
from storage.errors import LogStorageError
from storage.log import Log
from storage.records import Record, build_batch
d = sys.argv[1]
log = Log(d + "/t-0", LogConfig(index_interval_bytes=1))
for i in range(513):  # an index entry per batch but the first: entry 512 starts page 2
    log.append(build_batch([Record(0, 1700000000000 + i, None, b"v", [])]), now_ms=1700000002000)
fd = os.open(d + "/filler", os.O_WRONLY | os.O_CREAT)  # take every block left
try:
    while True:
        os.write(fd, b"f" * 4096)
except OSError:
    pass
try:
    log.append(build_batch([Record(0, 1700000001000, None, b"w", [])]), now_ms=1700000002000)
    print("appended")
except LogStorageError as e:
    print("refused", e)
"""


def test_an_index_page_on_a_full_disk_is_an_error_not_a_crash(small_fs: Path) -> None:
    """Writing an index entry through the mapping into a page the full tmpfs cannot back
    killed the process with SIGBUS; the page is now allocated ahead (or the append fails)."""
    r = subprocess.run([sys.executable, "-c", _INDEX_PAGE_ON_A_FULL_DISK, str(small_fs)],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.startswith(("appended", "refused"))
