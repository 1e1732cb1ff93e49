"""A console started before its broker waits for it: its pages say so, its stderr says so
(redrawn in place only on a terminal), and it serves the cluster once the broker is up.

Each test starts a real ``chronolog console`` on a port where no broker listens yet and
a real broker there later; the pages are compared with what the test produced.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from console_oracle import unique_topic
from consolehelp import start_console, stop_console
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from client import ProducerRecord, SyncClient
from tests.helpers.broker import BrokerProcess, free_port_number

PATIENCE = 60.0  # seconds the console may take to notice a broker on a loaded machine


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _until(cond: Any, what: str) -> Any:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"not within {PATIENCE} s: {what}")


def test_a_console_started_before_its_broker_says_so_and_serves_it_once_it_is_up(
        tmp_path: Path, browser: Any) -> None:
    port = free_port_number()
    bootstrap = f"127.0.0.1:{port}"
    log = tmp_path / "console.log"
    proc, url = start_console(["--bootstrap-server", bootstrap, "--port", str(free_port_number())], log)
    data = tmp_path / "data"
    data.mkdir()
    broker = BrokerProcess(data, port, {})
    try:
        waiting = f"broker at {bootstrap} not reachable yet, retrying"
        status, body = _get(url + "/")
        assert status == 503 and waiting in body.decode() and "Traceback" not in body.decode()
        status, body = _get(url + "/api/topics/anything/timeline")
        assert status == 503 and json.loads(body)["error"] == "BROKER_NOT_REACHABLE"
        # A person who opened the page meanwhile sees the message, and the page itself
        # turns into the overview once the broker answers (it reloads itself).
        browser.get(url + "/")
        assert waiting in browser.find_element(By.ID, "error-message").text
        broker.start()
        topic = unique_topic("late")
        with SyncClient(broker.bootstrap, client_id="console-tests") as c:
            c.create_topic(topic, 2)
            c.produce(topic, [ProducerRecord(value=b"x")] * 3, partition=1)
        WebDriverWait(browser, PATIENCE, poll_frequency=0.2).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-topic="{topic}"]'))
        cells = browser.find_element(By.CSS_SELECTOR, f'tr[data-topic="{topic}"]').find_elements(By.TAG_NAME, "td")
        assert (cells[1].text, cells[2].text) == ("2", "3")
        assert proc.poll() is None
        # A broker that goes away later: the pages say it is not reachable (no stack trace)
        # and come back with it.
        broker.stop()
        status, body = _until(lambda: (r := _get(url + "/"))[0] == 503 and r, "a 503 once the broker stopped")
        assert f"broker at {bootstrap} not reachable" in body.decode()
        broker.start()
        _until(lambda: _get(url + f"/topics/{topic}")[0] == 200, "the timeline once the broker is back")
    finally:
        stop_console(proc)
        broker.stop()
    out = log.read_text()
    assert f"{waiting} (cannot connect to {bootstrap}" in out
    assert f"connected to the broker at {bootstrap} after" in out
    # Not a terminal: plain lines, nothing drawn in place, and not the old crash.
    assert "\r" not in out and "\x1b" not in out
    assert "NETWORK_EXCEPTION: NETWORK_EXCEPTION" not in out and "Traceback" not in out


def test_waiting_for_the_broker_is_redrawn_in_place_only_on_a_terminal(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    bootstrap = f"127.0.0.1:{free_port_number()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "client.cli", "console", "--bootstrap-server", bootstrap,
         "--port", str(free_port_number())],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    err = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            err.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        line = f"\rbroker at {bootstrap} not reachable yet, retrying (attempt ".encode()
        _until(lambda: err.count(line) >= 3, "three redraws of the waiting line")
    finally:
        proc.terminate()
        proc.wait(30)
        reader.join(5)
        os.close(master)
    text = bytes(err)
    assert b"\x1b[K" in text  # each redraw clears the rest of the line
    assert text.count(b"\n") == 0  # one line, redrawn: no scrolling log on a terminal

