"""/metrics of a real broker changes exactly as the requests sent to it say it must.

Every expectation is a delta between two scrapes around real traffic from the
bundled client, so the test does not depend on what the broker did at start-up.
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opshelp import free_port_number, scrape, wait_until_serving

from client import ProducerRecord, SyncClient
from client.cli.dump_log import read_index, segments_in

Sample = dict[str, float]
BASE = 1_700_000_000_000  # the first record timestamp of every test


def delta(after: Sample, before: Sample, name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)


@pytest.fixture
def metrics_broker(broker_factory: Callable[..., Any]) -> tuple[Any, str]:
    mport = free_port_number()
    b = broker_factory(overrides={"metrics.listener": f"127.0.0.1:{mport}",
                                  "log.index.interval.bytes": "200",
                                  "log.segment.bytes": "20000"})
    wait_until_serving(mport)
    return b, f"http://127.0.0.1:{mport}/metrics"


def test_produce_and_lookups_move_the_counters_they_should(
    metrics_broker: tuple[Any, str],
) -> None:
    b, url = metrics_broker
    with SyncClient(b.bootstrap) as c:
        c.create_topic("m", 2)
        before = scrape(url)
        sizes = {0: 0, 1: 0}
        for i in range(40):
            recs = [ProducerRecord(key=f"k{i}", value=b"v" * 300, timestamp=BASE + i * 10 + j)
                    for j in range(5)]
            c.produce("m", recs, partition=i % 2)
            sizes[i % 2] += 5
        after_produce = scrape(url)
        lookups = 7
        for t in range(lookups):
            assert c.offsets_for_times("m", BASE + t * 50)  # one lookup per partition
        after_lookup = scrape(url)
        active = scrape(url)["chronolog_connections_active"]
    for p in (0, 1):
        assert delta(after_produce, before,
                     f'chronolog_records_appended_total{{partition="{p}",topic="m"}}') == sizes[p]
        assert after_produce[f'chronolog_log_end_offset{{partition="{p}",topic="m"}}'] == sizes[p]
        assert after_produce[f'chronolog_log_start_offset{{partition="{p}",topic="m"}}'] == 0
        segs = after_produce[f'chronolog_log_segments{{partition="{p}",topic="m"}}']
        assert segs >= 2, "20 kB segments must have rolled"
        assert after_produce[f'chronolog_offset_index_entries{{partition="{p}",topic="m"}}'] > 0
        assert after_produce[f'chronolog_log_size_bytes{{partition="{p}",topic="m"}}'] > 20_000
    assert delta(after_produce, before, 'chronolog_requests_total{api="Produce"}') == 40
    assert delta(after_produce, before, 'chronolog_request_seconds_count{api="Produce"}') == 40
    assert delta(after_produce, before, "chronolog_bytes_in_total") > 40 * 5 * 100
    assert delta(after_produce, before, "chronolog_bytes_out_total") > 0
    assert delta(after_lookup, after_produce, "chronolog_time_index_lookups_total") == 2 * lookups
    assert delta(after_lookup, after_produce,
                 "chronolog_time_index_lookup_seconds_count") == 2 * lookups
    assert delta(after_lookup, after_produce, 'chronolog_requests_total{api="ListOffsets"}') >= lookups
    assert active >= 1
    # The client is closed now: the gauge comes back down.
    deadline = time.monotonic() + 5
    while scrape(url)["chronolog_connections_active"] >= active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scrape(url)["chronolog_connections_active"] < active


def test_index_gauges_agree_with_the_index_files_on_disk(
    metrics_broker: tuple[Any, str],
) -> None:
    b, url = metrics_broker
    with SyncClient(b.bootstrap) as c:
        c.create_topic("idx", 1, {"segment.bytes": "3000"})
        for i in range(60):
            c.produce("idx", [ProducerRecord(value=b"x" * 300, timestamp=BASE + i)], partition=0)
        assert c.offsets_for_times("idx", BASE + 1)[0] == (1, BASE + 1)
    got = scrape(url)
    pdir = b.data_dir / "idx-0"
    segs = segments_in(pdir)
    label = '{partition="0",topic="idx"}'
    assert got["chronolog_log_segments" + label] == len(segs) >= 5
    # The oracle: entries as Kafka counts them, read from the files by dump-log's reader.
    assert got["chronolog_offset_index_entries" + label] == sum(
        len(read_index(s.index, time_index=False).entries) for s in segs)
    assert got["chronolog_time_index_entries" + label] == sum(
        len(read_index(s.timeindex, time_index=True).entries) for s in segs)
    on_disk = sum(s.index.stat().st_size + s.timeindex.stat().st_size for s in segs)
    assert 0 < got["chronolog_index_bytes_mapped" + label] <= on_disk
    assert got["chronolog_log_size_bytes" + label] == sum(s.log.stat().st_size for s in segs)


def test_disorder_gauges_count_late_records(metrics_broker: tuple[Any, str]) -> None:
    b, url = metrics_broker
    tss = [BASE + 50, BASE + 10, BASE + 60, BASE + 60, BASE + 20, BASE + 70, BASE + 5]
    with SyncClient(b.bootstrap) as c:
        c.create_topic("late", 1, {"segment.bytes": "1000"})
        for t in tss:
            c.produce("late", [ProducerRecord(value=b"x" * 200, timestamp=t)], partition=0)
    got = scrape(url)
    label = '{partition="0",topic="late"}'
    assert got["chronolog_late_records" + label] == 3  # BASE+10, BASE+20, BASE+5
    assert got["chronolog_max_lateness_ms" + label] == 65  # BASE+70 then BASE+5


def test_unknown_paths_get_404_and_healthz_answers(metrics_broker: tuple[Any, str]) -> None:
    _, url = metrics_broker
    root = url.rsplit("/", 1)[0]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(root + "/nope", timeout=5)
    assert err.value.code == 404
    assert urllib.request.urlopen(root + "/healthz", timeout=5).read() == b"ok\n"
    # A plain socket that sends garbage does not take the endpoint down.
    host, port = root.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"\x00\xff garbage\r\n\r\n")
        s.recv(100)
    assert "chronolog_connections_active" in scrape(url)


def test_healthz_fails_while_the_event_loop_is_wedged_and_recovers(tmp_path: Path) -> None:
    """In-process: the real metrics server and partition manager on a uvloop loop thread."""
    import asyncio
    import threading

    import uvloop

    from broker.config import BrokerConfig
    from broker.metrics import start_metrics_server
    from broker.partitions import PartitionManager

    loop = uvloop.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path / "data")))

    class Owner:  # what start_metrics_server reads: the broker's ``partitions``
        partitions = pm

    async def start() -> Any:
        pm.open(asyncio.get_running_loop())
        pm.create_topic("h", 2)
        return start_metrics_server("127.0.0.1", 0, Owner())

    server = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    health = f"http://127.0.0.1:{server.port}/healthz"
    try:
        assert urllib.request.urlopen(health, timeout=5).read() == b"ok\n"
        assert scrape(f"http://127.0.0.1:{server.port}/metrics")[
            'chronolog_log_end_offset{partition="1",topic="h"}'] == 0
        loop.call_soon_threadsafe(time.sleep, 4.0)  # a handler that blocks the loop
        time.sleep(0.1)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(health, timeout=10)
        assert err.value.code == 503
        deadline = time.monotonic() + 15
        while True:
            try:
                if urllib.request.urlopen(health, timeout=5).read() == b"ok\n":
                    break
            except urllib.error.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        server.close()
        loop.call_soon_threadsafe(pm.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
