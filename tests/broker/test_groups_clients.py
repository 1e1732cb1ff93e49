"""Consumer groups with real clients, each member in its own process (issue #9).

For each client (confluent-kafka with eager range and with cooperative-sticky,
kafka-python, aiokafka): two members split a 6-partition topic; a third joins and
partitions move; it leaves and they come back; one member is SIGKILLed (no
LeaveGroup) and its partitions move after the session timeout. Records are produced
only while the group is settled, and every record must end up processed (its commit
acknowledged) exactly once across the group: the oracle is the set produced.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import running_broker
from tests.helpers.groups import OVERRIDES, Group, share_partitions_through_joins_leaves_and_crashes


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, "groups-clients", OVERRIDES) as b:
        yield b




CASES = [("confluent", "range"), ("confluent", "cooperative-sticky"),
         ("kafka-python", "range"), ("aiokafka", "range")]


@pytest.mark.parametrize(("client", "strategy"), CASES, ids=[f"{c}-{s}" for c, s in CASES])
def test_members_share_partitions_through_joins_leaves_and_crashes(
    broker: BrokerProcess, tmp_path: Path, client: str, strategy: str
) -> None:
    share_partitions_through_joins_leaves_and_crashes(Group(broker, tmp_path, client, strategy))


def test_a_static_member_restarting_within_its_session_keeps_its_partitions_without_a_rebalance(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    g = Group(broker, tmp_path, "confluent", "range")
    session = {"GROUP_SESSION_MS": "8000"}
    try:
        g.start("a", {**session, "GROUP_INSTANCE_ID": "static-a"})
        g.start("b", {**session, "GROUP_INSTANCE_ID": "static-b"})
        before = g.wait_balanced()
        g.produce_phase(0)
        g.wait_processed()
        g.stop("a", signal.SIGKILL)  # no LeaveGroup; back long before its session ends
        g.start("a", {**session, "GROUP_INSTANCE_ID": "static-a"})
        assert g.wait_balanced() == before
        g.produce_phase(1)
        g.wait_processed()
        # b never gave anything up (an eager rebalance would revoke all, then assign).
        assert g.history("b") in ([before["b"]], [[], before["b"]])
        processed = g.processed()
        assert len(processed) == len(set(processed)) and set(processed) == g.produced
    finally:
        g.close()
