"""Progress bars of long `chronolog produce` / `chronolog consume` runs, seen on a real
terminal (a pseudo-terminal as stderr), and their absence on a pipe or with --no-progress.

The bar is tqdm on stderr, shown only on a terminal and only after 2 s; each run here
lasts about 3 s (lines trickle in, or records arrive while following), so the bar
must appear, name the command and topic, and count what went through.
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
LINES = 30
SECONDS = 3.0


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


def _produce_slowly(broker: Any, topic: str, stderr: str, *extra: str) -> tuple[int, str]:
    """Run `chronolog produce` with LINES lines written over SECONDS; stderr is a
    pseudo-terminal ("tty") or a pipe ("pipe"). Returns (exit code, stderr text)."""
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic, partitions=1)
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
    try:
        for i in range(LINES):
            proc.stdin.write(b"line %d\n" % i)
            proc.stdin.flush()
            time.sleep(SECONDS / LINES)
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
    return code, seen.decode("utf-8", "replace")


def test_produce_shows_a_progress_bar_on_a_terminal_counting_the_bytes_read(broker: Any) -> None:
    topic = unique_topic("bar")
    code, err = _produce_slowly(broker, topic, "tty")
    assert code == 0, err
    assert f"produce {topic}" in err
    # tqdm's counter of the bytes read so far: the last drawn value is > 0 and at most
    # what was written (the bar is drawn every 0.5 s, so it may lag the final line).
    total = sum(len(b"line %d\n" % i) for i in range(LINES))
    drawn = [float(m) for m in re.findall(r"produce " + re.escape(topic) + r": ([0-9.]+)B", err)]
    assert drawn and 0 < drawn[-1] <= total, err
    with SyncClient(broker.bootstrap) as c:
        assert c.latest(topic)[0] == LINES


@pytest.mark.parametrize(("stderr", "extra"), [("pipe", ()), ("tty", ("--no-progress",))])
def test_no_progress_bar_on_a_pipe_or_with_no_progress(broker: Any, stderr: str,
                                                       extra: tuple[str, ...]) -> None:
    topic = unique_topic("nobar")
    code, err = _produce_slowly(broker, topic, stderr, *extra)
    assert code == 0, err
    assert f"produce {topic}" not in err and "B/s" not in err, err
    with SyncClient(broker.bootstrap) as c:
        assert c.latest(topic)[0] == LINES


def test_consume_shows_a_progress_bar_counting_records_while_following(broker: Any) -> None:
    topic = unique_topic("cbar")
    base = int(time.time() * 1000) - 60_000
    until = base + LINES
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
        try:
            for i in range(LINES + 1):  # the last one, at --until, ends the run
                c.produce(topic, [ProducerRecord(value=b"v%d" % i, timestamp=base + i)])
                time.sleep(SECONDS / LINES)
            assert proc.wait(60) == 0
            reader.join(10)
        finally:
            proc.kill()
            os.close(master)
    err = seen.decode("utf-8", "replace")
    assert f"consume {topic}" in err, err
    drawn = [float(m) for m in re.findall(r"consume " + re.escape(topic) + r": ([0-9.]+)rec", err)]
    assert drawn and 0 < drawn[-1] <= LINES, err
