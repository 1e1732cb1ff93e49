"""kafkajs members in a consumer group, each in its own Node process (issue #9's
integration scenario for the fourth client).

The harness is test_groups_clients.py's ``Group`` (same broker settings, same files
per member, same oracle: every produced record processed, its commit acknowledged,
exactly once across the group); only the member process differs:
``tests/js/group_member.js``. kafkajs joins with JoinGroup v5 (two-step), its own
``RoundRobinAssigner`` protocol, SyncGroup v3, Heartbeat v3, LeaveGroup v3 (the batch
form) and OffsetCommit v5.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.group_member import SESSION_MS
from tests.broker.test_clients_common import running_broker
from tests.broker.test_groups_clients import OVERRIDES, PARTITIONS, Group
from tests.conftest import BrokerProcess

JS_DIR = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node")


@pytest.fixture(scope="module")
def jb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    assert NODE and (JS_DIR / "node_modules" / "kafkajs").is_dir(), \
        "kafkajs is not installed: `make check-clients` installs it"
    with running_broker(tmp_path_factory, "groups-kafkajs", OVERRIDES) as b:
        yield b


class KafkajsGroup(Group):
    """``Group`` whose members are kafkajs consumers."""

    def start(self, name: str, env: dict[str, str] | None = None) -> None:
        log = open(self.workdir / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            [NODE or "node", str(JS_DIR / "group_member.js"), self.broker.bootstrap, self.group,
             self.topic, str(self.workdir), name],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        )


def test_kafkajs_members_share_partitions_through_joins_leaves_and_crashes(
    jb: BrokerProcess, tmp_path: Path
) -> None:
    g = KafkajsGroup(jb, tmp_path, "kafkajs", "roundrobin")
    try:
        g.start("a")
        g.start("b")
        assert sorted(len(p) for p in g.wait_balanced().values()) == [3, 3]
        g.produce_phase(0)
        g.wait_processed()

        g.start("c")  # a third member: partitions move to it
        assert sorted(len(p) for p in g.wait_balanced().values()) == [2, 2, 2]
        g.produce_phase(1)
        g.wait_processed()

        g.stop("c")  # disconnect: LeaveGroup, its partitions return at once
        assert sorted(len(p) for p in g.wait_balanced().values()) == [3, 3]
        g.produce_phase(2)
        g.wait_processed()

        killed_at = time.monotonic()
        g.stop("b", signal.SIGKILL)  # no LeaveGroup: only the session timeout tells
        assert g.wait_balanced() == {"a": list(range(PARTITIONS))}
        assert time.monotonic() - killed_at >= SESSION_MS / 2000
        g.produce_phase(3)
        g.wait_processed()
        time.sleep(0.3)  # a late duplicate would show up here

        processed = g.processed()
        assert len(processed) == len(set(processed)), "a record was processed twice"
        assert set(processed) == g.produced
        assert "Traceback" not in jb.log()
    finally:
        g.close()
