"""chronolog mirror between two real brokers: exact copies, time lookups that agree, resumption.

The source is filled through the bundled client with keys, null keys and values,
headers, out-of-order CreateTime and a mix of codecs; the oracle is the source
itself, read back record by record. The mirror always runs as the installed
``chronolog`` command in its own process, so it can be killed like a real one.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client import KafkaError, ProducerRecord, SyncClient

CHRONOLOG = str(Path(sys.executable).with_name("chronolog"))
BASE_TS = 1_700_000_000_000


def fill(bootstrap: str, topic: str, partitions: int, batches: int, seed: int) -> None:
    rnd = random.Random(seed)
    with SyncClient(bootstrap) as c:
        c.create_topic(topic, partitions)
        for i in range(batches):
            recs = []
            for j in range(rnd.randint(1, 5)):
                key = None if rnd.random() < 0.2 else f"user-{rnd.randint(0, 50)}".encode()
                value = None if rnd.random() < 0.05 else f"event {i}.{j} ".encode() * rnd.randint(1, 8)
                headers: list[tuple[str, bytes | str | None]] = (
                    [("trace", f"t{i}".encode()), ("empty", None)] if rnd.random() < 0.5 else [])
                ts = BASE_TS + i * 1000 + rnd.randint(-5000, 5000)  # out of order on purpose
                recs.append(ProducerRecord(key=key, value=value, headers=headers, timestamp=ts))
            codec = rnd.choice([None, None, "gzip", "lz4", "zstd", "snappy"])
            c.produce(topic, recs, partition=i % partitions, compression=codec)


def source_and_target(
    broker_factory: Callable[..., Any], topic: str, partitions: int, batches: int, seed: int
) -> tuple[Any, Any]:
    """Two brokers: "src" with ``topic`` written by fill(), and an empty "dst"."""
    src, dst = broker_factory(name="src"), broker_factory(name="dst")
    fill(src.bootstrap, topic, partitions, batches, seed)
    return src, dst


def read_partitions(bootstrap: str, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    with SyncClient(bootstrap) as c:
        parts = c.partitions_for(topic)
        ends = c.latest(topic, parts)
        return {
            p: [(r.offset, r.key, r.value, list(r.headers), r.timestamp)
                for r in c.consume(topic, p, 0, ends[p])]
            for p in parts
        }


def lookups(bootstrap: str, topic: str, times: list[int]) -> list[dict[int, Any]]:
    with SyncClient(bootstrap) as c:
        return [c.offsets_for_times(topic, t) for t in times]


def mirror(source: str, target: str, topic: str, *extra: str,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHRONOLOG, "mirror", "--source", source, "--target", target,
                           "--topics", topic, *extra], capture_output=True, text=True,
                          timeout=timeout)


def mirrored_once(
    broker_factory: Callable[..., Any], tmp_path: Path, topic: str, partitions: int,
    batches: int, seed: int,
) -> tuple[Any, Any, Path]:
    """source_and_target(), then one whole mirror run that saves its progress in a state
    file; returns the two brokers and that file."""
    src, dst = source_and_target(broker_factory, topic, partitions, batches, seed)
    state = tmp_path / "state.json"
    res = mirror(src.bootstrap, dst.bootstrap, topic, "--state", str(state))
    assert res.returncode == 0, res.stdout + res.stderr
    return src, dst, state


def set_saved_progress(state: Path, partition: str, source_next: int, target_next: int) -> None:
    """Overwrite one partition's progress in the mirror's state file (key "topic/p"), as a
    crash before the state was written, or a stale state file, leaves it."""
    doc = json.loads(state.read_text())
    doc["partitions"][partition] = {"source_next": source_next, "target_next": target_next}
    state.write_text(json.dumps(doc))


def interesting_times(data: dict[int, list[tuple[Any, ...]]]) -> list[int]:
    stamps = sorted({r[4] for rows in data.values() for r in rows})
    picks = set(stamps[:: max(1, len(stamps) // 40)]) | {stamps[0] - 1, stamps[-1], stamps[-1] + 1}
    return sorted(picks | {t + 1 for t in list(picks)[:20]})


def test_mirror_copies_keys_values_headers_and_create_time_exactly(
    broker_factory: Callable[..., Any], tmp_path: Path
) -> None:
    src, dst, state = mirrored_once(broker_factory, tmp_path, "orders", 2, 120, seed=1)
    want, got = read_partitions(src.bootstrap, "orders"), read_partitions(dst.bootstrap, "orders")
    assert got == want  # the target started empty, so even the offsets agree
    times = interesting_times(want)
    assert lookups(dst.bootstrap, "orders", times) == lookups(src.bootstrap, "orders", times)
    saved = json.loads(state.read_text())["partitions"]
    assert {k: v["source_next"] for k, v in saved.items()} == {
        f"orders/{p}": len(rows) for p, rows in want.items()}
    # Running again copies nothing more: the state says everything is there.
    again = mirror(src.bootstrap, dst.bootstrap, "orders", "--state", str(state))
    assert again.returncode == 0 and "mirrored 0 records" in again.stdout
    assert read_partitions(dst.bootstrap, "orders") == want


def test_mirror_killed_midway_resumes_without_gaps_or_duplicates(
    broker_factory: Callable[..., Any], tmp_path: Path
) -> None:
    src, dst = source_and_target(broker_factory, "clicks", 2, 1200, seed=2)
    want = read_partitions(src.bootstrap, "clicks")
    total = sum(len(v) for v in want.values())
    state = tmp_path / "state.json"
    proc = subprocess.Popen(
        [CHRONOLOG, "mirror", "--source", src.bootstrap, "--target", dst.bootstrap,
         "--topics", "clicks", "--state", str(state), "--checkpoint-interval", "0.01"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        copied = 0
        while time.monotonic() < deadline:
            try:
                parts = json.loads(state.read_text())["partitions"]
                copied = sum(v["source_next"] for v in parts.values())
            except (OSError, ValueError, KeyError):
                copied = 0
            if copied > total // 10:
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    assert 0 < copied < total, "the mirror must be killed midway for this test to mean anything"
    partial = read_partitions(dst.bootstrap, "clicks")
    assert sum(len(v) for v in partial.values()) < total
    res = mirror(src.bootstrap, dst.bootstrap, "clicks", "--state", str(state))
    assert res.returncode == 0, res.stdout + res.stderr
    assert read_partitions(dst.bootstrap, "clicks") == want


def test_mirror_state_that_lags_the_target_is_reconciled_not_duplicated(
    broker_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A crash after the target acknowledged but before the state was written."""
    src, dst, state = mirrored_once(broker_factory, tmp_path, "pay", 1, 40, seed=3)
    want = read_partitions(src.bootstrap, "pay")
    # Roll the saved progress back to the start of batch 10, as if the last writes were lost.
    with SyncClient(src.bootstrap) as c:
        raw = c.fetch_raw("pay", 0, 0, 1 << 20).records_bytes
    from storage.records import iter_batches

    back = [h.base_offset for _, h in iter_batches(raw)][10]
    set_saved_progress(state, "pay/0", back, back)
    fill_more = [ProducerRecord(key=b"late", value=b"after", timestamp=BASE_TS + 99_000)]
    with SyncClient(src.bootstrap) as c:
        c.produce("pay", fill_more, partition=0)
    res = mirror(src.bootstrap, dst.bootstrap, "pay", "--state", str(state))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(want[0]) - back} records found already copied" in res.stdout
    assert read_partitions(dst.bootstrap, "pay") == read_partitions(src.bootstrap, "pay")


def test_mirror_since_starts_at_the_time_resolved_by_list_offsets(
    broker_factory: Callable[..., Any],
) -> None:
    src, dst = source_and_target(broker_factory, "since", 2, 60, seed=4)
    since = BASE_TS + 30_000
    with SyncClient(src.bootstrap) as c:
        starts = c.offsets_for_times("since", since)
    res = mirror(src.bootstrap, dst.bootstrap, "since", "--since", str(since))
    assert res.returncode == 0, res.stdout + res.stderr
    want = read_partitions(src.bootstrap, "since")
    got = read_partitions(dst.bootstrap, "since")
    for p, rows in want.items():
        hit = starts[p]
        first = hit[0] if hit is not None else len(rows)
        assert [r[1:] for r in got[p]] == [r[1:] for r in rows[first:]]


def test_mirror_refuses_a_target_written_by_someone_else(
    broker_factory: Callable[..., Any], tmp_path: Path
) -> None:
    src, dst, state = mirrored_once(broker_factory, tmp_path, "x", 1, 10, seed=5)
    set_saved_progress(state, "x/0", 0, 0)
    with SyncClient(dst.bootstrap) as c:
        c.produce("x", [ProducerRecord(key=b"intruder", value=b"!")], partition=0)
    res = mirror(src.bootstrap, dst.bootstrap, "x", "--state", str(state))
    assert res.returncode == 1
    assert "something else writes to the target partition" in res.stderr or \
        "could be matched" in res.stderr


def test_mirror_follow_copies_new_records_and_stops_cleanly_on_sigterm(
    broker_factory: Callable[..., Any], tmp_path: Path
) -> None:
    src, dst = source_and_target(broker_factory, "live", 2, 20, seed=6)
    state = tmp_path / "state.json"
    proc = subprocess.Popen(
        [CHRONOLOG, "mirror", "--source", src.bootstrap, "--target", dst.bootstrap,
         "--topics", "live", "--state", str(state), "--follow", "--checkpoint-interval", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def caught_up() -> bool:
            with SyncClient(src.bootstrap) as s, SyncClient(dst.bootstrap) as d:
                try:
                    return s.latest("live") == d.latest("live")
                except KafkaError:  # the mirror has not created the target topic yet
                    return False

        for round_ in range(3):
            with SyncClient(src.bootstrap) as c:
                c.produce("live", [ProducerRecord(key=f"r{round_}", value=b"new",
                                                  timestamp=BASE_TS + 500_000 + round_)],
                          partition=round_ % 2)
            deadline = time.monotonic() + 30
            while not caught_up():
                assert time.monotonic() < deadline, "the following mirror did not catch up"
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out + err
    assert "stopped by signal" in out
    want = read_partitions(src.bootstrap, "live")
    assert read_partitions(dst.bootstrap, "live") == want
    saved = json.loads(state.read_text())["partitions"]
    assert {k: v["source_next"] for k, v in saved.items()} == {
        f"live/{p}": len(rows) for p, rows in want.items()}


def test_mirror_rebuilds_log_append_time_and_idempotent_batches_keeping_their_times(
    broker_factory: Callable[..., Any],
) -> None:
    from kafka import KafkaProducer

    src, dst = broker_factory(name="src"), broker_factory(name="dst")
    with SyncClient(src.bootstrap) as c:
        c.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
        c.create_topic("idem", 1)
        for i in range(15):
            c.produce("lat", [ProducerRecord(key=f"k{i}", value=b"v", timestamp=BASE_TS + i)],
                      partition=0)
            time.sleep(0.002)  # distinct append times
    producer = KafkaProducer(bootstrap_servers=src.bootstrap, enable_idempotence=True, acks="all")
    try:
        for i in range(30):
            producer.send("idem", key=f"k{i}".encode(), value=b"x" * i, partition=0,
                          timestamp_ms=BASE_TS - i * 1000, headers=[("h", b"1")])
        producer.flush(30)
    finally:
        producer.close(10)
    with SyncClient(src.bootstrap) as c:
        raw = c.fetch_raw("idem", 0, 0, 1 << 20).records_bytes
    from storage.records import iter_batches

    assert all(h.producer_id >= 0 for _, h in iter_batches(raw)), "kafka-python must be idempotent"
    res = mirror(src.bootstrap, dst.bootstrap, "lat,idem")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 forwarded as is" in res.stdout  # every batch had to be rebuilt
    for topic in ("lat", "idem"):
        # Equal timestamps also show the target topic is CreateTime (LogAppendTime would
        # have replaced them with the target's clock).
        want = read_partitions(src.bootstrap, topic)
        assert read_partitions(dst.bootstrap, topic) == want
        times = interesting_times(want)
        assert lookups(dst.bootstrap, topic, times) == lookups(src.bootstrap, topic, times)


def test_mirror_refuses_a_target_topic_with_fewer_partitions(
    broker_factory: Callable[..., Any],
) -> None:
    src, dst = source_and_target(broker_factory, "wide", 3, 6, seed=7)
    with SyncClient(dst.bootstrap) as c:
        c.create_topic("wide", 2)
    res = mirror(src.bootstrap, dst.bootstrap, "wide")
    assert res.returncode == 1
    assert "target topic 'wide' lacks partitions [2]" in res.stderr
    with SyncClient(dst.bootstrap) as c:
        assert c.latest("wide") == {0: 0, 1: 0}  # nothing was copied


def test_mirror_copies_only_the_configs_set_on_the_source_topic(
    broker_factory: Callable[..., Any],
) -> None:
    """A config set on the source topic is set on the target topic; one the source only
    inherits from its broker (log.segment.bytes here) is left to the target's broker."""
    src = broker_factory(name="src", overrides={"log.segment.bytes": "2000000"})
    dst = broker_factory(name="dst")
    with SyncClient(src.bootstrap) as c:
        c.create_topic("configured", 1, {"retention.ms": "86400000"})
        c.produce("configured", [ProducerRecord(value=b"v", timestamp=BASE_TS)], partition=0)
        source = c.describe_config_entries("configured")
    assert source["segment.bytes"].value == "2000000"
    assert source["segment.bytes"].source != "DYNAMIC_TOPIC_CONFIG"
    res = mirror(src.bootstrap, dst.bootstrap, "configured")
    assert res.returncode == 0, res.stdout + res.stderr
    with SyncClient(dst.bootstrap) as c:
        target = c.describe_config_entries("configured")
    copied = {n for n, e in source.items() if e.source == "DYNAMIC_TOPIC_CONFIG"}
    assert copied >= {"retention.ms"}
    for name, entry in target.items():
        if name in copied and name != "message.timestamp.type":
            assert (entry.value, entry.source) == (source[name].value, "DYNAMIC_TOPIC_CONFIG")
    assert target["segment.bytes"].source != "DYNAMIC_TOPIC_CONFIG"
    assert target["segment.bytes"].value != "2000000"
