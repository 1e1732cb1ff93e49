"""Progress bars of long `chronolog produce` / `chronolog consume` runs, seen on a real
terminal (a pseudo-terminal as stderr), and their absence on a pipe or with --no-progress.

The bar is tqdm on stderr, shown only on a terminal and only after 2 s, drawn when
something goes through. Each run here trickles lines in (or produces records while
following) until the bar has been drawn, so the bar must appear, name the command and
topic, and count what went through. How long that takes is left to the machine: the
CLI's start alone took ~2 s on a loaded 2-core box, which is what broke a fixed 3 s
run (everything went through before the bar's 2 s were up, so it never showed).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from client_oracle import unique_topic

from client import ProducerRecord, SyncClient

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
LINES = 30  # at least this many lines / records per run
GAP = 0.1  # seconds between two of them
PATIENCE = 60.0  # seconds a run may take on a loaded machine before the test gives up


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal pair sized 24x100, as a real terminal window is (tqdm draws
    nothing on a terminal that reports 0 columns)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    return master, slave


def _read_all(fd: int, sink: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return
        if not chunk:
            return
        sink += chunk


def _bar(err: bytes | bytearray, command: str, topic: str, unit: str) -> list[float]:
    """The counts the bar named "<command> <topic>" has drawn so far, in order."""
    text = bytes(err).decode("utf-8", "replace")
    return [float(m) for m in re.findall(f"{command} {re.escape(topic)}: ([0-9.]+){unit}", text)]


def _produce_slowly(broker: Any, topic: str, stderr: str, *extra: str) -> tuple[int, str, int]:
    """Run `chronolog produce` with lines written one every GAP s; stderr is a
    pseudo-terminal ("tty") or a pipe ("pipe"). Returns (exit code, stderr text, lines).

    Input stops once at least LINES lines went in and either the bar has been drawn (on
    a terminal, without --no-progress), or else 3 s have passed since the first record
    reached the broker: the bar exists before the first line is read, so on a terminal
    it would have shown by then."""
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic, partitions=1)
    expect_bar = stderr == "tty" and "--no-progress" not in extra
    master = slave = -1
    if stderr == "tty":
        master, slave = _terminal()
    proc = subprocess.Popen(
        [CHRONOLOG, "produce", topic, "--bootstrap-server", broker.bootstrap, *extra],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=slave if stderr == "tty" else subprocess.PIPE,
    )
    seen = bytearray()
    reader = None
    if stderr == "tty":
        os.close(slave)
        reader = threading.Thread(target=_read_all, args=(master, seen), daemon=True)
        reader.start()
    assert proc.stdin is not None
    lines = 0
    first_stored: float | None = None
    deadline = time.monotonic() + PATIENCE
    try:
        with SyncClient(broker.bootstrap) as c:
            while True:
                proc.stdin.write(b"line %d\n" % lines)
                proc.stdin.flush()
                lines += 1
                time.sleep(GAP)
                if first_stored is None and c.latest(topic)[0] > 0:
                    first_stored = time.monotonic()
                if lines >= LINES and (
                    _bar(seen, "produce", topic, "B") if expect_bar
                    else first_stored is not None and time.monotonic() - first_stored > 3.0
                ):
                    break
                assert time.monotonic() < deadline, (lines, bytes(seen))
        proc.stdin.close()
        code = proc.wait(60)
        if reader is not None:
            reader.join(10)
        else:
            assert proc.stderr is not None
            seen += proc.stderr.read()
    finally:
        proc.kill()
        if master >= 0:
            os.close(master)
    return code, seen.decode("utf-8", "replace"), lines


def test_produce_shows_a_progress_bar_on_a_terminal_counting_the_bytes_read(broker: Any) -> None:
    topic = unique_topic("bar")
    code, err, lines = _produce_slowly(broker, topic, "tty")
    assert code == 0, err
    assert f"produce {topic}" in err
    # tqdm's counter of the bytes read so far: the last drawn value is > 0 and at most
    # what was written (the bar is drawn every 0.5 s, so it may lag the final line).
    total = sum(len(b"line %d\n" % i) for i in range(lines))
    drawn = _bar(err.encode(), "produce", topic, "B")
    assert drawn and 0 < drawn[-1] <= total, err
    with SyncClient(broker.bootstrap) as c:
        assert c.latest(topic)[0] == lines


@pytest.mark.parametrize(("stderr", "extra"), [("pipe", ()), ("tty", ("--no-progress",))])
def test_no_progress_bar_on_a_pipe_or_with_no_progress(broker: Any, stderr: str,
                                                       extra: tuple[str, ...]) -> None:
    topic = unique_topic("nobar")
    code, err, lines = _produce_slowly(broker, topic, stderr, *extra)
    assert code == 0, err
    assert f"produce {topic}" not in err and "B/s" not in err, err
    with SyncClient(broker.bootstrap) as c:
        assert c.latest(topic)[0] == lines


def test_consume_shows_a_progress_bar_counting_records_while_following(broker: Any) -> None:
    topic = unique_topic("cbar")
    base = int(time.time() * 1000) - 60_000
    until = base + 10_000  # room for a record a millisecond for as long as the bar takes
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic, partitions=1)
        master, slave = _terminal()
        proc = subprocess.Popen(
            [CHRONOLOG, "consume", topic, "--follow", "--from-time", str(base),
             "--until", str(until), "--bootstrap-server", broker.bootstrap],
            stdout=subprocess.DEVNULL, stderr=slave,
        )
        os.close(slave)
        seen = bytearray()
        reader = threading.Thread(target=_read_all, args=(master, seen), daemon=True)
        reader.start()
        produced = 0
        deadline = time.monotonic() + PATIENCE
        try:
            # Records keep arriving while following, until the bar has counted some.
            while produced < LINES or not _bar(seen, "consume", topic, "rec"):
                assert time.monotonic() < deadline and base + produced < until, bytes(seen)
                c.produce(topic, [ProducerRecord(value=b"v%d" % produced,
                                                 timestamp=base + produced)])
                produced += 1
                time.sleep(GAP)
            c.produce(topic, [ProducerRecord(value=b"end", timestamp=until)])  # ends the run
            assert proc.wait(60) == 0
            reader.join(10)
        finally:
            proc.kill()
            os.close(master)
    err = seen.decode("utf-8", "replace")
    assert f"consume {topic}" in err, err
    drawn = _bar(seen, "consume", topic, "rec")
    assert drawn and 0 < drawn[-1] <= produced, err
