"""The broker's connection handling, over raw sockets to the real broker subprocess.

Frames are built with the project's protocol encoder, so each test controls
exactly what is on the wire: pipelining, long polls, bad sizes, unknown APIs.
"""

from __future__ import annotations

import signal
import socket
import struct
import threading
import time
from typing import Any

import pytest

from protocol import api
from storage.records import Record, build_batch
from tests.helpers.kafka_socket import (
    KafkaSocket,
    api_versions,
    create_topic,
    fetch_body,
    produce_frame,
)
from tests.helpers.wait import wait_until

# tests/ecosystem imports the raw socket helper from here by this name.
Raw = KafkaSocket

TIMEOUT = 10.0


def test_pipelined_requests_are_answered_in_order_behind_a_long_poll(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topic(raw, "pipe")
    fetch_cid, fetch = raw.frame(1, 12, fetch_body("pipe", 0, max_wait_ms=700))
    av_cid, av = raw.frame(18, 3, {"client_software_name": "x", "client_software_version": "1"})
    md_cid, md = raw.frame(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
    started = time.monotonic()
    raw.send(fetch, av, md)
    order = []
    for _ in range(3):
        cid, _body = raw.read()
        order.append((cid, time.monotonic() - started))
    assert [c for c, _ in order] == [fetch_cid, av_cid, md_cid]
    # The fetch had no data, so it waited out MaxWaitMs; the later answers waited behind it.
    assert order[0][1] >= 0.6
    raw.close()


def test_long_poll_wakes_on_append_from_another_connection(broker: Any) -> None:
    consumer = KafkaSocket(broker.port)
    producer = KafkaSocket(broker.port)
    create_topic(consumer, "wake")
    cid, fetch = consumer.frame(1, 12, fetch_body("wake", 0, max_wait_ms=30000))
    started = time.monotonic()
    consumer.send(fetch)

    def produce_later() -> None:
        time.sleep(0.3)
        pcid, frame = produce_frame(producer, "wake", [b"hello", b"world"])
        producer.send(frame)

    t = threading.Thread(target=produce_later)
    t.start()
    got, body = consumer.read()
    elapsed = time.monotonic() - started
    t.join()
    assert got == cid
    part = body.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 2
    assert len(part.records) > 0
    # Woken by the append (after 0.3 s), not at the 30 s max wait; the upper bound is far
    # from both so a loaded machine cannot blur them.
    assert 0.25 <= elapsed < 20.0, elapsed


def test_acks_zero_produce_gets_no_response_and_order_is_kept(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topic(raw, "acks0")
    _, p0 = produce_frame(raw, "acks0", [b"a"], acks=0)
    _, p1 = produce_frame(raw, "acks0", [b"b"], acks=0)
    av_cid, av = raw.frame(18, 0, {})
    raw.send(p0, p1, av)
    cid, _ = raw.read()
    assert cid == av_cid
    lo = raw.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "acks0", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                          "timestamp": -1}]}], "timeout_ms": 0})
    assert lo.topics[0].partitions[0].offset == 2


@pytest.mark.parametrize("size", [2000, -5])
def test_bad_frame_size_closes_only_that_connection(broker_factory: Any, size: int) -> None:
    b = broker_factory(overrides={"socket.request.max.bytes": "1000"})
    good = KafkaSocket(b.port)
    bad = KafkaSocket(b.port)
    bad.send(struct.pack(">i", size) + b"\x00" * 16)
    assert bad.closed_by_peer()
    assert api_versions(good).error_code == 0
    wait_until(lambda: "socket.request.max.bytes" in b.log(), 5.0, "the broker to log why it closed")
    assert f"request size {size}" in b.log()


def test_unknown_api_key_and_version_close_the_connection_and_log_why(broker: Any) -> None:
    good = KafkaSocket(broker.port)
    for header in (struct.pack(">hhih", 999, 0, 7, -1), struct.pack(">hhih", 2, 77, 8, -1)):
        bad = KafkaSocket(broker.port)
        bad.send(struct.pack(">i", len(header)) + header)
        assert bad.closed_by_peer()
    assert api_versions(good).error_code == 0
    log = broker.log()
    assert "unsupported API key 999" in log
    assert "unsupported version 77 of API ListOffsets" in log


def test_newer_api_versions_version_gets_error_35_in_a_v0_body(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    header = struct.pack(">hhih", 18, 42, 5, -1) + b"\x00\x01\x02"
    raw.send(struct.pack(">i", len(header)) + header)
    frame = raw.read_frame()
    cid, body = api.decode_response(18, 0, frame)
    assert cid == 5
    assert body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
    # The connection stays usable: the client retries at a version we serve.
    assert api_versions(raw).error_code == 0


def test_api_versions_advertises_produce_from_zero_and_every_routed_api(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    keys = {k.api_key: (k.min_version, k.max_version) for k in api_versions(raw).api_keys}
    assert keys[0] == (0, 11)
    assert keys[1] == (4, 12)
    assert keys[2] == (0, 10)
    assert keys[3] == (0, 12)
    assert keys[18] == (0, 4)
    assert keys[19] == (2, 7)
    assert {20, 22, 10, 8, 9} <= set(keys)


def test_undecodable_body_closes_that_connection_only(broker: Any) -> None:
    good = KafkaSocket(broker.port)
    bad = KafkaSocket(broker.port)
    header = struct.pack(">hhih", 3, 1, 9, -1) + b"\x00\x00\x00\x05\x00"  # 5 topics, then nothing
    bad.send(struct.pack(">i", len(header)) + header)
    assert bad.closed_by_peer()
    assert api_versions(good).error_code == 0
    assert "cannot decode Metadata v1 request" in broker.log()


def test_truncated_frame_then_disconnect_leaves_the_server_serving(broker: Any) -> None:
    bad = KafkaSocket(broker.port)
    bad.send(struct.pack(">i", 500) + b"\x00" * 100)
    bad.close()
    good = KafkaSocket(broker.port)
    assert api_versions(good).error_code == 0


def test_max_connections_closes_the_extra_connection(broker_factory: Any) -> None:
    b = broker_factory(overrides={"max.connections": "2"})
    first, second = KafkaSocket(b.port), KafkaSocket(b.port)
    assert api_versions(first).error_code == 0
    assert api_versions(second).error_code == 0
    third = KafkaSocket(b.port)
    assert third.closed_by_peer()
    second.close()
    # The slot frees once the broker has seen the close (later on a loaded machine):
    # connect again until served; a slot that never frees fails at the deadline.
    deadline = time.monotonic() + 10
    while True:
        fourth = KafkaSocket(b.port)
        try:
            assert api_versions(fourth).error_code == 0
            break
        except (ConnectionError, OSError):
            fourth.close()
            assert time.monotonic() < deadline, "closing a connection never freed its slot"
            time.sleep(0.05)


def test_idle_connections_are_closed(broker_factory: Any) -> None:
    b = broker_factory(overrides={"connections.max.idle.ms": "300"})
    raw = KafkaSocket(b.port)
    assert api_versions(raw).error_code == 0
    assert raw.closed_by_peer(timeout=5)
    assert "connections.max.idle.ms" in b.log()


def test_graceful_shutdown_finishes_in_flight_requests_and_marks_a_clean_shutdown(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topic(raw, "bye")
    cid, frame = produce_frame(raw, "bye", [b"x"] * 10)
    raw.send(frame)
    assert raw.read()[0] == cid
    fcid, fetch = raw.frame(1, 12, fetch_body("bye", 10, max_wait_ms=20000))
    raw.send(fetch)
    time.sleep(0.2)
    started = time.monotonic()
    code = broker.stop(signal.SIGTERM)
    assert code == 0
    assert time.monotonic() - started < 10  # the long poll was woken, not waited out
    got, body = raw.read()  # the in-flight fetch was answered before the socket closed
    assert got == fcid and body.responses[0].partitions[0].high_watermark == 10
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    assert "broker stopped cleanly" in broker.log()


def test_port_opens_only_when_udp_ingest_and_metrics_are_up(broker_factory: Any) -> None:
    """Whoever waits for the Kafka port (the fixture, scripts) finds the whole broker up."""
    import urllib.request

    from tests.helpers.broker import free_port_number

    udp_port, metrics_port = free_port_number(), free_port_number()
    b = broker_factory(overrides={"udp.listeners": f"127.0.0.1:{udp_port}",
                                  "metrics.listener": f"127.0.0.1:{metrics_port}"})
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        for i in range(50):
            u.sendto(b"datagram %d" % i, ("127.0.0.1", udp_port))
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read()
    assert b"chronolog_requests" in text
    raw = KafkaSocket(b.port)
    deadline = time.monotonic() + 10
    latest = -1
    while time.monotonic() < deadline and latest < 50:
        parts = raw.request(2, 7, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 0, "topics": [
            {"name": "udp", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": -1}]}]}).topics[0].partitions
        latest = parts[0].offset
        time.sleep(0.05)
    assert latest == 50


def _chronolog() -> list[str]:
    import sys

    return [sys.executable, "-c", "import sys; from client.cli import main; sys.exit(main())"]


def test_chronolog_serve_takes_a_properties_file_and_overrides(tmp_path: Any) -> None:
    import subprocess

    from tests.helpers.broker import free_port_number

    port = free_port_number()
    props = tmp_path / "server.properties"
    props.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nnum.partitions=2\n"
                     f"log.dirs={tmp_path / 'ignored'}\n")
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*_chronolog(), "serve", str(props), "--data-dir", str(tmp_path / "data"),
             "--override", "num.partitions=3"], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while f"chronolog broker ready on 127.0.0.1:{port}" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        raw = KafkaSocket(port)
        md = raw.request(3, 12, {"topics": [{"name": "auto", "topic_id": bytes(16)}],
                              "allow_auto_topic_creation": True,
                              "include_topic_authorized_operations": False})
        assert len(md.topics[0].partitions) == 3
        raw.close()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    assert (tmp_path / "data" / "auto-0").is_dir()
    assert not (tmp_path / "ignored").exists()
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_bad_configuration_exits_2_naming_the_setting(tmp_path: Any) -> None:
    import subprocess

    done = subprocess.run(
        [*_chronolog(), "serve", "--data-dir", str(tmp_path), "--override", "num.partitionz=2"],
        capture_output=True, timeout=60)
    assert done.returncode == 2
    assert b"unknown broker setting 'num.partitionz'" in done.stderr


def test_json_log_format_and_a_taken_port(tmp_path: Any) -> None:
    """--log-format json gives one JSON object per line; a taken port exits 1 saying so."""
    import json
    import subprocess
    import sys

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "broker", "--data-dir", str(tmp_path / "d"), "--port", str(port),
             "--log-format", "json"], capture_output=True, timeout=60)
    finally:
        holder.close()
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stderr.decode().splitlines() if line.strip()]
    assert lines and all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)
    assert any("could not start" in line["msg"] and "address already in use" in line["msg"]
               for line in lines)
    # Nothing was left half-open: the data directory was closed cleanly.
    assert (tmp_path / "d" / ".kafka_cleanshutdown").exists()


def test_fetch_checks_the_leader_epoch_and_offsets(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    create_topic(raw, "epochs")
    cid, frame = produce_frame(raw, "epochs", [b"a", b"b"])
    raw.send(frame)
    raw.read()

    def fetch(offset: int, epoch: int) -> Any:
        body = fetch_body("epochs", offset, max_wait_ms=0, min_bytes=0)
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
        return raw.request(1, 12, body).responses[0].partitions[0]

    assert fetch(0, 0).error_code == 0 and fetch(0, -1).error_code == 0
    assert fetch(0, 1).error_code == 75
    assert fetch(0, -2).error_code == 74
    assert fetch(3, -1).error_code == 1  # beyond the log end: OFFSET_OUT_OF_RANGE
    at_end = fetch(2, -1)
    assert (at_end.error_code, at_end.high_watermark, bytes(at_end.records)) == (0, 2, b"")


@pytest.mark.parametrize("fetch_max_bytes", [None, 2000])
def test_fetch_size_limits_follow_kip_74(broker_factory: Any, fetch_max_bytes: int | None) -> None:
    """The first partition with data returns at least one whole batch even past the
    limits (MaxBytes 0 included); later ones are cut at what is left of
    min(MaxBytes, the broker's fetch.max.bytes)."""
    from storage.records import iter_batches

    overrides = {} if fetch_max_bytes is None else {"fetch.max.bytes": str(fetch_max_bytes)}
    broker = broker_factory(overrides=overrides)
    cap = 57671680 if fetch_max_bytes is None else fetch_max_bytes  # Kafka's default: 55 MiB
    raw = KafkaSocket(broker.port)
    create_topic(raw, "sizes", partitions=2)
    for index in (0, 1):
        for _ in range(3):
            batch = build_batch([Record(0, int(time.time() * 1000), None, b"v" * 300, [])] * 2)
            resp = raw.request(0, 9, {
                "transactional_id": None, "acks": 1, "timeout_ms": 5000,
                "topic_data": [{"name": "sizes", "partition_data": [{"index": index, "records": batch}]}],
            })
            assert resp.responses[0].partition_responses[0].error_code == 0
    batch_size = len(batch)

    def fetch(max_bytes: int, partition_max: int) -> list[bytes]:
        body = fetch_body("sizes", 0, max_wait_ms=0, min_bytes=0)
        body["max_bytes"] = max_bytes
        body["topics"][0]["partitions"] = [
            {"partition": i, "current_leader_epoch": -1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": partition_max}
            for i in (0, 1)]
        parts = raw.request(1, 12, body).responses[0].partitions
        return [bytes(p.records) for p in parts]

    def expect(max_bytes: int, partition_max: int) -> list[int]:
        """Sizes Kafka's rules give: a whole first batch at least, then what is left."""
        left = max(0, min(max_bytes, cap))
        sizes = []
        for i in (0, 1):
            limit = max(0, min(partition_max, left))
            size = min(limit, 3 * batch_size)
            if i == 0 or sum(sizes) == 0:
                size = max(size, batch_size)
            sizes.append(size)
            left -= size
        return sizes

    for max_bytes, partition_max in [(10, 10), (0, 1 << 20), (-1, 1 << 20), (1 << 20, 0),
                                     (batch_size * 2 + 50, 1 << 20),
                                     (1 << 20, batch_size + 1), (1 << 20, 1 << 20)]:
        got = fetch(max_bytes, partition_max)
        assert [len(r) for r in got] == expect(max_bytes, partition_max), (max_bytes, partition_max)
        assert len(list(iter_batches(got[0]))) >= 1
    assert expect(0, 1 << 20) == [batch_size, 0]  # MaxBytes 0: exactly one batch
