"""Go services' Kafka clients against Chronolog: franz-go (kgo + kadm) and IBM/sarama.

tests/go/franzcheck and tests/go/saramacheck are small programs, built here with
``go build`` (modules pinned by tests/go/go.mod, fetched through the Go proxy into
``.cache/go``). Each prints one JSON line per fact it saw; every line is checked against
an oracle computed from the program's own "produced" lines (the timestamps come from a
random seed, out of order and with repeats):

- franz-go: ProduceSync with explicit timestamps; ``kadm.ListOffsetsAfterMilli`` for
  every produced timestamp, one ms after each and both ends (no match: kadm asks again
  for the end offset); ``ListEndOffsets``; direct consumers starting at
  ``NewOffset().AfterMilli(t)`` (the first record each partition delivers); a classic consumer group that reads all and
  commits (``kadm.FetchOffsets``); three transactions (commit, abort, commit) read
  ``read_committed`` and ``read_uncommitted``.
- sarama: SyncProducer with timestamps; ``Client.GetOffset`` by time (no match: -1) and
  OffsetNewest/OffsetOldest; a classic ``ConsumerGroup`` that reads all and commits
  (``ListConsumerGroupOffsets``).

Under ``make test-ecosystem`` the same programs also run against the real Apache Kafka
(tests/ecosystem/kafka_peer.py), checked by the same oracle.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.ecosystem.golang import GoError, build_programs

Line = dict[str, Any]
RECORD = ("partition", "offset", "timestamp", "key", "value")
WINDOW_MS = {"franzcheck": 600_000, "saramacheck": 300_000}  # timestamps: base + [0, window)


@pytest.fixture(scope="module")
def programs() -> dict[str, Path]:
    try:
        return build_programs()
    except GoError as e:
        pytest.fail(f"the Go programs could not be built: {e}", pytrace=False)


@pytest.fixture(scope="module", params=[
    "chronolog", pytest.param("kafka", marks=pytest.mark.ecosystem_full)])
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The broker under test: Chronolog, or (full set) the reference Kafka."""
    fixture = "chronolog" if request.param == "chronolog" else "kafka_node"
    return str(request.getfixturevalue(fixture).bootstrap)


def run(program: Path, bootstrap: str, seed: int) -> tuple[list[Line], set[int]]:
    """Run a program; its lines, and the times it must have asked offsets for."""
    prefix = f"{program.name}-{time.time_ns() % 10**9}"
    base = int(time.time() * 1000) - 3_600_000
    proc = subprocess.run([str(program), bootstrap, prefix, str(base), str(seed)],
                          capture_output=True, text=True, timeout=180)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines and lines[-1] == {"event": "done"}, (
        f"{program.name} (seed {seed}) exited {proc.returncode}:\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    stamps = {r["timestamp"] for r in events(lines, "produced")}
    assert stamps and all(base <= t < base + WINDOW_MS[program.name] for t in stamps)
    return lines, stamps | {t + 1 for t in stamps} | {base - 1, base + WINDOW_MS[program.name] + 1}


def events(lines: list[Line], name: str) -> list[Line]:
    return [line for line in lines if line["event"] == name]


def produced_by_partition(lines: list[Line]) -> dict[int, list[Line]]:
    """The produced records per partition, checked to sit at offsets 0, 1, 2, ..."""
    out: dict[int, list[Line]] = defaultdict(list)
    for r in events(lines, "produced"):
        out[r["partition"]].append({k: r[k] for k in RECORD})
    for p, records in out.items():
        assert [r["offset"] for r in records] == list(range(len(records))), p
    return dict(out)


def first_at_or_after(records: list[Line], ts: int) -> Line | None:
    """The brute-force oracle of ListOffsets by time: the lowest offset with ts >= t."""
    return next((r for r in records if r["timestamp"] >= ts), None)


def check_group(lines: list[Line], produced: dict[int, list[Line]]) -> None:
    consumed: dict[int, list[Line]] = defaultdict(list)
    for r in events(lines, "groupConsumed"):
        consumed[r["partition"]].append({k: r[k] for k in RECORD})
    assert dict(consumed) == produced  # everything, once, in offset order per partition
    committed = {c["partition"]: c["offset"] for c in events(lines, "groupCommitted")}
    assert committed == {p: len(rs) for p, rs in produced.items()}


def test_franz_go_produce_list_offsets_group_and_transactions(
        programs: dict[str, Path], bootstrap: str) -> None:
    seed = random.randrange(2**31)
    lines, queries = run(programs["franzcheck"], bootstrap, seed)
    assert not events(lines, "error")
    produced = produced_by_partition(lines)
    assert len(produced) == 3, seed

    ends = {e["partition"]: e["offset"] for e in events(lines, "endOffset")}
    assert ends == {p: len(rs) for p, rs in produced.items()}

    after = events(lines, "afterMilli")
    assert sorted((a["query"], a["partition"]) for a in after) == sorted(
        (q, p) for q in queries for p in produced)
    for a in after:
        hit = first_at_or_after(produced[a["partition"]], a["query"])
        want = ({"offset": hit["offset"], "timestamp": hit["timestamp"]} if hit
                else {"offset": ends[a["partition"]], "timestamp": -1})
        assert {"offset": a["offset"], "timestamp": a["timestamp"], "error": a["error"]} == {
            **want, "error": ""}, (seed, a)

    from_time = events(lines, "fromTime")  # direct consumers at AfterMilli(t)
    assert len({a["query"] for a in from_time}) >= 2, seed
    assert sorted((f["query"], f["partition"]) for f in from_time) == sorted(
        (q, p) for q in {f["query"] for f in from_time} for p in produced)
    for f in from_time:
        hit = first_at_or_after(produced[f["partition"]], f["query"])
        assert hit is not None and (f["offset"], f["timestamp"]) == (
            hit["offset"], hit["timestamp"]), (seed, f)

    check_group(lines, produced)

    txn = events(lines, "txnProduced")
    assert [t["offset"] for t in txn] == sorted(t["offset"] for t in txn)
    committed = [{"offset": t["offset"], "value": t["value"]} for t in txn
                 if t["outcome"] == "commit"]
    everything = [{"offset": t["offset"], "value": t["value"]} for t in txn]
    assert len(committed) < len(everything)  # one transaction was aborted
    for isolation, want_read in (("read_committed", committed), ("read_uncommitted", everything)):
        read = [{"offset": r["offset"], "value": r["value"]} for r in events(lines, "txnRead")
                if r["isolation"] == isolation]
        assert read == want_read, isolation


def test_sarama_produce_get_offset_and_group(programs: dict[str, Path], bootstrap: str) -> None:
    seed = random.randrange(2**31)
    lines, queries = run(programs["saramacheck"], bootstrap, seed)
    assert not events(lines, "error")
    produced = produced_by_partition(lines)
    assert len(produced) == 2, seed

    asked = events(lines, "getOffset")
    assert {(g["query"], g["partition"]) for g in asked} == {
        (q, p) for q in queries | {-1, -2} for p in produced}
    for g in asked:
        records = produced[g["partition"]]
        if g["query"] == -1:  # OffsetNewest
            want = len(records)
        elif g["query"] == -2:  # OffsetOldest
            want = 0
        else:
            hit = first_at_or_after(records, g["query"])
            want = hit["offset"] if hit else -1
        assert g["offset"] == want, (seed, g)

    check_group(lines, produced)
