"""The event-time timeline and its windows against brute-force counts of what was produced.

Hypothesis produces records with out-of-order CreateTime into a real broker; every
bucket of the event-time timeline must equal the number of produced records whose
timestamp lies in it (also after more records arrive and after DeleteRecords moves the
log start, with the console's timestamp cache reading only what changed); the pages of
an event-time window must give exactly the records a brute-force filter keeps, each
partition in offset order. In Chromium, a month-shuffled topic (bench/datasets.py, a
year squeezed into a day and a half so retention keeps it) shows a bar that the
positional count leaves empty, and clicking it opens exactly that bar's records.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import os
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from console_oracle import BASE, bucket_counts, unique_topic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from bench.datasets import month_shuffled
from client import ProducerRecord, SyncClient
from client.admin import delete_records
from client.aio import Client
from client.timeparse import format_time
from console import browse, eventtime
from protocol.errors import KafkaError

examples = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

parts_st = st.lists(  # per partition, timestamps in offset order (out of order allowed)
    st.lists(st.integers(0, 3_000), max_size=30), min_size=1, max_size=3
)


def event_counts(parts: dict[int, list[int]], bounds: list[int]) -> list[int]:
    """Per bucket [b_i, b_i+1): the records whose own timestamp lies in it (a scan)."""
    return [sum(1 for ts in parts.values() for t in ts if bounds[i] <= t < bounds[i + 1])
            for i in range(len(bounds) - 1)]


def late(ts: list[int]) -> tuple[int, int]:
    """Records below the largest timestamp before them, and the largest such gap (a scan)."""
    n = worst = 0
    for i, t in enumerate(ts):
        before = max(ts[:i], default=t)
        if t < before:
            n += 1
            worst = max(worst, before - t)
    return n, worst


def _run(coro_fn, bootstrap):  # type: ignore[no-untyped-def]
    import uvloop

    async def main():  # type: ignore[no-untyped-def]
        async with await Client.connect(bootstrap, client_id="console-tests") as c:
            return await coro_fn(c)

    return uvloop.run(main())


async def _produce(c: Client, topic: str, parts: list[list[int]], first: int = 0) -> None:
    for p, stamps in enumerate(parts):
        recs = [ProducerRecord(key=f"{p}-{first + i}", value=b"v%d" % (first + i), timestamp=BASE + t)
                for i, t in enumerate(stamps)]
        half = len(recs) // 2  # two batches: the records span more than one
        for chunk in (recs[:half], recs[half:]):
            if chunk:
                await c.produce(topic, chunk, partition=p)


#: Both paths of a chart: the broker's exact counts (CountTimeWindows), and the cache of
#: timestamps read through the client (what a broker without the API gets).
BOTH = pytest.mark.parametrize("broker_counts", [True, False], ids=["broker-counts", "cache"])


@BOTH
@examples
@given(parts=parts_st, more=parts_st,
       cuts=st.lists(st.integers(-10, 3_010), min_size=2, max_size=8, unique=True),
       drop=st.integers(0, 40))
def test_event_time_buckets_count_every_record_at_its_own_timestamp(  # type: ignore[no-untyped-def]
        console_broker, broker_counts, parts, more, cuts, drop) -> None:
    bounds = [BASE + t for t in sorted(cuts)]
    more = (more + [[]] * len(parts))[:len(parts)]

    async def check(c: Client) -> None:
        topic = unique_topic("ev")
        await c.create_topic(topic, len(parts))
        await _produce(c, topic, parts)
        stamps = {p: [BASE + t for t in ts] for p, ts in enumerate(parts)}
        cache = eventtime.TimestampCache(broker_counts=broker_counts)
        tl = await cache.timeline(c, topic, bounds)
        assert tl.counts == event_counts(stamps, bounds)
        for p, ts in stamps.items():
            assert tl.partition_counts(p) == event_counts({p: ts}, bounds)
            assert (tl.states[p].late_records, tl.states[p].max_lateness_ms) == late(ts)
        assert tl.read_records == (0 if broker_counts else sum(map(len, parts)))
        # Again: nothing read. More records: only those are read.
        assert (await cache.timeline(c, topic, bounds)).read_records == 0
        await _produce(c, topic, more, first=100)
        for p, ts in enumerate(more):
            stamps[p] += [BASE + t for t in ts]
        tl = await cache.timeline(c, topic, bounds)
        assert tl.read_records == (0 if broker_counts else sum(map(len, more)))
        assert tl.counts == event_counts(stamps, bounds)
        # DeleteRecords moves the log start into the cached records: they leave the counts.
        cut = {p: min(drop, len(ts)) for p, ts in stamps.items()}
        await delete_records(c, topic, cut)
        tl = await cache.timeline(c, topic, bounds)
        assert tl.counts == event_counts({p: ts[cut[p]:] for p, ts in stamps.items()}, bounds)
        # A fresh cache agrees.
        fresh = eventtime.TimestampCache(broker_counts=not broker_counts)
        assert (await fresh.timeline(c, topic, bounds)).counts == tl.counts

    _run(check, console_broker.bootstrap)


@examples
@given(parts=parts_st, window=st.tuples(st.integers(-10, 3_010), st.integers(1, 1_500)),
       limit=st.integers(1, 7), budget=st.integers(1, 40))
def test_event_time_window_pages_give_exactly_the_windows_records(  # type: ignore[no-untyped-def]
        console_broker, parts, window, limit, budget) -> None:
    t1, t2 = BASE + window[0], BASE + window[0] + window[1]

    async def check(c: Client) -> None:
        topic = unique_topic("ew")
        await c.create_topic(topic, len(parts))
        await _produce(c, topic, parts)
        expect = {(p, o) for p, ts in enumerate(parts) for o, t in enumerate(ts)
                  if t1 <= BASE + t < t2}
        plans = await c.plan_time_window(topic, t1, t2)
        cursor = {p: 0 for p in range(len(parts))}
        got: list[tuple[int, int]] = []
        for _ in range(200):
            page = await browse.window_forward(c, topic, plans, cursor, t1, t2, limit, budget)
            assert len(page.records) <= limit
            assert all(t1 <= s.timestamp < t2 for s in page.records)
            # Partitions merged by their heads' timestamps (ties by partition), each in
            # offset order: the browser's merged order.
            mine = {p: [s for s in page.records if s.partition == p] for p in range(len(parts))}
            assert page.records == list(heapq.merge(*mine.values(), key=lambda s: (s.timestamp, s.partition)))
            got += [(s.partition, s.offset) for s in page.records]
            if page.at_end:
                break
            assert page.next != cursor, "a page before the end moves on"
            cursor = page.next
        else:
            pytest.fail("never reached the end")
        assert len(got) == len(set(got))
        assert set(got) == expect
        for p in range(len(parts)):  # each partition in offset order
            mine = [o for q, o in got if q == p]
            assert mine == sorted(mine)

    _run(check, console_broker.bootstrap)


# -------------------------------------------------------------- over HTTP and in Chromium

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
N = 1200  # records, month-shuffled, in PARTS partitions
PARTS = 3
SQUEEZE = 36 * 3_600_000  # a year of event time shown within a day and a half


@pytest.fixture(scope="module")
def shuffled(console_broker) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """A month-shuffled topic: whole months arrive out of order, 3 % of records days late."""
    year = month_shuffled(N, seed=3)
    lo = int(year.min())
    stamps = (BASE - 36 * 3_600_000 + (year - lo) * SQUEEZE // (366 * 86_400_000)).astype(np.int64)
    name = unique_topic("flights")
    parts: dict[int, list[int]] = {p: [] for p in range(PARTS)}
    with SyncClient(console_broker.bootstrap, client_id="console-tests") as c:
        c.create_topic(name, PARTS)
        for i in range(0, N, 30):  # small batches, as a streaming producer sends them
            by_part: dict[int, list[ProducerRecord]] = {}
            for j in range(i, min(N, i + 30)):
                p = j % PARTS
                by_part.setdefault(p, []).append(ProducerRecord(
                    key=f"flight-{j}", value=json.dumps({"n": j}).encode(), timestamp=int(stamps[j])))
                parts[p].append(int(stamps[j]))
            for p, recs in by_part.items():
                c.produce(name, recs, partition=p)
    return {"name": name, "stamps": parts}


def _api(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=60) as r:
        assert "timeline;dur=" in r.headers.get("Server-Timing", "")
        return json.loads(r.read())  # type: ignore[no-any-return]


def test_the_default_is_event_time_and_the_positional_toggle_gives_todays_counts(  # type: ignore[no-untyped-def]
        console_url, shuffled) -> None:
    stamps = shuffled["stamps"]
    lo = min(min(ts) for ts in stamps.values())
    hi = max(max(ts) for ts in stamps.values()) + 1
    q = urllib.parse.urlencode({"from": format_time(lo), "to": format_time(hi), "buckets": 12})
    event = _api(f"{console_url}/api/topics/{shuffled['name']}/timeline?{q}")
    offset = _api(f"{console_url}/api/topics/{shuffled['name']}/timeline?{q}&by=offset")
    assert event["by"] == "event" and offset["by"] == "offset"
    assert event["bounds"] == offset["bounds"]
    bounds = event["bounds"]
    assert event["counts"] == event_counts(stamps, bounds)
    assert sum(event["counts"]) == N
    assert offset["counts"] == bucket_counts(stamps, bounds)  # the reader-of-the-window rule
    # The "empty months that in fact hold most of the data": by position some
    # buckets are empty that hold records by event time.
    hidden = [i for i, (e, o) in enumerate(zip(event["counts"], offset["counts"], strict=True))
              if o == 0 and e > 0]
    assert hidden
    # The data extent: the smallest to the largest timestamp, wherever they sit.
    whole = _api(f"{console_url}/api/topics/{shuffled['name']}/timeline")
    assert whole["bounds"][0] <= lo < hi <= whole["bounds"][-1]
    assert whole["total"] == N


def shot(driver: Any, name: str, tmp_path: Path) -> None:
    """A screenshot: into docs/console/ when asked to refresh the docs (as test_console_browser)."""
    target = DOCS if os.environ.get("CHRONOLOG_SCREENSHOTS") == "1" else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(target / f"{name}.png"))


def _wait(driver: Any, cond: Any, timeout: float = 20) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(cond)


def _rows(driver: Any) -> list[tuple[int, int, int]]:
    return [(int(r.get_attribute("data-partition")), int(r.get_attribute("data-offset")),
             int(r.get_attribute("data-timestamp")))
            for r in driver.find_elements(By.CSS_SELECTOR, "#records tr.record")]


def test_clicking_an_event_time_bar_opens_exactly_its_records(  # type: ignore[no-untyped-def]
        browser, console_url, shuffled, tmp_path) -> None:
    stamps = shuffled["stamps"]
    lo = min(min(ts) for ts in stamps.values())
    hi = max(max(ts) for ts in stamps.values()) + 1
    q = urllib.parse.urlencode({"from": format_time(lo), "to": format_time(hi), "buckets": 12})
    browser.get(f"{console_url}/topics/{shuffled['name']}?{q}")
    assert browser.find_element(By.ID, "meaning").get_attribute("data-by") == "event"
    bounds, bars = browser.execute_script("return [chronolog.timeline.bounds, chronolog.chart.data[1]]")
    assert bars == event_counts(stamps, bounds)
    positional = bucket_counts(stamps, bounds)
    i = next(i for i in range(len(bars)) if positional[i] == 0 and bars[i] > 0)
    # Each partition's late records and max lateness, as a scan finds them.
    for tr in browser.find_elements(By.CSS_SELECTOR, "#disorder tr.disorder"):
        p = int(tr.get_attribute("data-partition"))
        assert (int(tr.get_attribute("data-late")), int(tr.get_attribute("data-max-lateness"))) == late(stamps[p])
    assert "different records" in browser.find_element(By.ID, "disorder-hint").text
    c = browser.execute_script(f"return chronolog.barCenter({i})")
    over = browser.find_element(By.CSS_SELECTOR, "#chart .u-over")
    # Hovering the bar tells its count per partition, by event time.
    ActionChains(browser).move_to_element_with_offset(over, int(c["x"] - c["width"] / 2), 0).perform()
    detail = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'.bucket-detail[data-bucket="{i}"]'))
    per = [event_counts({p: stamps[p]}, bounds)[i] for p in range(PARTS)]
    assert detail.text.endswith(f": {bars[i]} records (" + ", ".join(f"p{p}: {n}" for p, n in enumerate(per)) + ")")
    shot(browser, "timeline", tmp_path)
    ActionChains(browser).move_to_element_with_offset(
        over, int(c["x"] - c["width"] / 2), int(c["y"] - c["height"] / 2)).click().perform()
    _wait(browser, lambda d: "/records" in d.current_url and "until=" in d.current_url)
    box = browser.find_element(By.ID, "window")
    assert (int(box.get_attribute("data-from")), int(box.get_attribute("data-until"))) == (
        bounds[i], bounds[i + 1])
    shot(browser, "records-window", tmp_path)
    got: list[tuple[int, int, int]] = []
    for _ in range(50):
        got += _rows(browser)
        nxt = browser.find_elements(By.ID, "next")
        if not nxt:
            break
        url = browser.current_url
        nxt[0].click()
        _wait(browser, lambda d, url=url: d.current_url != url)
    expect = sorted((p, o, t) for p, ts in stamps.items() for o, t in enumerate(ts)
                    if bounds[i] <= t < bounds[i + 1])
    assert len(got) == bars[i] == len(expect)
    assert sorted(got) == expect
    for p in range(PARTS):  # each partition in offset order
        mine = [o for q, o, _ in got if q == p]
        assert mine == sorted(mine)
    # The toggle: the same chart by position, whose bar opens the browser at off(t1).
    browser.get(f"{console_url}/topics/{shuffled['name']}?{q}")
    browser.find_element(By.ID, "by-offset").click()
    _wait(browser, lambda d: "by=offset" in d.current_url)
    assert browser.find_element(By.ID, "meaning").get_attribute("data-by") == "offset"
    bars = browser.execute_script("return chronolog.chart.data[1]")
    assert bars == positional
    shot(browser, "timeline-shuffled-by-position", tmp_path)


@BOTH
def test_a_compacted_topic_is_counted_again_when_the_cleaner_removed_records(  # type: ignore[no-untyped-def]
        console_broker, broker_counts) -> None:
    """Compaction removes records from the middle without moving the log start or the high
    watermark; the broker's record count tells the cache, which reads the partition again."""
    import random
    import time

    rng = random.Random(5)
    stamps = [BASE + rng.randrange(3_000_000) for _ in range(400)]
    bounds = [BASE + i * 300_000 for i in range(11)]

    async def check(c: Client) -> None:
        topic = unique_topic("ec")
        await c.create_topic(topic, 1, {"cleanup.policy": "compact", "segment.bytes": "4096",
                                        "min.cleanable.dirty.ratio": "0.01"})
        for i in range(0, len(stamps), 20):
            await c.produce(topic, [ProducerRecord(key=f"k{j % 30}", value=b"v%d" % j, timestamp=t)
                                    for j, t in enumerate(stamps[i:i + 20], start=i)], partition=0)
        cache = eventtime.TimestampCache(broker_counts=broker_counts)
        tl = await cache.timeline(c, topic, bounds)
        assert tl.counts == event_counts({0: stamps}, bounds)
        deadline = time.monotonic() + 60
        while (await c.disorder_stats(topic))[0].records == len(stamps):
            assert time.monotonic() < deadline, "the cleaner never compacted the topic"
            await asyncio.sleep(0.5)
        tl = await cache.timeline(c, topic, bounds)
        assert tl.read_records > 0 or broker_counts  # counted again, from the broker's records
        for _ in range(20):  # the cleaner may take another pass while we compare
            before = (await c.disorder_stats(topic))[0].records
            tl = await cache.timeline(c, topic, bounds)
            left = [r.timestamp async for r in c.consume(topic, 0, 0, tl.high_watermarks[0])]
            if (await c.disorder_stats(topic))[0].records == before == len(left):
                break
            await asyncio.sleep(0.5)
        assert len(left) < len(stamps)
        assert tl.counts == event_counts({0: left}, bounds)

    _run(check, console_broker.bootstrap)


def test_a_first_chart_not_ready_in_time_shows_the_positional_count_and_reloads(  # type: ignore[no-untyped-def]
        console_url, console_broker) -> None:
    """A page does not wait for a first event-time chart longer than it may (?wait=): it
    says how far the reading got, shows the positional chart and reloads itself; the
    reading goes on, and the next page has the exact event-time chart."""
    topic = unique_topic("warm")
    stamps = {0: [BASE + (i * 7919) % 3_000_000 for i in range(3000)]}

    async def produce(c: Client) -> None:
        await c.create_topic(topic, 1)
        for i in range(0, 3000, 500):
            await c.produce(topic, [ProducerRecord(value=b"x", timestamp=t) for t in stamps[0][i:i + 500]],
                            partition=0)

    _run(produce, console_broker.bootstrap)
    q = urllib.parse.urlencode({"from": format_time(BASE), "to": format_time(BASE + 3_000_000), "buckets": 10})
    with urllib.request.urlopen(f"{console_url}/topics/{topic}?{q}&wait=0", timeout=60) as r:
        page = r.read().decode()
    assert 'id="warming"' in page and '<meta http-equiv="refresh" content="2">' in page
    assert 'data-by="offset"' in page  # meanwhile the positional chart
    assert 'name="by"' not in page  # ...and the form still asks for event time
    cold = _api(f"{console_url}/api/topics/{topic}/timeline?{q}&wait=0")
    assert cold["by"] == "offset" and "warming" in cold
    # The API waits by default; the reading the first page started ends with exact counts.
    ready = _api(f"{console_url}/api/topics/{topic}/timeline?{q}")
    assert ready["by"] == "event" and "warming" not in ready
    assert ready["counts"] == event_counts(stamps, ready["bounds"])
    with urllib.request.urlopen(f"{console_url}/topics/{topic}?{q}", timeout=60) as r:
        page = r.read().decode()
    assert 'id="warming"' not in page and 'data-by="event"' in page


def test_the_cache_keeps_at_most_its_records_and_refuses_a_larger_chart(console_broker) -> None:  # type: ignore[no-untyped-def]
    bounds = [BASE, BASE + 1_000, BASE + 2_000]

    async def check(c: Client) -> None:
        small, big = unique_topic("cap"), unique_topic("cap")
        for name, n in ((small, 30), (big, 50)):
            await c.create_topic(name, 1)
            await c.produce(name, [ProducerRecord(value=b"x", timestamp=BASE + i * 37) for i in range(n)],
                            partition=0)
        # the limit is the fallback cache's: the broker's counts keep nothing here
        assert (await eventtime.TimestampCache(max_records=40).timeline(c, big, bounds)).total == 50
        cache = eventtime.TimestampCache(max_records=60, broker_counts=False)
        assert (await cache.timeline(c, small, bounds)).total == 30
        assert cache.records == 30
        tl = await cache.timeline(c, big, bounds)  # 30 + 50 > 60: the older topic goes
        assert tl.total == 50 and cache.records == 50
        assert (await cache.timeline(c, small, bounds)).read_records == 30
        with pytest.raises(eventtime.TooLarge):
            await eventtime.TimestampCache(max_records=40, broker_counts=False).timeline(c, big, bounds)

    _run(check, console_broker.bootstrap)


@BOTH
def test_a_topic_deleted_and_created_again_under_its_name_is_read_again(  # type: ignore[no-untyped-def]
        console_broker, broker_counts) -> None:
    """Same name, same offsets, other records: the batch at the last offset read is not the
    one read then, so the cache reads the partition again."""
    bounds = [BASE + i * 1_000 for i in range(5)]
    first = [BASE + 3_999 - i * 37 for i in range(40)]
    second = [BASE + i * 11 for i in range(40)]

    async def check(c: Client) -> None:
        topic = unique_topic("again")
        await c.create_topic(topic, 1)
        await c.produce(topic, [ProducerRecord(value=b"a", timestamp=t) for t in first], partition=0)
        cache = eventtime.TimestampCache(broker_counts=broker_counts)
        assert (await cache.timeline(c, topic, bounds)).counts == event_counts({0: first}, bounds)
        await c.delete_topic(topic)
        for _ in range(100):
            try:
                await c.create_topic(topic, 1)
                break
            except KafkaError:
                await asyncio.sleep(0.1)  # the old one is still being deleted
        await c.produce(topic, [ProducerRecord(value=b"b", timestamp=t) for t in second], partition=0)
        tl = await cache.timeline(c, topic, bounds)
        assert tl.high_watermarks[0] == len(first)  # the same offsets as before
        assert tl.read_records == (0 if broker_counts else len(second))
        assert tl.counts == event_counts({0: second}, bounds)

    _run(check, console_broker.bootstrap)


def test_a_chart_is_one_count_time_windows_request_when_the_broker_has_it(  # type: ignore[no-untyped-def]
        broker_factory) -> None:
    """Against a Chronolog broker the chart is the broker's count: one CountTimeWindows
    per chart (its request metric), no Fetch, nothing cached; the counts are exact."""
    import re

    from tests.helpers.broker import free_port_number

    mport = free_port_number()
    b = broker_factory({"metrics.listener": f"127.0.0.1:{mport}"})

    def requests() -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read().decode()
        return {m.group(1): float(m.group(2)) for m in
                re.finditer(r'^chronolog_requests_total\{api="(\w+)"\} (\S+)$', text, re.M)}

    rel = [[(i * 7919 + p * 13) % 3_000_000 for i in range(300)] for p in range(3)]
    stamps = {p: [BASE + t for t in ts] for p, ts in enumerate(rel)}
    bounds = [BASE + i * 100_000 for i in range(31)]

    async def check(c: Client) -> None:
        topic = unique_topic("one")
        await c.create_topic(topic, 3)
        await _produce(c, topic, rel)
        cache = eventtime.TimestampCache()
        for _ in range(2):
            before = requests()
            tl = await cache.timeline(c, topic, bounds)
            after = requests()
            assert tl.counts == event_counts(stamps, bounds) and tl.read_records == 0
            assert after.get("CountTimeWindows", 0) - before.get("CountTimeWindows", 0) == 1
            assert after.get("Fetch", 0) == before.get("Fetch", 0)
        assert cache.records == 0
        # bounds from the data's extent: one more CountTimeWindows finds it
        before = requests()
        tl = await cache.timeline(c, topic, lambda ext: [ext[0], ext[1]] if ext else [0, 1])
        after = requests()
        assert tl.counts == [900]
        assert tl.bounds[0] <= min(map(min, stamps.values()))
        assert tl.bounds[1] == max(map(max, stamps.values())) + 1
        assert after.get("CountTimeWindows", 0) - before.get("CountTimeWindows", 0) == 2

    _run(check, b.bootstrap)
