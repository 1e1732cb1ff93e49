"""The consumer-groups pages in headless Chromium, with real confluent-kafka consumers.

Checked against what the test did: the committed offsets it made, the log ends it
produced, and for a reset to a time the scan's first offset at or after that time.
Writes go through a second console started with ``--allow-writes``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from console_oracle import BASE, first_offset, unique_topic
from console_topics import produced_topic
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from client import ProducerRecord, SyncClient
from client.groups import SyncGroupAdmin
from client.timeparse import format_time

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
PARTS, N = 2, 40


def stamp(i: int) -> int:
    return BASE + i * 60_000 - (300_000 if i % 6 == 5 else 0)  # every 6th arrives 5 min late


@pytest.fixture(scope="module")
def topic(console_broker) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    name = produced_topic(console_broker.bootstrap, "payments", PARTS, lambda p: [
        ProducerRecord(value=f"{p}/{i}", timestamp=stamp(i)) for i in range(N)])
    return {"name": name, "stamps": [stamp(i) for i in range(N)], "bootstrap": console_broker.bootstrap}


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"{group}-client",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "enable.partition.eof": False})


def commit(c: Consumer, topic: str, offsets: dict[int, int]) -> None:
    c.commit(offsets=[CkTopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)


@pytest.fixture
def active_group(topic) -> Iterator[tuple[str, dict[int, int]]]:  # type: ignore[no-untyped-def]
    """A group whose one member was assigned both partitions and committed 7 and 31."""
    group = unique_topic("billing")
    c = consumer(topic["bootstrap"], group)
    c.subscribe([topic["name"]])
    deadline = time.monotonic() + 30
    while not c.assignment():
        c.poll(0.2)
        assert time.monotonic() < deadline, "the consumer was never assigned partitions"
    offsets = {0: 7, 1: 31}
    commit(c, topic["name"], offsets)
    try:
        yield group, offsets
    finally:
        c.close()


def lag_rows(driver: Any) -> dict[int, tuple[str, str, str]]:
    return {int(r.get_attribute("data-partition")): (r.get_attribute("data-committed"),
                                                     r.get_attribute("data-log-end"),
                                                     r.get_attribute("data-lag"))
            for r in driver.find_elements(By.CSS_SELECTOR, "#lags tr.lag")}


def test_a_stable_group_shows_its_member_committed_offsets_and_lag(  # type: ignore[no-untyped-def]
        browser, console_url, topic, active_group, tmp_path) -> None:
    group, offsets = active_group
    browser.get(console_url + "/groups")
    row = browser.find_element(By.CSS_SELECTOR, f'#groups tr[data-group="{group}"]')
    assert row.find_element(By.CSS_SELECTOR, ".state").text == "Stable"
    if os.environ.get("CHRONOLOG_SCREENSHOTS") == "1":
        browser.save_screenshot(str(DOCS / "groups.png"))
    row.find_element(By.TAG_NAME, "a").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "state"))
    assert browser.find_element(By.ID, "state").text == "Stable"
    assert [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#members .client-id")] == [f"{group}-client"]
    assignment = browser.find_element(By.CSS_SELECTOR, "#members .assignment").text
    assert assignment == f"{topic['name']}: 0, 1"
    assert lag_rows(browser) == {p: (str(o), str(N), str(N - o)) for p, o in offsets.items()}
    # The lag in time: the first uncommitted record's timestamp is shown.
    text = browser.find_element(By.CSS_SELECTOR, '#lags tr.lag[data-partition="0"]').text
    assert format_time(stamp(7)) in text
    # Unread records by time: the oracle's reader-of-each-bucket counts from the committed
    # offsets on, adding up to the lag.
    charts = json.loads(browser.find_element(By.ID, "backlog-data").get_attribute("textContent"))
    assert [c["topic"] for c in charts] == [topic["name"]]
    bounds = charts[0]["bounds"]
    bars = [int(v) for v in browser.execute_script("return chronolog.charts['backlog-0'].data[1]")]

    def unread(t: int, p: int) -> int:
        return max(first_offset(topic["stamps"], t), offsets[p])

    assert bars == [sum(unread(bounds[i + 1], p) - unread(bounds[i], p) for p in offsets)
                    for i in range(len(bounds) - 1)]
    assert sum(bars) == sum(N - o for o in offsets.values())
    if os.environ.get("CHRONOLOG_SCREENSHOTS") == "1":
        browser.save_screenshot(str(DOCS / "group.png"))
    # Read-only: no reset form, and a forged POST is refused.
    assert not browser.find_elements(By.ID, "reset-preview")
    req = urllib.request.Request(f"{console_url}/groups/{group}/reset",
                                 data=urllib.parse.urlencode({"time": "0"}).encode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 403


def test_reset_to_a_time_previews_then_commits_the_first_offsets_at_that_time(  # type: ignore[no-untyped-def]
        browser, writable_console, topic) -> None:
    group = unique_topic("replay")
    c = consumer(topic["bootstrap"], group)
    commit(c, topic["name"], {0: 3, 1: 4})  # commits only (assign, no membership): Empty
    c.close()
    at = BASE + 17 * 60_000 + 1
    browser.get(f"{writable_console}/groups/{group}")
    box = browser.find_element(By.ID, "reset-time")
    box.send_keys(format_time(at))
    browser.find_element(By.ID, "preview").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "plan"))
    expect = {p: first_offset(topic["stamps"], at) for p in range(PARTS)}
    assert expect[0] != 17  # record 17 arrived 5 minutes late: a reader at that time starts after it
    plan = {int(r.get_attribute("data-partition")): int(r.get_attribute("data-new"))
            for r in browser.find_elements(By.CSS_SELECTOR, "#plan tr.plan")}
    assert plan == expect
    if os.environ.get("CHRONOLOG_SCREENSHOTS") == "1":
        browser.execute_script("document.getElementById('reset-preview').scrollIntoView()")
        browser.save_screenshot(str(DOCS / "group-reset.png"))
    browser.find_element(By.ID, "execute").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "done"))
    assert lag_rows(browser) == {p: (str(o), str(N), str(N - o)) for p, o in expect.items()}
    with SyncClient(topic["bootstrap"], client_id="console-tests") as sc:
        got = SyncGroupAdmin(sc).committed_offsets(group)
    assert {tp.partition: o for tp, o in got.items()} == expect


def test_resetting_a_group_with_members_is_refused_with_kafkas_message(  # type: ignore[no-untyped-def]
        browser, writable_console, topic, active_group) -> None:
    group, offsets = active_group
    browser.get(f"{writable_console}/groups/{group}?time={format_time(BASE)}")
    browser.find_element(By.ID, "execute").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "error-message"))
    assert "can only be reset if the group" in browser.find_element(By.ID, "error-message").text
    with SyncClient(topic["bootstrap"], client_id="console-tests") as sc:
        got = SyncGroupAdmin(sc).committed_offsets(group)
    assert {tp.partition: o for tp, o in got.items()} == offsets  # nothing was written


def test_the_group_api_answers_what_the_group_committed_as_json(  # type: ignore[no-untyped-def]
        console_url, topic, active_group) -> None:
    group, offsets = active_group

    def get(path: str) -> Any:
        with urllib.request.urlopen(console_url + path) as r:
            assert r.headers["Content-Type"].startswith("application/json")
            return json.load(r)

    listed = {g["group_id"]: g for g in get("/api/groups")["groups"]}
    assert listed[group]["state"] == "Stable"
    assert listed[group]["protocol_type"] == "consumer"
    before = time.time_ns() // 1_000_000
    desc = get(f"/api/groups/{urllib.parse.quote(group, safe='')}")
    assert desc["group_id"] == group and desc["state"] == "Stable"
    assert [m["client_id"] for m in desc["members"]] == [f"{group}-client"]
    member = desc["members"][0]
    assert member["assignment"] == {topic["name"]: [0, 1]}
    # The oracle: the offsets the test committed, the N records it produced per
    # partition, and the timestamp it gave the record at each committed offset.
    rows = {p["partition"]: p for p in desc["partitions"]}
    assert {p: (r["committed"], r["log_end"], r["lag"], r["member_id"], r["first_unread_timestamp"])
            for p, r in rows.items()} == {
        p: (o, N, N - o, member["member_id"], topic["stamps"][o]) for p, o in offsets.items()}
    assert before <= desc["now_ms"] <= time.time_ns() // 1_000_000
    # A group nobody knows is described as Kafka's Dead group, not an error.
    assert get("/api/groups/no-such-group-" + unique_topic("x"))["state"] == "Dead"
