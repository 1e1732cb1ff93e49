"""Crash tests of the event-time sidecars (``.zonemap``, ``.tsindex``) against a real
broker process."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.broker import BrokerProcess
from tests.helpers.wait import wait_until


def kill_with_sidecars_damaged(broker: BrokerProcess, partition: str, suffix: str,
                               damage: str) -> None:
    """Wait until every sealed segment of ``partition`` (a "topic-N" directory) has its
    ``suffix`` sidecar (a background slice writes them), kill -9 the broker, then delete
    (``damage="deleted"``) or tear in half (``"torn"``) each sidecar and start it again."""
    pdir = Path(broker.data_dir, partition)
    wait_until(lambda: len(list(pdir.glob(f"*{suffix}"))) >= len(list(pdir.glob("*.log"))) - 1,
               20, f"{suffix} sidecars of every sealed segment of {partition}", interval=0.1)
    broker.kill()
    sidecars = sorted(pdir.glob(f"*{suffix}"))
    assert sidecars
    for f in sidecars:
        if damage == "deleted":
            f.unlink()
        else:
            f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
    broker.start()
