"""The pytest plugin and the broker context manager, used as another project uses them.

A throw-away project (its own directory, pytest.ini and test file, no conftest) is run
with this venv's pytest in a subprocess: installing chronolog must be all it takes to
get ``chronolog_broker`` and ``chronolog_topic``, and librdkafka (confluent-kafka)
talks to that broker over real sockets.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from client.testing import BrokerFailed, broker

PROJECT_TESTS = '''
import json
import os

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient


def test_librdkafka_round_trip_and_time_lookup(chronolog_broker, chronolog_topic):
    topic = chronolog_topic(partitions=3)
    producer = Producer({"bootstrap.servers": chronolog_broker.bootstrap})
    for i in range(30):
        producer.produce(topic, key=str(i % 3).encode(), value=f"v{i}".encode(),
                         partition=i % 3, timestamp=1_700_000_000_000 + i * 1000)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": chronolog_broker.bootstrap,
                         "group.id": "throwaway", "enable.auto.commit": False})
    found = consumer.offsets_for_times(
        [TopicPartition(topic, p, 1_700_000_015_000) for p in range(3)], timeout=30)
    consumer.close()
    # Partition p holds i = p, p+3, ...: the first at or after i = 15.
    assert [tp.offset for tp in found] == [5, 5, 5]


def test_each_call_makes_a_new_topic(chronolog_broker, chronolog_topic):
    a, b = chronolog_topic(), chronolog_topic(partitions=2, config={"retention.ms": "-1"})
    assert a != b
    topics = AdminClient({"bootstrap.servers": chronolog_broker.bootstrap}).list_topics(
        timeout=30).topics
    assert len(topics[b].partitions) == 2 and a in topics
    with open(os.environ["THROWAWAY_OUT"], "a") as f:
        f.write(json.dumps({"bootstrap": chronolog_broker.bootstrap,
                            "data_dir": str(chronolog_broker.data_dir), "topics": [a, b]}) + "\\n")


def test_the_session_shares_one_broker(chronolog_broker):
    with open(os.environ["THROWAWAY_OUT"]) as f:
        seen = [json.loads(line) for line in f]
    assert seen and seen[-1]["bootstrap"] == chronolog_broker.bootstrap


def test_without_the_fixtures():
    assert True
'''


def _throwaway(tmp_path: Path, tests: str, ini: str = "") -> tuple[Path, dict[str, str]]:
    project = tmp_path / "throwaway"
    project.mkdir()
    (project / "pytest.ini").write_text(f"[pytest]\n{ini}")
    (project / "test_app.py").write_text(tests)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "CHRONOLOG_")) and k != "PYTHONPATH"}
    env["THROWAWAY_OUT"] = str(tmp_path / "out.jsonl")
    return project, env


def _pytest(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--basetemp", str(project.parent / "basetemp"), *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_a_throwaway_project_gets_the_fixtures_by_installing_chronolog(tmp_path: Path) -> None:
    project, env = _throwaway(tmp_path, PROJECT_TESTS,
                              "chronolog_broker_overrides =\n    num.partitions=2\n")
    res = _pytest(project, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"^4 passed", res.stdout, re.M), res.stdout
    seen = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[-1])
    # The broker kept its data in pytest's temporary directory, and has stopped.
    data = Path(seen["data_dir"])
    assert data.is_relative_to(tmp_path / "basetemp")
    assert (data / ".kafka_cleanshutdown").exists()
    # The topics a test made are deleted after it.
    assert not any((data / f"{t}-0").exists() for t in seen["topics"])


def test_tests_that_use_no_fixture_start_no_broker(tmp_path: Path) -> None:
    project, env = _throwaway(tmp_path, PROJECT_TESTS)
    start = time.monotonic()
    res = _pytest(project, env, "-k", "without_the_fixtures")
    assert res.returncode == 0, res.stdout + res.stderr
    assert not list((tmp_path / "basetemp").glob("chronolog-broker*")), res.stdout
    assert time.monotonic() - start < 60


def test_the_context_manager_serves_librdkafka_and_cleans_up(tmp_path: Path) -> None:
    with broker(overrides={"num.partitions": "2"}) as b:
        root = b.data_dir.parent
        topic = b.create_topic(partitions=2)
        producer = Producer({"bootstrap.servers": b.bootstrap})
        producer.produce(topic, value=b"x", partition=1, timestamp=1_700_000_000_000)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cm",
                             "enable.auto.commit": False})
        lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=30)
        consumer.close()
        assert (lo, hi) == (0, 1)
        proc = b.process
    assert proc.returncode == 0  # SIGTERM: a clean shutdown
    assert not root.exists()  # its own temporary directory is gone


def test_a_given_data_dir_is_kept_and_reopened(tmp_path: Path) -> None:
    with broker(data_dir=tmp_path / "d") as b:
        topic = b.create_topic("kept", partitions=1)
    assert (tmp_path / "d" / ".kafka_cleanshutdown").exists()
    with broker(data_dir=tmp_path / "d") as b:
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "again"})
        assert topic in consumer.list_topics(timeout=30).topics
        consumer.close()


def test_a_broker_that_cannot_start_says_why(tmp_path: Path) -> None:
    try:
        with broker(overrides={"no.such.setting": "1"}):
            raise AssertionError("started with an unknown setting")
    except BrokerFailed as exc:
        assert "no.such.setting" in str(exc) and "status 2" in str(exc)


def test_code_without_pytest_uses_the_context_manager(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        from client.testing import broker
        from client import SyncClient
        with broker() as b:
            with SyncClient(b.bootstrap) as c:
                c.create_topic("t", 1)
                print(sorted(c.list_topics()))
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "'t'" in res.stdout


def test_readmes_pytest_example_passes_in_a_throwaway_project(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"```python\n(# test_orders\.py\n.*?)```", readme, re.S)
    assert block is not None, "README has no `# test_orders.py` example"
    project, env = _throwaway(tmp_path, block.group(1))
    res = _pytest(project, env)
    assert res.returncode == 0 and re.search(r"^1 passed", res.stdout, re.M), (
        res.stdout + res.stderr)
