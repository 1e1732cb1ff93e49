"""The console in a real headless Chromium, against a real broker, checked against oracles.

One topic with out-of-order CreateTime, JSON, text and binary values is produced
once; the pages are loaded and clicked as a person would. With
``CHRONOLOG_SCREENSHOTS=1`` the same tests write the screenshots in docs/console/.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from console_oracle import (
    BASE,
    Produced,
    bucket_counts,
    bucket_of,
    first_offset,
    merged,
    unique_topic,
)
from consolehelp import start_console, stop_console
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from client import ProducerRecord, SyncClient
from client.timeparse import format_time
from tests.helpers.broker import free_port_number

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
N = 60  # records per partition, one a minute, every 7th shifted 7 minutes back
PARTS = 3


def stamp(i: int) -> int:
    return BASE + i * 60_000 + (i % 5) * 1000 - (420_000 if i % 7 == 6 else 0)


def value(p: int, i: int) -> bytes:
    if i % 3 == 0:
        return bytes([0, 1, 2, 255, p, i])
    if i % 3 == 1:
        return json.dumps({"order": i, "partition": p, "items": ["tea", "cake"]}).encode()
    return f"plain text {p}/{i}".encode()


@pytest.fixture(scope="module")
def topic(console_broker) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    name, other = unique_topic("orders"), unique_topic("audit")
    with SyncClient(console_broker.bootstrap, client_id="console-tests") as c:
        c.create_topic(name, PARTS)
        c.create_topic(other, 1)
        for p in range(PARTS):
            recs = [ProducerRecord(key=f"customer-{i % 4}", value=value(p, i), timestamp=stamp(i),
                                   headers=[("source", "test"), ("trace", bytes([i]))])
                    for i in range(N)]
            c.produce(name, recs[: N // 2], partition=p)
            c.produce(name, recs[N // 2 :], partition=p)
        c.produce(other, [ProducerRecord(value=b"x", timestamp=BASE)], partition=0)
    stamps = {p: [stamp(i) for i in range(N)] for p in range(PARTS)}
    return {"name": name, "other": other, "stamps": stamps, "bootstrap": console_broker.bootstrap}


def shot(driver: Any, name: str, tmp_path: Path) -> None:
    """Save a screenshot: into docs/console/ when asked to refresh the docs, else tmp."""
    target = DOCS if os.environ.get("CHRONOLOG_SCREENSHOTS") == "1" else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(target / f"{name}.png"))


def iso(ms: int) -> str:
    return format_time(ms)


def rows(driver: Any) -> list[tuple[int, int]]:
    return [(int(r.get_attribute("data-partition")), int(r.get_attribute("data-offset")))
            for r in driver.find_elements(By.CSS_SELECTOR, "#records tr.record")]


def wait(driver: Any, cond: Any, timeout: float = 15) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(cond)


def test_overview_lists_the_topics_and_filters_by_name(browser, console_url, topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    browser.get(console_url + "/")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-topic="{topic["name"]}"]')
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1] == str(PARTS)
    assert cells[2] == f"{PARTS * N:,}"
    assert cells[4] == iso(min(s[0] for s in topic["stamps"].values()))  # first record time
    assert cells[5] == iso(max(max(s) for s in topic["stamps"].values()))  # max timestamp
    assert cells[6] == "7 days"  # retention.ms default, in words; the number on hover
    retention = row.find_element(By.CSS_SELECTOR, "td.retention-ms")
    assert retention.get_attribute("data-ms") == "604800000"
    assert retention.get_attribute("title") == "retention.ms=604800000"
    box = browser.find_element(By.ID, "topic-filter")
    box.send_keys(topic["name"][:6])
    other = browser.find_element(By.CSS_SELECTOR, f'tr[data-topic="{topic["other"]}"]')
    assert not other.is_displayed() and row.is_displayed()
    shot(browser, "overview", tmp_path)
    # Everything the page loads comes from the console itself: it works offline.
    sources = browser.execute_script(
        "return [...document.querySelectorAll('script[src], link[href]')]"
        ".map(e => e.getAttribute('src') || e.getAttribute('href'))")
    assert sources and all(s.startswith(("/static/", "data:")) for s in sources), sources


def _bars(driver: Any) -> tuple[list[int], list[int]]:
    data = driver.execute_script("return [chronolog.timeline.bounds, chronolog.chart.data[1]]")
    return [int(b) for b in data[0]], [int(v) for v in data[1]]


def test_timeline_bars_equal_a_reader_of_each_bucket(browser, console_url, topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The positional meaning (by=offset); test_console_event_time.py checks the default.
    q = f"from={iso(BASE - 600_000)}&to={iso(BASE + N * 60_000)}&by=offset"
    browser.get(f"{console_url}/topics/{topic['name']}?{q}")
    bounds, bars = _bars(browser)
    assert 100 <= len(bars) <= 301
    assert bars == bucket_counts(topic["stamps"], bounds)
    assert sum(bars) == PARTS * N
    step = browser.find_element(By.ID, "step")
    assert (step.text, step.get_attribute("data-ms")) == ("15 seconds", str(bounds[1] - bounds[0]))
    # Hovering a bar tells its count per partition (the tallest: late records pile up there).
    i = bars.index(max(bars))
    c = browser.execute_script(f"return chronolog.barCenter({i})")
    over = browser.find_element(By.CSS_SELECTOR, "#chart .u-over")
    ActionChains(browser).move_to_element_with_offset(
        over, int(c["x"] - c["width"] / 2), 0).perform()
    detail = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.bucket-detail[data-bucket="{i}"]'))
    per = [first_offset(topic["stamps"][p], bounds[i + 1]) - first_offset(topic["stamps"][p], bounds[i])
           for p in range(PARTS)]
    assert min(per) > 0
    assert detail.text.endswith(f": {sum(per)} records (" + ", ".join(f"p{p}: {n}" for p, n in enumerate(per)) + ")")
    shot(browser, "timeline-by-position", tmp_path)
    browser.find_element(By.CSS_SELECTOR, "#bucket-details summary").click()
    # The table is built by the "toggle" event, which the browser fires as a later task.
    rows = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#bucket-table tbody tr"))
    counts = [int(r.find_elements(By.TAG_NAME, "td")[2].text.replace(",", "")) for r in rows]
    assert counts == [c for c in bars if c]
    browser.get(f"{console_url}/topics/{topic['name']}?partition=1&{q}")
    bounds, bars = _bars(browser)
    assert bars == bucket_counts({1: topic["stamps"][1]}, bounds)


def _click_bar(driver: Any, i: int) -> None:
    c = driver.execute_script(f"return chronolog.barCenter({i})")
    over = driver.find_element(By.CSS_SELECTOR, "#chart .u-over")
    ActionChains(driver).move_to_element_with_offset(
        over, int(c["x"] - c["width"] / 2), int(c["y"] - c["height"] / 2)).click().perform()
    wait(driver, lambda d: "/records" in d.current_url)


def test_clicking_a_bar_opens_the_browser_at_the_buckets_first_offset(browser, console_url, topic) -> None:  # type: ignore[no-untyped-def]
    q = f"from={iso(BASE - 600_000)}&to={iso(BASE + N * 60_000)}&by=offset"
    stamps = topic["stamps"]
    # The bucket holding record 13's out-of-order time: its first offset is not 13.
    browser.get(f"{console_url}/topics/{topic['name']}?partition=1&{q}")
    bounds, _ = _bars(browser)
    i = bucket_of(bounds, stamps[1][13])
    expect = first_offset(stamps[1], bounds[i])
    assert expect != 13
    _click_bar(browser, i)
    assert rows(browser)[0] == (1, expect)
    assert browser.find_element(By.ID, "at").text == iso(bounds[i])
    # All partitions: the browser starts each partition at its first offset for the bucket.
    browser.get(f"{console_url}/topics/{topic['name']}?{q}")
    bounds, _ = _bars(browser)
    i = bucket_of(bounds, stamps[0][27])
    _click_bar(browser, i)
    cursor = browser.find_element(By.ID, "cursor").text
    assert cursor == ",".join(f"{p}:{first_offset(stamps[p], bounds[i])}" for p in range(PARTS))


def test_paging_json_hex_and_headers(browser, console_url, topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{console_url}/topics/{topic['name']}/records?partition=0&offset=0&limit=6")
    assert rows(browser) == [(0, o) for o in range(6)]
    browser.find_element(By.ID, "next").click()
    wait(browser, lambda d: rows(d)[:1] == [(0, 6)])
    assert rows(browser) == [(0, o) for o in range(6, 12)]
    assert "cursor=0%3A6" in browser.current_url  # the URL holds the position
    browser.find_element(By.ID, "prev").click()
    wait(browser, lambda d: rows(d)[:1] == [(0, 0)])
    # The whole record is one click on its row away.
    browser.find_element(By.CSS_SELECTOR, '#records tr.record[data-offset="1"]').click()
    tr = browser.find_element(By.CSS_SELECTOR, '#records tr.detail[data-offset="1"]')
    shown = tr.find_element(By.CSS_SELECTOR, "pre.value")
    assert shown.get_attribute("data-kind") == "json"
    assert shown.text == json.dumps(json.loads(value(0, 1)), indent=2)
    browser.find_element(By.CSS_SELECTOR, '#records tr.record[data-offset="0"]').click()
    tr = browser.find_element(By.CSS_SELECTOR, '#records tr.detail[data-offset="0"]')
    hexed = tr.find_element(By.CSS_SELECTOR, "pre.value")
    assert hexed.get_attribute("data-kind") == "hex"
    assert hexed.text.startswith("00000000  00 01 02 ff 00 00")
    assert "CreateTime" in tr.find_element(By.CSS_SELECTOR, ".ts-type").text
    link = urllib.parse.urlsplit(browser.find_element(By.ID, "on-timeline").get_attribute("href"))
    q = urllib.parse.parse_qs(link.query)
    assert (q["from"], q["to"], q["partition"]) == ([iso(stamp(0) - 1_800_000)], [iso(stamp(0) + 1_800_000)], ["0"])
    headers = tr.find_elements(By.CSS_SELECTOR, ".header")
    assert [h.text.split(":")[0] for h in headers] == ["source", "trace"]
    shot(browser, "records", tmp_path)


def test_seeking_by_typed_and_picked_time_in_the_merged_view(browser, console_url, topic) -> None:  # type: ignore[no-untyped-def]
    stamps = topic["stamps"]
    at = BASE + 30 * 60_000 + 500
    browser.get(f"{console_url}/topics/{topic['name']}/records?limit=10")
    box = browser.find_element(By.ID, "time")
    box.clear()
    box.send_keys(iso(at))
    browser.find_element(By.ID, "go").click()
    wait(browser, lambda d: "time=" in d.current_url)
    cursor = {p: first_offset(stamps[p], at) for p in range(PARTS)}
    assert browser.find_element(By.ID, "cursor").text == ",".join(f"{p}:{o}" for p, o in cursor.items())
    produced = {p: [Produced(p, o, t, None, None) for o, t in enumerate(stamps[p])] for p in range(PARTS)}
    assert rows(browser) == [(r.partition, r.offset) for r in merged(produced, cursor)[:10]]
    # Relative times resolve against now: three days ago is before every record, a day
    # ago after every one.
    browser.get(f"{console_url}/topics/{topic['name']}/records?partition=2&time=-3d")
    assert browser.find_element(By.ID, "cursor").text == "2:0"
    browser.get(f"{console_url}/topics/{topic['name']}/records?partition=2&time=-1d")
    assert browser.find_element(By.ID, "cursor").text == f"2:{N}"
    assert browser.find_element(By.ID, "empty").is_displayed()
    # The date-time picker fills the text field with the same instant in UTC.
    browser.execute_script(
        "const p = document.getElementById('time-picker'); p.value = '2026-01-02T03:04:05';"
        "p.dispatchEvent(new Event('change'));")
    assert browser.find_element(By.ID, "time").get_attribute("value") == "2026-01-02T03:04:05Z"


def test_live_tail_shows_a_record_produced_after_the_page_loaded(browser, console_url, topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    name = unique_topic("live")  # its own topic: the others' oracles stay as produced
    with SyncClient(topic["bootstrap"], client_id="console-tests") as c:
        c.create_topic(name, PARTS)
        c.produce(name, [ProducerRecord(value="before the page loaded")], partition=2)
    browser.get(f"{console_url}/topics/{name}/tail")
    wait(browser, lambda d: d.find_element(By.ID, "tail-status").text == "live")
    marker = f"tail-{uuid.uuid4()}"
    with SyncClient(topic["bootstrap"], client_id="console-tests") as c:
        off = c.produce(name, [ProducerRecord(key="k", value=json.dumps({"m": marker}))],
                        partition=2)[0]
    assert off == 1
    row = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'#tail tr[data-offset="{off}"]'))
    assert marker in row[0].text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tail tr.record")) == 1  # only what came after
    # A burst larger than one poll's 200 records: the tail says what it skipped and shows
    # the newest 200.
    with SyncClient(topic["bootstrap"], client_id="console-tests") as c:
        c.produce(name, [ProducerRecord(value=f"burst {i}") for i in range(450)], partition=1)
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#tail tr[data-partition="1"][data-offset="449"]'))
    burst = browser.find_elements(By.CSS_SELECTOR, '#tail tr.record[data-partition="1"]')
    assert sorted(int(r.get_attribute("data-offset")) for r in burst) == list(range(250, 450))
    assert "skipped 250 records" in browser.find_element(By.CSS_SELECTOR, "#tail td.note").text
    shot(browser, "tail", tmp_path)
    # Another tab in front hides this one: the tail closes its stream until it is back.
    # A record produced meanwhile arrives when it is shown again (it resumes, not restarts).
    # The hidden tab reports its log through localStorage (shared by the console's origin),
    # so the record is produced only once the tail has really paused, however slow the
    # machine: fixed sleeps here raced the visibilitychange event under load.
    first = browser.current_window_handle
    browser.execute_script(
        "localStorage.removeItem('tail-log');"
        "document.addEventListener('visibilitychange', () =>"
        " localStorage.setItem('tail-log', JSON.stringify(chronolog.tailLog)));")
    browser.switch_to.new_window("tab")
    browser.get(console_url + "/static/console.css")  # same origin as the tail
    wait(browser, lambda d: (d.execute_script("return localStorage.getItem('tail-log')") or "")
         .endswith('"paused (tab hidden)"]'))
    with SyncClient(topic["bootstrap"], client_id="console-tests") as c:
        hidden_off = c.produce(name, [ProducerRecord(value="while hidden")], partition=0)[0]
    browser.close()
    browser.switch_to.window(first)
    wait(browser, lambda d: d.execute_script("return chronolog.tailLog.slice(-1)[0]") == "live")
    log = browser.execute_script("return chronolog.tailLog")
    assert log[-2:] == ["paused (tab hidden)", "live"], log
    row = wait(browser, lambda d: d.find_elements(
        By.CSS_SELECTOR, f'#tail tr[data-partition="0"][data-offset="{hidden_off}"]'))
    assert "while hidden" in row[0].text


def test_an_empty_range_says_so(browser, console_url, topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{console_url}/topics/{topic['name']}?from={iso(BASE - 9 * 86_400_000)}&to={iso(BASE - 8 * 86_400_000)}")
    assert browser.find_element(By.ID, "empty").text == "No records in this range."
    assert set(_bars(browser)[1]) == {0}
    shot(browser, "timeline-empty", tmp_path)
    later = BASE + 2 * N * 60_000
    browser.get(f"{console_url}/topics/{topic['name']}/records?partition=0&time={iso(later)}")
    assert browser.find_element(By.ID, "empty").text == f"No records at or after {iso(later)}."


def test_an_unknown_topic_is_a_404_naming_kafkas_error(console_url) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{console_url}/topics/no-such-topic-{uuid.uuid4()}")
    assert e.value.code == 404
    assert b"UNKNOWN_TOPIC_OR_PARTITION" in e.value.read()
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{console_url}/api/topics/no-such-topic-{uuid.uuid4()}/timeline")
    assert e.value.code == 404
    assert json.loads(e.value.read())["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_dragging_across_the_chart_zooms_into_that_range(browser, console_url, topic) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{console_url}/topics/{topic['name']}?from={iso(BASE)}&to={iso(BASE + N * 60_000)}&by=offset")
    bounds, _ = _bars(browser)
    a, b = _bar_offset(browser, 40), _bar_offset(browser, 80)
    over = browser.find_element(By.CSS_SELECTOR, "#chart .u-over")
    (ActionChains(browser).move_to_element_with_offset(over, a, 0).click_and_hold()
     .move_to_element_with_offset(over, (a + b) // 2, 0).move_to_element_with_offset(over, b, 0)
     .release().perform())
    wait(browser, lambda d: "from=" in d.current_url and iso(BASE) not in d.current_url)
    zoomed, bars = _bars(browser)
    assert bounds[40] <= zoomed[0] + (zoomed[1] - zoomed[0]) and zoomed[-1] <= bounds[81] + zoomed[1] - zoomed[0]
    assert zoomed[1] - zoomed[0] < bounds[1] - bounds[0]  # finer buckets
    assert bars == bucket_counts(topic["stamps"], zoomed)


def _bar_offset(driver: Any, i: int) -> int:
    c = driver.execute_script(f"return chronolog.barCenter({i})")
    return int(c["x"] - c["width"] / 2)


def test_bad_input_is_a_400_that_says_what_was_wrong(console_url, topic) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{console_url}/topics/{topic['name']}/records?time=yesterday")
    assert e.value.code == 400
    assert b"cannot parse time" in e.value.read()


def test_the_readme_command_serves_the_console(console_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(ln for ln in readme.splitlines() if ln.startswith("chronolog console "))
    args = shlex.split(line.split("#")[0])[2:]
    port = free_port_number()
    args[args.index("--bootstrap-server") + 1] = console_broker.bootstrap
    args[args.index("--port") + 1] = str(port)
    proc, url = start_console(args, tmp_path / "readme-console.log")
    try:
        with urllib.request.urlopen(url + "/", timeout=5) as r:
            assert b"Overview" in r.read()
    finally:
        stop_console(proc)


def test_range_buttons_choose_the_last_day_and_the_datas_extent(browser, console_url, topic) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{console_url}/topics/{topic['name']}?from={iso(BASE)}&to={iso(BASE + 60_000)}&by=offset")
    browser.find_element(By.CSS_SELECTOR, 'button[name="range"][value="1d"]').click()
    wait(browser, lambda d: "range=1d" in d.current_url)
    bounds, bars = _bars(browser)
    now = time.time_ns() // 1_000_000
    assert bounds[0] <= now - 86_400_000 < bounds[1] and bounds[-2] < now <= bounds[-1] + 60_000
    assert sum(bars) == 0  # the test's records are two days old
    browser.find_element(By.CSS_SELECTOR, 'button[name="range"][value="all"]').click()
    wait(browser, lambda d: "range=all" in d.current_url)
    bounds, bars = _bars(browser)
    stamps = topic["stamps"]
    assert bounds[0] <= min(s[0] for s in stamps.values()) and bounds[-1] > max(max(s) for s in stamps.values())
    assert bars == bucket_counts(stamps, bounds) and sum(bars) == PARTS * N


def test_a_loopback_console_refuses_requests_for_other_host_names(console_url) -> None:  # type: ignore[no-untyped-def]
    """DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 must not
    be able to read the console through a visitor's browser."""
    port = urllib.parse.urlsplit(console_url).port
    for host, ok in ((f"localhost:{port}", True), (f"127.0.0.1:{port}", True),
                     (f"evil.example:{port}", False), ("evil.example", False)):
        req = urllib.request.Request(console_url + "/", headers={"Host": host})
        try:
            with urllib.request.urlopen(req) as r:
                assert ok, host
                assert r.status == 200
        except urllib.error.HTTPError as e:
            assert not ok and e.code == 403, (host, e.code)


def test_a_bar_counts_what_chronolog_consume_prints_for_its_window(browser, console_url, topic) -> None:  # type: ignore[no-untyped-def]
    """The positional chart and the CLI agree: the tallest bar's window read with `chronolog consume`."""
    browser.get(f"{console_url}/topics/{topic['name']}?from={iso(BASE)}&to={iso(BASE + N * 60_000)}&by=offset")
    bounds, bars = _bars(browser)
    i = bars.index(max(bars))
    out = subprocess.run(
        [sys.executable, "-m", "client.cli", "consume", topic["name"], "--from-time", iso(bounds[i]),
         "--until", iso(bounds[i + 1]), "--format", "json", "--no-progress",
         "--bootstrap-server", topic["bootstrap"]],
        capture_output=True, text=True, timeout=60, check=True).stdout
    printed = [json.loads(line) for line in out.splitlines()]
    assert len(printed) == bars[i] > 0


@pytest.mark.parametrize(("days", "words"), [(600, "2 days"), (200, "1 day"), (10, "1 hour"),
                                             (3, "15 minutes")])
def test_bucket_sizes_read_in_words_not_milliseconds(browser, console_url, topic, days, words) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{console_url}/topics/{topic['name']}?from={iso(BASE - days * 86_400_000)}&to={iso(BASE)}")
    bounds, _ = _bars(browser)
    step = browser.find_element(By.ID, "step")
    assert step.text == words
    assert int(step.get_attribute("data-ms")) == bounds[1] - bounds[0]
    summary = browser.find_element(By.CSS_SELECTOR, "p.summary").text
    assert f"buckets of {words}," in summary and f"{bounds[1] - bounds[0]} ms" not in summary
