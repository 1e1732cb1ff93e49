"""A topic's size on the overview and deleting its records before a time, in headless
Chromium against a real broker.

Oracles: the sizes of the partitions' ``.log`` files in the broker's data directory,
and for a delete the scan's first offset with a timestamp at or after the time
(the partition's end if there is none), read back with the client as each partition's
log start (ListOffsets EARLIEST).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from console_oracle import BASE, first_offset, unique_topic
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from client import ProducerRecord, SyncClient
from client.aio import EARLIEST, TopicPartition
from client.timeparse import format_time

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"


def log_bytes(data_dir: Path, topic: str) -> int:
    """The topic's bytes on disk: every partition directory's ``.log`` files."""
    dirs = [d for d in data_dir.iterdir() if d.is_dir() and d.name.rpartition("-")[0] == topic]
    assert dirs, f"no partition directory of {topic} in {data_dir}"
    return sum(f.stat().st_size for d in dirs for f in d.glob("*.log"))


def test_overview_bytes_are_the_partitions_log_files_on_disk(  # type: ignore[no-untyped-def]
        browser, console_url, console_broker) -> None:
    name = unique_topic("sized")
    with SyncClient(console_broker.bootstrap, client_id="console-tests") as c:
        c.create_topic(name, 3)
        for p in range(3):
            c.produce(name, [ProducerRecord(value=b"v" * (100 * p + i), timestamp=BASE + i)
                             for i in range(20 + 7 * p)], partition=p)
    browser.get(f"{console_url}/?q={name}")
    cell = browser.find_element(By.CSS_SELECTOR, f'tr[data-topic="{name}"] td.bytes')
    expect = log_bytes(console_broker.data_dir, name)
    assert expect > 0
    assert int(cell.get_attribute("data-bytes")) == expect
    assert cell.get_attribute("title") == f"{expect:,} bytes on disk"
    assert cell.text.endswith(("B", "KiB", "MiB"))


# Out-of-order CreateTime: every 4th record is stamped 10 minutes before its neighbours.
PARTS, N = 3, 30


def stamps(p: int) -> list[int]:
    return [BASE + (i + p) * 60_000 - (600_000 if i % 4 == 3 else 0) for i in range(N)]


def log_starts(bootstrap: str, topic: str) -> dict[int, int]:
    with SyncClient(bootstrap, client_id="console-tests") as c:
        got = c.list_offsets({TopicPartition(topic, p): EARLIEST for p in range(PARTS + 1)})
    return {tp.partition: off for tp, (off, _) in got.items()}


def test_delete_records_before_a_time_previews_then_cuts_each_partition_at_the_oracles_offset(  # type: ignore[no-untyped-def]
        browser, writable_console, console_url, console_broker) -> None:
    name = unique_topic("trimmed")
    with SyncClient(console_broker.bootstrap, client_id="console-tests") as c:
        c.create_topic(name, PARTS + 1)
        for p in range(PARTS):
            c.produce(name, [ProducerRecord(value=f"{p}/{i}".encode(), timestamp=ts)
                             for i, ts in enumerate(stamps(p))], partition=p)
        # Partition PARTS has only records older than the time: it is emptied to its end.
        c.produce(name, [ProducerRecord(value=b"old", timestamp=BASE - 3_600_000)] * 5, partition=PARTS)
    at = BASE + 17 * 60_000 + 1
    expect = {p: first_offset(stamps(p), at) for p in range(PARTS)} | {PARTS: 5}
    # Late records older than the time stay above the cut: it is an offset, not a filter.
    assert all(sum(ts < at for ts in stamps(p)) > expect[p] for p in range(PARTS))
    assert log_starts(console_broker.bootstrap, name) == dict.fromkeys(range(PARTS + 1), 0)

    # A read-only console shows no form and refuses the POST, even with a plausible body.
    browser.get(f"{console_url}/topics/{name}?before={format_time(at)}")
    assert not browser.find_elements(By.ID, "delete-preview")
    req = urllib.request.Request(f"{console_url}/topics/{name}/delete-records",
                                 data=urllib.parse.urlencode({"before": str(at)}).encode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 403
    # A writable console without the page's token refuses too.
    req = urllib.request.Request(f"{writable_console}/topics/{name}/delete-records",
                                 data=urllib.parse.urlencode({"before": str(at), "token": "x"}).encode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 403
    assert log_starts(console_broker.bootstrap, name) == dict.fromkeys(range(PARTS + 1), 0)

    browser.get(f"{writable_console}/topics/{name}")
    browser.find_element(By.ID, "delete-before").send_keys(format_time(at))
    browser.find_element(By.ID, "delete-plan").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "cut-plan"))
    plan = {int(r.get_attribute("data-partition")): int(r.get_attribute("data-new"))
            for r in browser.find_elements(By.CSS_SELECTOR, "#cut-plan tr.cut")}
    assert plan == expect
    assert log_starts(console_broker.bootstrap, name) == dict.fromkeys(range(PARTS + 1), 0)  # preview only
    if os.environ.get("CHRONOLOG_SCREENSHOTS") == "1":
        browser.execute_script("document.getElementById('delete-preview').scrollIntoView()")
        browser.save_screenshot(str(DOCS / "delete-records.png"))
    browser.find_element(By.ID, "delete-apply").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "done"))
    assert log_starts(console_broker.bootstrap, name) == expect
    assert ", ".join(f"p{p}: {o}" for p, o in sorted(expect.items())) in browser.find_element(By.ID, "done").text
