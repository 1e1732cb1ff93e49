"""The user CLI run as real subprocesses (the installed ``chronolog`` script) against the broker.

Outputs are checked against a brute-force oracle over the lines the test produced.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from client_oracle import Produced, by_partition, first_at_or_after, time_range, unique_topic

from client import SyncClient
from client.timeparse import format_time

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
# Two days ago: in the past and inside the default 7-day retention.
BASE = (time.time_ns() // 1_000_000 - 2 * 86_400_000) // 1000 * 1000


def cli(*args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(
        [CHRONOLOG, *args], input=stdin, capture_output=True, timeout=120
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"chronolog {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()}"
        )
    return proc


@pytest.fixture
def broker(shared_broker):  # type: ignore[no-untyped-def]
    """One broker for the module: every test here makes its own topics (unique_topic)."""
    return shared_broker


@pytest.fixture
def dataset(broker, tmp_path: Path) -> tuple[str, list[Produced]]:  # type: ignore[no-untyped-def]
    """A 3-partition topic filled by `chronolog produce` from a key<TAB>ts<TAB>value file."""
    topic = unique_topic("cli")
    out = cli("topics", "create", topic, "--partitions", "3", "--bootstrap-server", broker.bootstrap)
    assert f"Created topic {topic}" in out.stdout.decode()
    rng = random.Random(1234)
    rows = []
    for i in range(400):
        key = f"key-{rng.randrange(25)}"
        ts = BASE + rng.randrange(0, 20_000)  # out of order, with repeats
        ts_text = str(ts) if i % 2 else format_time(ts).replace("Z", "+00:00")
        rows.append((key, ts, f"value {i}\tcol", ts_text))
    path = tmp_path / "in.tsv"
    path.write_bytes(b"".join(f"{k}\t{t}\t{v}\n".encode() for k, _, v, t in rows))
    out = cli(
        "produce", topic, "--file", str(path), "--key-column", "1", "--timestamp-column", "2",
        "--print-offsets", "--linger-ms", "2", "--batch-bytes", "4000",
        "--bootstrap-server", broker.bootstrap,
    )
    placed = [tuple(map(int, line.split("\t"))) for line in out.stdout.decode().splitlines()]
    assert len(placed) == len(rows)
    log = [
        Produced(p, o, ts, k.encode(), v.encode())
        for (p, o), (k, ts, v, _) in zip(placed, rows, strict=True)
    ]
    # Offsets per partition are dense and in line order.
    for recs in by_partition(log).values():
        assert [r.offset for r in recs] == list(range(len(recs)))
    return topic, log


def test_topics_list_and_describe(broker, dataset) -> None:  # type: ignore[no-untyped-def]
    topic, log = dataset
    names = cli("topics", "list", "--bootstrap-server", broker.bootstrap).stdout.decode().split()
    assert topic in names
    desc = json.loads(cli("topics", "describe", topic, "--format", "json",
                          "--bootstrap-server", broker.bootstrap).stdout)
    counts = {p: len(r) for p, r in by_partition(log).items()}
    assert [(d["partition"], d["log_start_offset"], d["log_end_offset"]) for d in desc["partitions"]] == [
        (p, 0, counts.get(p, 0)) for p in range(3)
    ]
    table = cli("topics", "describe", topic, "--bootstrap-server", broker.bootstrap).stdout.decode()
    assert f"Topic: {topic}  Partitions: 3" in table


def test_offsets_table_and_json_match_the_oracle(broker, dataset) -> None:  # type: ignore[no-untyped-def]
    topic, log = dataset
    parts = by_partition(log)
    rng = random.Random(99)
    times = [BASE - 5, BASE + 20_005] + [rng.choice(log).timestamp + rng.choice((-1, 0, 1)) for _ in range(6)]
    for t in times:
        text = str(t) if t % 2 else format_time(t)
        got = json.loads(cli("offsets", topic, "--time", text, "--format", "json",
                             "--bootstrap-server", broker.bootstrap).stdout)
        for row in got["partitions"]:
            hit = first_at_or_after(parts[row["partition"]], t)
            assert (row["offset"], row["timestamp"]) == (hit if hit else (-1, -1)), (t, row)
    t = times[2]
    table = cli("offsets", topic, "--time", str(t), "--bootstrap-server", broker.bootstrap)
    lines = table.stdout.decode().splitlines()
    assert lines[0].split() == ["PARTITION", "OFFSET", "TIMESTAMP"]
    for line, p in zip(lines[1:], range(3), strict=True):
        hit = first_at_or_after(parts[p], t)
        assert line.split() == [str(p), str(hit[0]) if hit else "-1",
                                format_time(hit[1]) if hit else "-"]


def test_consume_time_range_json_matches_the_oracle(broker, dataset) -> None:  # type: ignore[no-untyped-def]
    topic, log = dataset
    parts = by_partition(log)
    start, end = BASE + 5_000, BASE + 12_000
    out = cli("consume", topic, "--from-time", format_time(start), "--until", str(end),
              "--format", "json", "--bootstrap-server", broker.bootstrap)
    got = [json.loads(line) for line in out.stdout.decode().splitlines()]
    want = [r for p in sorted(parts) for r in time_range(parts[p], start, end)]
    assert [(g["partition"], g["offset"], g["timestamp"], g["key"], g["value"]) for g in got] == [
        (r.partition, r.offset, r.timestamp, r.key.decode(), r.value.decode()) for r in want  # type: ignore[union-attr]
    ]
    assert all(g["timestamp_iso"] == format_time(g["timestamp"]) for g in got)


def test_consume_text_from_offset_with_max(broker, dataset) -> None:  # type: ignore[no-untyped-def]
    topic, log = dataset
    recs = by_partition(log)[1]
    out = cli("consume", topic, "--partition", "1", "--from-offset", "3", "--max", "7",
              "--bootstrap-server", broker.bootstrap)
    assert out.stdout.splitlines() == [r.value for r in recs[3:10]]
    out = cli("consume", topic, "--partition", "1", "--from-offset", "3", "--max", "2",
              "--print-timestamp", "--print-key", "--bootstrap-server", broker.bootstrap)
    assert out.stdout.splitlines() == [
        format_time(r.timestamp).encode() + b"\t" + (r.key or b"") + b"\t" + (r.value or b"")
        for r in recs[3:5]
    ]


def test_consume_keeps_non_utf8_bytes(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("bin")
    with SyncClient(broker.bootstrap) as c:
        from client import ProducerRecord

        c.create_topic(topic)
        c.produce(topic, [ProducerRecord(key=b"\xff", value=b"\x00\xfe", timestamp=BASE)], partition=0)
    out = cli("consume", topic, "--format", "json", "--bootstrap-server", broker.bootstrap)
    row = json.loads(out.stdout)
    assert row["key_base64"] == "/w==" and row["value_base64"] == "AP4="
    assert "key" not in row and "value" not in row


def test_produce_plain_lines_from_stdin(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("stdin")
    cli("topics", "create", topic, "--bootstrap-server", broker.bootstrap)
    lines = [b"hello", b"", b"tab\tinside", b"crlf"]
    out = cli("produce", topic, "--acks", "-1", "--compression", "zstd", "--idempotent",
              "--bootstrap-server", broker.bootstrap,
              stdin=b"\n".join(lines[:3]) + b"\ncrlf\r\n")
    assert "Produced 4 record(s)" in out.stderr.decode()
    got = cli("consume", topic, "--bootstrap-server", broker.bootstrap).stdout
    assert got.split(b"\n")[:-1] == lines


def test_errors_are_clear_and_exit_nonzero(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad_time = cli("offsets", "x", "--time", "2025-01-01T00:00:00",
                   "--bootstrap-server", broker.bootstrap, check=False)
    assert bad_time.returncode == 2 and b"no time zone" in bad_time.stderr
    unknown = cli("offsets", "no-such-topic", "--time", "now",
                  "--bootstrap-server", broker.bootstrap, check=False)
    assert unknown.returncode == 1 and b"UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr
    topic = unique_topic("badline")
    cli("topics", "create", topic, "--bootstrap-server", broker.bootstrap)
    bad_line = cli("produce", topic, "--timestamp-column", "1",
                   "--bootstrap-server", broker.bootstrap,
                   stdin=b"%d\tok\nyesterday\tbad\n" % BASE, check=False)
    assert bad_line.returncode == 2 and b"line 2" in bad_line.stderr
    # What came before the bad line was produced, and only that.
    assert cli("consume", topic, "--bootstrap-server", broker.bootstrap).stdout == b"ok\n"
    exists = cli("topics", "create", topic, "--bootstrap-server", broker.bootstrap, check=False)
    assert exists.returncode == 1 and b"TOPIC_ALREADY_EXISTS" in exists.stderr
    assert cli("topics", "create", topic, "--if-not-exists",
               "--bootstrap-server", broker.bootstrap).returncode == 0


def test_relative_times_parse_as_values_not_options(broker, dataset) -> None:  # type: ignore[no-untyped-def]
    topic, log = dataset  # every record is from two days ago: nothing is at or after "a day ago"
    out = cli("offsets", topic, "--time", "-1d", "--format", "json",
              "--bootstrap-server", broker.bootstrap)
    assert [r["offset"] for r in json.loads(out.stdout)["partitions"]] == [-1, -1, -1]
    out = cli("consume", topic, "--from-time", "-15m", "--bootstrap-server", broker.bootstrap)
    assert out.stdout == b""
    out = cli("consume", topic, "--from-time", str(BASE - 1), "--until", "-1h", "--max", "5",
              "--format", "json", "--bootstrap-server", broker.bootstrap)
    parts = by_partition(log)
    want = [r for p in sorted(parts) for r in time_range(parts[p], BASE, 2**62)][:5]
    assert [(g["partition"], g["offset"]) for g in map(json.loads, out.stdout.splitlines())] == [
        (r.partition, r.offset) for r in want
    ]


def test_follow_prints_new_records_from_every_partition_and_stops_at_until(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("follow")
    until = BASE + 1000
    with SyncClient(broker.bootstrap) as c:
        from client import ProducerRecord

        c.create_topic(topic, partitions=2)
        c.produce(topic, [ProducerRecord(value=b"old0", timestamp=BASE)], partition=0)
        proc = subprocess.Popen(
            [CHRONOLOG, "consume", topic, "--follow", "--from-time", str(BASE), "--until", str(until),
             "--format", "json", "--bootstrap-server", broker.bootstrap],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            first = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
            assert (first["partition"], first["value"]) == (0, "old0")
            # New records on both partitions arrive while it follows; a record at or
            # after --until ends each partition (later ones are not printed).
            c.produce(topic, [ProducerRecord(value=b"new1", timestamp=BASE + 5),
                              ProducerRecord(value=b"stop1", timestamp=until),
                              ProducerRecord(value=b"after1", timestamp=BASE + 6)], partition=1)
            c.produce(topic, [ProducerRecord(value=b"new0", timestamp=BASE + 7),
                              ProducerRecord(value=b"stop0", timestamp=until + 1)], partition=0)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    rows = [json.loads(line) for line in out.decode().splitlines()]
    assert sorted((r["partition"], r["value"]) for r in rows) == [(0, "new0"), (1, "new1")]
    assert proc.returncode == 0, err


def test_produce_headers_partition_and_value_column(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("cols")
    cli("topics", "create", topic, "--partitions", "2", "--bootstrap-server", broker.bootstrap)
    out = cli("produce", topic, "--separator", ",", "--value-column", "3", "--timestamp-column", "1",
              "--partition", "1", "--header", "source=cli", "--header", "v=2", "--print-offsets",
              "--bootstrap-server", broker.bootstrap,
              stdin=b"%d,ignored,first\n%d,ignored,second\n" % (BASE, BASE + 5))
    assert out.stdout.decode().splitlines() == ["1\t0", "1\t1"]
    rows = [json.loads(line) for line in cli(
        "consume", topic, "--partition", "1", "--format", "json",
        "--bootstrap-server", broker.bootstrap).stdout.splitlines()]
    assert [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in rows] == [
        (0, BASE, None, "first"), (1, BASE + 5, None, "second")]
    assert rows[0]["headers"] == [{"key": "source", "value": "cli"}, {"key": "v", "value": "2"}]


def test_produce_from_an_open_pipe_sends_each_line_without_waiting_for_eof(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("tail")
    cli("topics", "create", topic, "--bootstrap-server", broker.bootstrap)
    proc = subprocess.Popen(
        [CHRONOLOG, "produce", topic, "--bootstrap-server", broker.bootstrap],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    try:
        with SyncClient(broker.bootstrap) as c:
            for i in range(3):
                proc.stdin.write(b"line %d\n" % i)
                proc.stdin.flush()
                deadline = time.monotonic() + 20
                while c.latest(topic)[0] < i + 1:  # arrives while stdin is still open
                    assert time.monotonic() < deadline, f"line {i} was not sent"
                    time.sleep(0.05)
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
    assert cli("consume", topic, "--bootstrap-server", broker.bootstrap).stdout == b"line 0\nline 1\nline 2\n"
