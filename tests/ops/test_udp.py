"""UDP ingest against a real broker subprocess with real datagrams.

Each test sends datagrams from a real socket, reads the topic back with the
bundled client, and compares with what was sent (the oracle); drops are read
from the broker's own /metrics endpoint.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opshelp import free_port_number, free_udp_port, scrape, udp_overrides, wait_until_serving

from client import SyncClient
from client.aio import Record
from client.cli.udp_send import send_datagrams

UdpBroker = tuple[Any, tuple[str, int], str]


def start_udp_broker(broker_factory: Callable[..., Any], **overrides: str) -> UdpBroker:
    """A broker from the shared factory with UDP ingest and metrics on free ports."""
    udp_port, mport = free_udp_port(), free_port_number()
    b = broker_factory(overrides=udp_overrides(udp_port, mport, **overrides))
    wait_until_serving(mport)
    return b, ("127.0.0.1", udp_port), f"http://127.0.0.1:{mport}/metrics"


def read_all(bootstrap: str, topic: str, expect: int, timeout: float = 15.0) -> list[Record]:
    """Every record of every partition, waiting until ``expect`` have arrived."""
    deadline = time.monotonic() + timeout
    with SyncClient(bootstrap) as c:
        while True:
            parts = c.partitions_for(topic)
            ends = c.latest(topic, parts)
            if sum(ends.values()) >= expect or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        out: list[Record] = []
        for p in parts:
            out += list(c.consume(topic, p, 0, ends[p]))
        return out


def wait_for_metric(url: str, name: str, value: float, timeout: float = 10.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        m = scrape(url)
        if m.get(name, 0.0) >= value or time.monotonic() > deadline:
            return m
        time.sleep(0.05)


def send(addr: tuple[str, int], datagrams: list[bytes]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for d in datagrams:
            s.sendto(d, addr)


def test_tsv_datagrams_arrive_with_their_keys_and_timestamps_and_malformed_ones_are_counted(
    broker_factory: Callable[..., Any],
) -> None:
    b, addr, url = start_udp_broker(broker_factory, udp_format="tsv", udp_topic="sensors")
    now = int(time.time() * 1000)
    good = [(f"sensor-{i % 7}", now - 1000 * i, f"reading {i}\twith tab") for i in range(200)]
    datagrams = [f"{k}\t{ts}\t{v}".encode() for k, ts, v in good]
    no_ts = [b"door-1\t\topen", b"\t\tanonymous\n"]
    malformed = [b"no tabs at all", b"key\tnot-a-number\tvalue", b"key\t-5\tvalue", b"one\ttab"]
    t0 = int(time.time() * 1000)
    send(addr, datagrams + no_ts + malformed)
    records = read_all(b.bootstrap, "sensors", len(good) + len(no_ts))
    t1 = int(time.time() * 1000)
    assert [(r.key, r.timestamp, r.value) for r in records[: len(good)]] == [
        (k.encode(), ts, v.encode()) for k, ts, v in good
    ]
    tail = records[len(good):]
    assert [(r.key, r.value) for r in tail] == [(b"door-1", b"open"), (None, b"anonymous")]
    assert all(t0 <= r.timestamp <= t1 for r in tail)
    assert len(records) == len(good) + len(no_ts)
    m = wait_for_metric(url, 'chronolog_udp_datagrams_dropped_total{reason="malformed"}',
                        len(malformed))
    assert m['chronolog_udp_datagrams_dropped_total{reason="malformed"}'] == len(malformed)
    assert m["chronolog_udp_datagrams_received_total"] == len(datagrams + no_ts + malformed)
    assert m["chronolog_udp_records_appended_total"] == len(good) + len(no_ts)


def test_json_datagrams_keep_keys_headers_and_timestamps(
    broker_factory: Callable[..., Any],
) -> None:
    b, addr, url = start_udp_broker(broker_factory, udp_format="json")
    now = int(time.time() * 1000)
    sent = [
        {"key": "a", "timestamp": now - 5, "value": "plain", "headers": {"src": "x", "n": None}},
        {"key": None, "timestamp": now - 7, "value": {"temp": 21.5, "ok": True}},
        {"value": None, "timestamp": now - 9},
    ]
    bad = [b"[1, 2]", b"{not json", json.dumps({"key": 5}).encode(),
           json.dumps({"timestamp": "soon"}).encode(), b"\xff\xfe"]
    send(addr, [json.dumps(d).encode() for d in sent] + bad)
    records = read_all(b.bootstrap, "udp", len(sent))
    assert [(r.key, r.timestamp, r.value, r.headers) for r in records] == [
        (b"a", now - 5, b"plain", [("src", b"x"), ("n", None)]),
        (None, now - 7, b'{"temp":21.5,"ok":true}', []),
        (None, now - 9, None, []),
    ]
    m = wait_for_metric(url, 'chronolog_udp_datagrams_dropped_total{reason="malformed"}', len(bad))
    assert m['chronolog_udp_datagrams_dropped_total{reason="malformed"}'] == len(bad)


def test_oversized_and_out_of_range_timestamps_are_dropped_alone(
    broker_factory: Callable[..., Any],
) -> None:
    b, addr, url = start_udp_broker(
        broker_factory, udp_format="tsv", udp_max_datagram_bytes="120",
        log_message_timestamp_after_max_ms="60000")
    now = int(time.time() * 1000)
    ok = [f"k{i}\t{now}\tv{i}".encode() for i in range(10)]
    too_big = [b"big\t\t" + b"x" * 200]
    future = [f"late\t{now + 3_600_000}\tv".encode()]
    send(addr, ok[:5] + too_big + future + ok[5:])
    records = read_all(b.bootstrap, "udp", len(ok))
    assert [r.key for r in records] == [f"k{i}".encode() for i in range(10)]
    m = wait_for_metric(url, 'chronolog_udp_datagrams_dropped_total{reason="timestamp"}', 1)
    assert m['chronolog_udp_datagrams_dropped_total{reason="oversized"}'] == 1
    assert m['chronolog_udp_datagrams_dropped_total{reason="timestamp"}'] == 1


def test_round_robin_spreads_and_hash_keeps_one_sender_on_one_partition(
    broker_factory: Callable[..., Any],
) -> None:
    b, addr, _ = start_udp_broker(broker_factory, udp_partitioning="round-robin",
                                  num_partitions="3", udp_topic="rr")
    stats = send_datagrams(addr[0], addr[1], count=300, size=50, fmt="raw")
    assert stats.sent == 300 and stats.errors == 0
    records = read_all(b.bootstrap, "rr", 300)
    by_part: dict[int, list[bytes]] = {}
    for r in records:
        by_part.setdefault(r.partition, []).append(r.value or b"")
    assert sorted(len(v) for v in by_part.values()) == [100, 100, 100]
    # Every sequence number arrived exactly once.
    assert sorted(int(v.split(b" ")[0]) for vs in by_part.values() for v in vs) == list(range(300))

    b2, addr2, _ = start_udp_broker(broker_factory, num_partitions="3", udp_topic="hashed")
    send_datagrams(addr2[0], addr2[1], count=90, size=40, fmt="raw")
    records = read_all(b2.bootstrap, "hashed", 90)
    assert len(records) == 90 and len({r.partition for r in records}) == 1
    assert [int((r.value or b"").split(b" ")[0]) for r in records] == list(range(90))


@settings(max_examples=8)
@given(st.lists(st.tuples(st.text(alphabet="abcxyz-0123456789", max_size=12),
                          st.one_of(st.none(), st.integers(0, 10**6)),
                          st.binary(max_size=300).filter(lambda v: not v.endswith(b"\n"))),
                min_size=1, max_size=40))
def test_tsv_parsing_matches_the_documented_framing(
    tsv_broker: UdpBroker, rows: list[tuple[str, int | None, bytes]]
) -> None:
    b, addr, _ = tsv_broker
    base = int(time.time() * 1000) - 10**7
    with SyncClient(b.bootstrap) as c:
        start = c.latest("udp")[0]
    datagrams = [k.encode() + b"\t" + (b"" if ts is None else str(base + ts).encode()) + b"\t" + v
                 for k, ts, v in rows]
    t0 = int(time.time() * 1000)
    send(addr, datagrams)
    with SyncClient(b.bootstrap) as c:
        deadline = time.monotonic() + 10
        while c.latest("udp")[0] < start + len(rows) and time.monotonic() < deadline:
            time.sleep(0.02)
        got = list(c.consume("udp", 0, start, start + len(rows)))
    t1 = int(time.time() * 1000)
    assert len(got) == len(rows)
    for r, (k, ts, v) in zip(got, rows, strict=True):
        assert r.key == (k.encode() or None)
        assert r.value == v
        if ts is None:
            assert t0 <= r.timestamp <= t1
        else:
            assert r.timestamp == base + ts



def test_udp_send_file_sends_each_line_as_one_datagram(
    broker_factory: Callable[..., Any], tmp_path: Any, capsys: Any,
) -> None:
    from client.cli import main as cli_main

    b, addr, _ = start_udp_broker(broker_factory, udp_format="tsv", udp_topic="lines")
    now = int(time.time() * 1000)
    lines = [f"dev-{i}\t{now - i}\treading {i}" for i in range(25)]
    path = tmp_path / "readings.tsv"
    path.write_text("\n".join(lines) + "\n\n")  # a blank line is skipped
    assert cli_main(["udp-send", f"{addr[0]}:{addr[1]}", "--file", str(path),
                     "--rate", "5k/s"]) == 0
    assert "sent 25 datagrams" in capsys.readouterr().out
    records = read_all(b.bootstrap, "lines", len(lines))
    assert [(r.key, r.timestamp, r.value) for r in records] == [
        (f"dev-{i}".encode(), now - i, f"reading {i}".encode()) for i in range(25)]


def _udp_totals(url: str) -> tuple[float, float, float]:
    m = scrape(url)
    dropped = sum(v for k, v in m.items() if k.startswith("chronolog_udp_datagrams_dropped_total"))
    return (m.get("chronolog_udp_datagrams_received_total", 0.0),
            m.get("chronolog_udp_records_appended_total", 0.0), dropped)


@settings(max_examples=6)
@given(st.lists(st.binary(max_size=2000), min_size=1, max_size=60))
def test_arbitrary_bytes_never_stop_ingest_and_every_datagram_is_accounted_for(
    tsv_broker: UdpBroker, junk: list[bytes]
) -> None:
    b, addr, url = tsv_broker
    received0, appended0, dropped0 = _udp_totals(url)
    send(addr, junk)
    deadline = time.monotonic() + 10
    while True:
        received, appended, dropped = _udp_totals(url)
        if received - received0 == len(junk) and \
                (appended - appended0) + (dropped - dropped0) == len(junk):
            break
        assert time.monotonic() < deadline, (received - received0, appended - appended0,
                                             dropped - dropped0, len(junk))
        time.sleep(0.02)
    # And ingest still works after the junk.
    with SyncClient(b.bootstrap) as c:
        start = c.latest("udp")[0]
    send(addr, [b"after\t\tjunk"])
    got = read_all(b.bootstrap, "udp", start + 1)
    assert got[-1].key == b"after" and got[-1].value == b"junk"


def test_ingest_recreates_its_topic_after_it_was_deleted(
    broker_factory: Callable[..., Any],
) -> None:
    b, addr, url = start_udp_broker(broker_factory, udp_format="tsv", udp_topic="ephemeral")
    send(addr, [b"a\t\t1", b"b\t\t2"])
    assert [r.key for r in read_all(b.bootstrap, "ephemeral", 2)] == [b"a", b"b"]
    with SyncClient(b.bootstrap) as c:
        c.delete_topic("ephemeral")
    send(addr, [b"c\t\t3"])
    deadline = time.monotonic() + 10
    while True:
        with SyncClient(b.bootstrap) as c:
            if "ephemeral" in c.list_topics() and c.latest("ephemeral")[0] >= 1:
                break
        assert time.monotonic() < deadline, "the deleted UDP topic was not recreated"
        time.sleep(0.05)
    assert [r.key for r in read_all(b.bootstrap, "ephemeral", 1)] == [b"c"]


def test_batches_stay_within_a_small_segment_so_every_datagram_lands(
    broker_factory: Callable[..., Any],
) -> None:
    """A batch never exceeds what the log can append: with log.segment.bytes=65536 (below
    max.message.bytes) 5,000 datagrams of 200 B all land, none fail as RecordListTooLarge."""
    b, addr, url = start_udp_broker(broker_factory, udp_format="tsv", udp_topic="small-seg",
                                    log_segment_bytes="65536", udp_linger_ms="50")
    sent = [b"k%d\t\t" % i + b"v" * 190 + b"%05d" % i for i in range(5000)]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for lo in range(0, len(sent), 250):  # paced, so no socket buffer can overflow
            for d in sent[lo:lo + 250]:
                s.sendto(d, addr)
            time.sleep(0.02)
    m = wait_for_metric(url, "chronolog_udp_records_appended_total", len(sent), timeout=30)
    dropped = {k: v for k, v in m.items()
               if k.startswith("chronolog_udp_datagrams_dropped_total") and v}
    assert dropped == {}
    got = read_all(b.bootstrap, "small-seg", len(sent))
    assert sorted(r.value for r in got) == sorted(d.split(b"\t", 2)[2] for d in sent)
