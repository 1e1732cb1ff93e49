"""The record browser in a real headless Chromium against a real broker: the compact table
is the records a client consumes, a row opens to the whole record, and the filter finds
exactly what a brute-force filter over the same records finds, page after page.

One topic is produced once: out-of-order CreateTime, null keys, multi-byte keys, short
and long JSON (the long ones hold a word past what a preview shows), multi-line text and
binary values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from console_oracle import BASE, Produced, first_offset, merged
from console_topics import produced_topic
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from client import ProducerRecord, SyncClient
from client.timeparse import format_time

PARTS = 3
N = 40  # records per partition


def stamp(p: int, i: int) -> int:
    return BASE + i * 60_000 + p * 1000 - (300_000 if i % 9 == 8 else 0)


def key(i: int) -> str | None:
    if i % 5 == 4:
        return None
    return f"Café-{i}" if i % 7 == 3 else f"customer-{i % 4}"


def value(p: int, i: int) -> bytes:
    if i % 4 == 0:
        return bytes([0, 1, 2, 255, p, i])
    if i % 4 == 1:
        return json.dumps({"order": i, "partition": p, "items": ["tea", "cake"]}).encode()
    if i % 4 == 2:  # longer than a preview, with a word only near its end
        return json.dumps({"order": i, "pad": "y" * 200, "tag": "deep-cake"}, indent=1).encode()
    return f"line one {p}/{i}\n  line two TEA".encode()


@pytest.fixture(scope="module")
def topic(console_broker) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The topic, and its records as a client consumes them (the tests' oracle)."""
    name = produced_topic(console_broker.bootstrap, "browse", PARTS, lambda p: [
        ProducerRecord(key=key(i), value=value(p, i), timestamp=stamp(p, i),
                       headers=[("n", str(i).encode())] if i % 3 else []) for i in range(N)])
    with SyncClient(console_broker.bootstrap, client_id="console-tests") as c:
        consumed = {p: [Produced(p, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                        for r in c.consume(name, p, 0, N)] for p in range(PARTS)}
    assert all(len(v) == N for v in consumed.values())
    return {"name": name, "consumed": consumed}


def wait(driver: Any, cond: Callable[[Any], Any], timeout: float = 15) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(cond)


def expected_preview(b: bytes | None) -> str:
    """What a one-line preview of a short value is: the text with its whitespace folded,
    or for bytes that are not text, the hex pairs."""
    if b is None:
        return "null"
    try:
        text = b.decode()
    except UnicodeDecodeError:
        return " ".join(f"{x:02x}" for x in b)
    if any(ch < " " and ch not in "\t\n\r" for ch in text):
        return " ".join(f"{x:02x}" for x in b)
    return " ".join(text.split())


def table(driver: Any) -> list[dict[str, Any]]:
    out = []
    for tr in driver.find_elements(By.CSS_SELECTOR, "#records tr.record"):
        tds = tr.find_elements(By.TAG_NAME, "td")
        out.append({"partition": int(tr.get_attribute("data-partition")),
                    "offset": int(tr.get_attribute("data-offset")),
                    "cells": [td.get_attribute("textContent") for td in tds],
                    "height": tr.size["height"]})
    return out


def test_the_compact_table_is_one_line_per_record_the_client_consumed(browser, console_url, topic) -> None:  # type: ignore[no-untyped-def]
    consumed = topic["consumed"]
    browser.get(f"{console_url}/topics/{topic['name']}/records?limit=500")
    shown = table(browser)
    expect = merged(consumed, dict.fromkeys(range(PARTS), 0))
    assert [(r["partition"], r["offset"]) for r in shown] == [(e.partition, e.offset) for e in expect]
    for r, e in zip(shown, expect, strict=True):
        when, part, off, k, v = r["cells"]
        assert (when, part, off) == (format_time(e.timestamp), str(e.partition), str(e.offset))
        assert k == expected_preview(e.key)
        full = expected_preview(e.value)
        if len(full) <= 120:
            assert v == full
        else:  # cut on one line, ending in an ellipsis
            assert len(v) <= 120 and v.endswith("…") and full.startswith(v[:-1].rstrip())
    # One line each: every row is as tall as the first, whatever its value holds.
    heights = {r["height"] for r in shown}
    assert max(heights) - min(heights) <= 1 and max(heights) < 40, heights
    assert not any(d.is_displayed() for d in browser.find_elements(By.CSS_SELECTOR, "#records tr.detail"))


def test_a_row_opens_to_the_whole_record_and_closes_again(browser, console_url, topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    consumed = topic["consumed"][1]
    browser.get(f"{console_url}/topics/{topic['name']}/records?partition=1&offset=0&limit=8")

    def detail(off: int) -> Any:
        return browser.find_element(By.CSS_SELECTOR, f'#records tr.detail[data-offset="{off}"]')

    def row(off: int) -> Any:
        return browser.find_element(By.CSS_SELECTOR, f'#records tr.record[data-offset="{off}"]')

    # Long JSON: pretty-printed in full (the preview showed a cut line).
    row(2).click()
    assert detail(2).is_displayed() and row(2).get_attribute("aria-expanded") == "true"
    pre = detail(2).find_element(By.CSS_SELECTOR, "pre.value")
    assert pre.get_attribute("data-kind") == "json"
    assert pre.text == json.dumps(json.loads(consumed[2].value), indent=2)
    assert "deep-cake" not in row(2).text  # past the one-line preview
    assert [(h.find_element(By.TAG_NAME, "b").text, h.find_element(By.TAG_NAME, "pre").text)
            for h in detail(2).find_elements(By.CSS_SELECTOR, ".header")] == [("n:", "2")]
    # Multi-line text: as written, newlines kept.
    row(3).click()
    assert detail(3).find_element(By.CSS_SELECTOR, "pre.value").get_attribute("textContent") == consumed[3].value.decode()
    assert detail(3).find_elements(By.CSS_SELECTOR, ".header") == []  # it has none
    # Binary, opened from the keyboard: a hex dump of every byte.
    row(0).send_keys(Keys.ENTER)
    dump = detail(0).find_element(By.CSS_SELECTOR, "pre.value").text
    assert bytes.fromhex(dump[10:57].replace(" ", "")) == consumed[0].value
    assert "CreateTime" in detail(0).find_element(By.CSS_SELECTOR, ".ts-type").text
    # A null key says null; a second click closes the row.
    assert row(4).find_element(By.CSS_SELECTOR, "td.key").text == "null"
    row(2).click()
    assert not detail(2).is_displayed() and row(2).get_attribute("aria-expanded") == "false"
    browser.find_element(By.ID, "expand-all").click()
    assert all(d.is_displayed() for d in browser.find_elements(By.CSS_SELECTOR, "#records tr.detail"))
    browser.find_element(By.ID, "collapse-all").click()
    assert not any(d.is_displayed() for d in browser.find_elements(By.CSS_SELECTOR, "#records tr.detail"))


def _matches(needle: str, where: str) -> Callable[[Produced], bool]:
    """The brute-force filter: the needle in the key and/or value read as UTF-8, any case."""
    n = needle.casefold()

    def text(b: bytes | None) -> str:
        return "" if b is None else b.decode("utf-8", errors="replace").casefold()

    return lambda r: (where != "value" and n in text(r.key)) or (where != "key" and n in text(r.value))


def _search_all(driver: Any, url: str) -> tuple[list[tuple[int, int]], list[dict[str, Any]]]:
    """Follow a filtered search's "next" links to the end: every match shown, and per
    page what it says it searched."""
    found: list[tuple[int, int]] = []
    pages: list[dict[str, Any]] = []
    for _ in range(200):
        driver.get(url)
        box = driver.find_element(By.ID, "searched")
        ranges = {int(s.get_attribute("data-partition")): (int(s.get_attribute("data-from")),
                                                          int(s.get_attribute("data-to")))
                  for s in box.find_elements(By.CSS_SELECTOR, ".range")}
        rows = [(r["partition"], r["offset"]) for r in table(driver)]
        assert int(box.get_attribute("data-matches")) == len(rows)
        assert all(ranges[p][0] <= o < ranges[p][1] for p, o in rows)  # within what it searched
        pages.append({"ranges": ranges, "examined": int(box.get_attribute("data-examined")),
                      "stopped": box.get_attribute("data-stopped"), "rows": rows})
        found += rows
        nxt = driver.find_elements(By.ID, "next")
        if not nxt:
            return found, pages
        url = nxt[0].get_attribute("href")
    raise AssertionError("the search did not end")


@pytest.mark.parametrize(("needle", "where", "limit", "scan"), [
    ("cake", "both", 7, 25),
    ("TEA", "value", 500, 5000),    # any case: "tea" in JSON, "TEA" in text, one page
    ("customer-3", "key", 2, 10),   # stops at 2 matches and at 10 records searched, in turn
    ("café", "both", 3, 1000),      # multi-byte, any case ("Café")
    ("deep-cake", "value", 5, 40),  # only past what the previews show
    ("nowhere to be found", "both", 10, 50),
])
def test_the_filter_finds_what_a_brute_force_filter_over_the_records_finds(  # type: ignore[no-untyped-def]
        browser, console_url, topic, needle, where, limit, scan) -> None:
    consumed = topic["consumed"]
    q = urlencode({"q": needle, "in": where, "limit": limit, "scan": scan})
    found, pages = _search_all(browser, f"{console_url}/topics/{topic['name']}/records?{q}")
    everything = merged(consumed, dict.fromkeys(range(PARTS), 0))
    assert found == [(r.partition, r.offset) for r in everything if _matches(needle, where)(r)]
    # The pages searched the topic without a gap or an overlap, each as far as it says.
    assert pages[0]["ranges"] == {p: (0, pages[0]["ranges"][p][1]) for p in range(PARTS)}
    for a, b in zip(pages, pages[1:], strict=False):
        assert all(a["ranges"][p][1] == b["ranges"][p][0] for p in range(PARTS))
    assert {p: r[1] for p, r in pages[-1]["ranges"].items()} == dict.fromkeys(range(PARTS), N)
    for page in pages:
        assert page["examined"] == sum(t - f for f, t in page["ranges"].values()) <= scan
        assert len(page["rows"]) <= limit
        assert page["stopped"] in ("matches", "budget", "end")
    assert sum(p["examined"] for p in pages) == PARTS * N
    if (limit, scan) == (2, 10):  # both ways a page stops, exercised
        assert {"matches", "budget"} <= {p["stopped"] for p in pages}


def test_a_filter_from_a_time_in_one_partition_and_its_marked_preview(browser, console_url, topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    consumed = topic["consumed"]
    at = stamp(2, 10) + 1
    q = urlencode({"partition": 2, "time": format_time(at), "q": "deep-cake", "in": "value", "limit": 3})
    found, pages = _search_all(browser, f"{console_url}/topics/{topic['name']}/records?{q}")
    start = first_offset([r.timestamp for r in consumed[2]], at)
    assert pages[0]["ranges"][2][0] == start
    assert found == [(2, r.offset) for r in consumed[2][start:] if _matches("deep-cake", "value")(r)]
    # The preview of a long value is moved to show the match, marked.
    browser.get(f"{console_url}/topics/{topic['name']}/records?{q}")
    marks = browser.find_elements(By.CSS_SELECTOR, "#records td.value mark")
    assert marks and {m.text for m in marks} == {"deep-cake"}
    assert browser.find_element(By.CSS_SELECTOR, "#records td.value").text.startswith("…")
    summary = browser.find_element(By.ID, "searched").text
    assert f"p2 offsets {start}–" in summary and "timestamps" in summary
    # Nothing found within the budget: said, with a link to search on.
    q = urlencode({"q": "nowhere", "scan": 10})
    browser.get(f"{console_url}/topics/{topic['name']}/records?{q}")
    assert browser.find_element(By.ID, "empty").text == "No record among the 10 searched has “nowhere” in its key or value."
    assert browser.find_element(By.ID, "search-on").get_attribute("href").endswith(
        "cursor=" + "%2C".join(f"{p}%3A{n}" for p, n in pages_after_ten(consumed).items()))


def pages_after_ten(consumed: dict[int, list[Produced]]) -> dict[int, int]:
    """Each partition's next offset after the first 10 records of the merged order."""
    pos = dict.fromkeys(range(PARTS), 0)
    for r in merged(consumed, pos)[:10]:
        pos[r.partition] = r.offset + 1
    return pos
