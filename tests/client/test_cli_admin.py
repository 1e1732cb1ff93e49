"""``chronolog topics alter`` and ``chronolog delete-records``, run as a user runs them.

The walkthrough in docs/admin.md is executed line by line against a real broker and
its output compared with the documented one, so the documentation cannot drift; the
other tests check what the commands did through a second client (kafka-python), with
expectations derived from the records produced.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer
from kafka import TopicPartition as KpTP
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
DOC = Path(__file__).resolve().parents[2] / "docs" / "admin.md"


def transcript() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of every ``$ `` line in the doc's console block."""
    block = re.search(r"```console\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    steps: list[tuple[str, list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def test_the_documented_walkthrough_runs_as_shown(broker: Any) -> None:
    steps = transcript()
    assert len(steps) >= 8
    for command, expected in steps:
        assert command.rstrip().split("|")[-1].strip().startswith("chronolog ")
        line = command.replace("chronolog ", f"{CHRONOLOG} ") + f" --bootstrap-server {broker.bootstrap}"
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", line], capture_output=True, timeout=120)
        out = (proc.stdout + proc.stderr).decode().splitlines()
        assert out == expected, command
        failed = bool(expected) and expected[0].startswith("error:")
        assert proc.returncode == (1 if failed else 0), command


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([CHRONOLOG, *args], capture_output=True, timeout=120)


def test_topics_alter_changes_configs_and_partitions_as_another_client_sees_them(broker: Any) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    assert cli("topics", "create", "alt", "--config", "retention.ms=600000", *b).returncode == 0
    dry = cli("topics", "alter", "alt", "--config", "retention.ms=1", "--partitions", "3",
              "--validate-only", *b)
    assert dry.returncode == 0 and b"Would change" in dry.stdout
    done = cli("topics", "alter", "alt", "--config", "segment.ms=60000", "--delete-config",
               "retention.ms", "--partitions", "3", *b)
    assert done.returncode == 0, done.stderr
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        got = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "alt")], config_filter="all")
        configs = got["topic"]["alt"]
        assert (configs["segment.ms"]["value"], configs["segment.ms"]["config_source"]) == \
            ("60000", "DYNAMIC_TOPIC_CONFIG")
        assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
        (topic,) = kp.describe_topics(["alt"])
        assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2]
    finally:
        kp.close()
    bad = cli("topics", "alter", "alt", "--config", "retention.ms=soon", *b)
    assert bad.returncode == 1 and b"INVALID_CONFIG" in bad.stderr
    assert cli("topics", "alter", "alt", *b).returncode == 2  # nothing to alter


def test_delete_records_by_offset_on_every_partition(broker: Any) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    assert cli("topics", "create", "cut", "--partitions", "2", *b).returncode == 0
    lines = "".join(f"k{i}\tv{i}\n" for i in range(40)).encode()
    proc = subprocess.run([CHRONOLOG, "produce", "cut", "--key-column", "1", *b], input=lines,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tps = [KpTP("cut", 0), KpTP("cut", 1)]
    ends = consumer.end_offsets(tps)
    out = cli("delete-records", "cut", "--before-offset", "3", "--format", "json", *b)
    assert out.returncode == 0, out.stderr
    assert consumer.beginning_offsets(tps) == {tp: min(3, ends[tp]) for tp in tps}
    out = cli("delete-records", "cut", "--before-offset", "-1", "--partition", "1", *b)
    assert out.returncode == 0, out.stderr
    assert consumer.beginning_offsets(tps)[tps[1]] == ends[tps[1]]
    consumer.close()
    beyond = cli("delete-records", "cut", "--before-offset", "1000", *b)
    assert beyond.returncode == 1 and b"OFFSET_OUT_OF_RANGE" in beyond.stderr
