"""describe --data-dir: offsets, timestamps, segments, bytes and late records match the
records written."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client import ProducerRecord, SyncClient
from client.cli import main as cli_main
from client.cli.describe import describe_offline
from storage.config import LogConfig
from storage.logdir import LogDir
from storage.records import Record, build_batch

NOW = 1_700_000_000_000


def late_by_scan(stamps: list[int]) -> tuple[int, int]:
    """Records below the largest timestamp before them, and the largest such gap."""
    late, worst = 0, 0
    for i, t in enumerate(stamps):
        if i and t < (top := max(stamps[:i])):
            late, worst = late + 1, max(worst, top - t)
    return late, worst


@settings(max_examples=10)
@given(st.lists(st.lists(st.integers(-100_000, 100_000), min_size=1, max_size=5),
                min_size=1, max_size=60))
def test_describe_offline_matches_the_records_written(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[int]]
) -> None:
    root = tmp_path_factory.mktemp("data")
    config = LogConfig.from_kafka({"segment.bytes": "2000", "index.interval.bytes": "200"})
    ld = LogDir(root, config)
    log = ld.get_or_create("metrics", 0, config)
    stamps: list[int] = []
    for deltas in batches:
        recs = [Record(0, NOW + d, b"key", b"value-" + str(d).encode(), []) for d in deltas]
        log.append(build_batch(recs), now_ms=NOW)
        stamps += [NOW + d for d in deltas]
    ld.checkpoint()
    ld.close()
    got = [asdict(p) for p in describe_offline(root, "metrics")]
    logs = sorted((root / "metrics-0").glob("*.log"))
    assert got == [{
        "partition": 0,
        "log_start_offset": 0,
        "log_end_offset": len(stamps),
        "segments": len(logs),
        "bytes": sum(p.stat().st_size for p in logs),
        "first_timestamp": stamps[0],
        "last_timestamp": stamps[-1],
        "max_timestamp": max(stamps),
        "late_records": late_by_scan(stamps)[0],
        "max_lateness_ms": late_by_scan(stamps)[1],
    }]


def test_describe_unknown_topic_fails_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["describe", "--topic", "nope", "--data-dir", str(tmp_path)]) == 1
    assert "topic 'nope' not found" in capsys.readouterr().err


def test_describe_cli_prints_json_for_scripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = LogConfig()
    ld = LogDir(tmp_path, config)
    for p in range(2):
        ld.get_or_create("t", p, config).append(
            build_batch([Record(0, NOW + p, None, b"v", [])]), now_ms=NOW)
    ld.close()
    assert cli_main(["describe", "--topic", "t", "--data-dir", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(p["partition"], p["log_end_offset"], p["max_timestamp"]) for p in out["partitions"]] \
        == [(0, 1, NOW), (1, 1, NOW + 1)]
    assert cli_main(["describe", "--topic", "t", "--data-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == "Topic: t  partitions: 2" and len(table) == 4


def test_describe_online_agrees_with_offline_on_the_same_data(
    broker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    stamps = [NOW + d for d in (500, -200, 900, 100, 900, -700, 50)]
    with SyncClient(broker.bootstrap) as c:
        c.create_topic("both", 2)
        for i, ts in enumerate(stamps):
            c.produce("both", [ProducerRecord(key=f"k{i}", value=b"v", timestamp=ts)],
                      partition=i % 2)
    assert cli_main(["describe", "--topic", "both", "--bootstrap-server", broker.bootstrap,
                     "--json"]) == 0
    online = json.loads(capsys.readouterr().out)["partitions"]
    broker.stop()
    offline = [asdict(p) for p in describe_offline(broker.data_dir, "both")]
    for p in (0, 1):
        mine = stamps[p::2]
        want = {"partition": p, "log_start_offset": 0, "log_end_offset": len(mine),
                "first_timestamp": mine[0], "last_timestamp": mine[-1],
                "max_timestamp": max(mine), "late_records": late_by_scan(mine)[0],
                "max_lateness_ms": late_by_scan(mine)[1]}
        assert {k: online[p][k] for k in want} == want
        assert {k: offline[p][k] for k in want} == want
        assert online[p]["segments"] is None and offline[p]["segments"] == 1
