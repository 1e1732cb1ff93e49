"""Console tests: one real broker, one ``chronolog console`` subprocess and one headless
Chromium per session (a browser start costs seconds; the tests share it)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from consolehelp import start_console, stop_console  # noqa: E402

from tests.helpers.broker import BrokerProcess, free_port_number  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("console-broker") / "data"
    data.mkdir()
    # No initial rebalance delay: a test's consumer group is Stable as soon as it joins;
    # retention runs often, so a test can see the log start move.
    b = BrokerProcess(data, free_port_number(), {"group.initial.rebalance.delay.ms": "0",
                                                 "log.retention.check.interval.ms": "200"})
    b.start()
    try:
        yield b
    finally:
        b.stop()


DOC = Path(__file__).resolve().parents[2] / "docs" / "console.md"


def doc_blocks(lang: str) -> list[str]:
    """The fenced ``lang`` code blocks of docs/console.md, in order."""
    parts = DOC.read_text().split("```" + lang + "\n")[1:]
    return [p.split("```", 1)[0] for p in parts]


@pytest.fixture(scope="session")
def console_url(console_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``chronolog console`` started as docs/console.md says, with its properties file
    (pointed at the test broker) and its command line (on a free port)."""
    d = tmp_path_factory.mktemp("console")
    props = d / "client.properties"
    text = doc_blocks("properties")[0]
    assert "bootstrap.servers=127.0.0.1:9092" in text
    props.write_text(text.replace("127.0.0.1:9092", console_broker.bootstrap))
    command = next(line for line in doc_blocks("sh")[0].splitlines()
                   if line.startswith("chronolog console"))
    args = shlex.split(command)[2:]
    port = free_port_number()
    args[args.index("--port") + 1] = str(port)
    args[args.index("--client-config") + 1] = str(props)
    proc, url = start_console(args, d / "console.log")
    try:
        yield url
    finally:
        stop_console(proc)


@pytest.fixture(scope="session")
def writable_console(console_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second console on the same broker, started with ``--allow-writes``."""
    d = tmp_path_factory.mktemp("rw-console")
    proc, url = start_console(["--bootstrap-server", console_broker.bootstrap, "--allow-writes",
                               "--port", str(free_port_number())], d / "console.log")
    try:
        yield url
    finally:
        stop_console(proc)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Debian's headless Chromium through chromedriver (``make check-chromium`` installs both)."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.fail("chromium and chromium-driver are missing: run `make check-chromium`")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="chronolog-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", f"--user-data-dir={profile}", "--window-size=1280,860"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        subprocess.run(["rm", "-rf", profile], check=False)
