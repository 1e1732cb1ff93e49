"""kafkajs members in a consumer group, each in its own Node process (issue #9's
integration scenario for the fourth client).

The harness is tests/helpers/groups.py's ``Group`` (same broker settings, same files
per member, same oracle: every produced record processed, its commit acknowledged,
exactly once across the group); only the member process differs:
``tests/js/group_member.js``. kafkajs joins with JoinGroup v5 (two-step), its own
``RoundRobinAssigner`` protocol, SyncGroup v3, Heartbeat v3, LeaveGroup v3 (the batch
form) and OffsetCommit v5.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import running_broker
from tests.helpers.groups import OVERRIDES, Group, share_partitions_through_joins_leaves_and_crashes

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
    """test_groups_clients' scenario (two members, a third joins, it leaves, one is
    SIGKILLed; exactly once), written once in tests/helpers/groups.py, with kafkajs members."""
    share_partitions_through_joins_leaves_and_crashes(KafkajsGroup(jb, tmp_path, "kafkajs", "roundrobin"))
