"""Consumer-group members as processes (tests/broker/group_member.py, or another client's
member through a ``Group`` subclass) and the scenario every client's members go through."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

from tests.broker.group_member import SESSION_MS
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import topic_name
from tests.helpers.kafka_socket import KafkaSocket

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 6
PER_PHASE = 10  # records per partition per phase

OVERRIDES = {
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "500",
}


class Group:
    """The members of one group, as processes, and what they report."""

    def __init__(self, broker: BrokerProcess, workdir: Path, client: str, strategy: str) -> None:
        self.broker = broker
        self.workdir = workdir
        self.client = client
        self.strategy = strategy
        self.group = topic_name(f"g-{client}")
        self.topic = topic_name(f"t-{client}")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.produced: set[tuple[int, str]] = set()
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        with KafkaSocket(broker.port) as c:
            resp = c.request(19, 5, {"topics": [{"name": self.topic, "num_partitions": PARTITIONS,
                                                 "replication_factor": 1, "assignments": [],
                                                 "configs": []}], "timeout_ms": 5000})
            assert resp.topics[0].error_code == 0

    def start(self, name: str, env: dict[str, str] | None = None) -> None:
        log = open(self.workdir / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.broker.group_member", self.client, self.broker.bootstrap,
             self.group, self.topic, str(self.workdir), name, self.strategy],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        )

    def history(self, name: str) -> list[list[int]]:
        path = self.workdir / f"{name}.history"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        (self.workdir / f"{name}.json").unlink(missing_ok=True)

    def assignments(self) -> dict[str, list[int]]:
        out = {}
        for name in self.procs:
            path = self.workdir / f"{name}.json"
            try:
                out[name] = json.loads(path.read_text())["assigned"]
            except (OSError, ValueError):
                out[name] = []
        return out

    def wait_balanced(self, timeout: float = 30.0) -> dict[str, list[int]]:
        """Until the live members hold every partition once, as evenly as possible."""
        deadline = time.monotonic() + timeout
        n = len(self.procs)
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                assert proc.poll() is None, f"{name} died:\n{self.log(name)}"
            got = self.assignments()
            flat = sorted(p for ps in got.values() for p in ps)
            sizes = sorted(len(ps) for ps in got.values())
            if flat == list(range(PARTITIONS)) and sizes[-1] - sizes[0] <= 1 and len(sizes) == n:
                return got
            time.sleep(0.05)
        raise AssertionError(f"not balanced: {self.assignments()}\n" + "\n".join(
            self.log(n) for n in self.procs))

    def produce_phase(self, phase: int) -> None:
        for p in range(PARTITIONS):
            for i in range(PER_PHASE):
                value = f"{phase}-{p}-{i}"
                self.producer.produce(self.topic, value.encode(), partition=p)
                self.produced.add((p, value))
        assert self.producer.flush(10) == 0

    def processed(self) -> list[tuple[int, str]]:
        out = []
        for path in self.workdir.glob("*.out"):
            for line in path.read_text().splitlines():
                partition, _offset, value = line.split(" ")
                out.append((int(partition), value))
        return out

    def wait_processed(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.processed()) >= len(self.produced):
                return
            time.sleep(0.05)
        raise AssertionError(f"{len(self.processed())} of {len(self.produced)} processed")

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return f"--- {name}\n" + (path.read_text(errors="replace")[-3000:] if path.exists() else "")

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name, signal.SIGKILL)


def share_partitions_through_joins_leaves_and_crashes(g: Group) -> None:
    """Two members split the topic, a third joins, it leaves, one is SIGKILLed; every
    record produced is processed exactly once across the group. The scenario every
    client's members go through (tests/broker/test_groups_clients.py, test_groups_kafkajs.py)."""
    broker = g.broker
    try:
        g.start("a")
        g.start("b")
        two = g.wait_balanced()
        assert sorted(len(p) for p in two.values()) == [3, 3]
        g.produce_phase(0)
        g.wait_processed()

        g.start("c")  # a third member: partitions move to it
        three = g.wait_balanced()
        assert sorted(len(p) for p in three.values()) == [2, 2, 2]
        g.produce_phase(1)
        g.wait_processed()

        g.stop("c")  # leaves (LeaveGroup): its partitions return
        back = g.wait_balanced()
        assert sorted(len(p) for p in back.values()) == [3, 3]
        g.produce_phase(2)
        g.wait_processed()

        killed_at = time.monotonic()
        g.stop("b", signal.SIGKILL)  # no LeaveGroup: only the session timeout tells
        alone = g.wait_balanced()
        assert alone == {"a": list(range(PARTITIONS))}
        # Not before a good part of the session timeout has passed (its last heartbeat
        # came a little before the kill; a loaded machine may have delayed it).
        assert time.monotonic() - killed_at >= SESSION_MS / 2000
        g.produce_phase(3)
        g.wait_processed()
        time.sleep(0.3)  # a late duplicate would show up here

        processed = g.processed()
        assert len(processed) == len(set(processed)), "a record was processed twice"
        assert set(processed) == g.produced
        assert "Traceback" not in broker.log()
    finally:
        g.close()
