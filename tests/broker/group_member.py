"""One consumer-group member in its own process, driven by tests/broker/test_groups_clients.py.

``python -m tests.broker.group_member CLIENT BOOTSTRAP GROUP TOPIC WORKDIR NAME [STRATEGY]``

It consumes TOPIC in GROUP with a real client (confluent-kafka, kafka-python or
aiokafka), commits each record synchronously and only then appends
``partition offset value`` to ``WORKDIR/NAME.out`` (so the file holds exactly the
records whose commit the broker acknowledged); when its assignment changes it rewrites
``WORKDIR/NAME.json`` and appends it to ``WORKDIR/NAME.history``. GROUP_SESSION_MS
and GROUP_INSTANCE_ID (static membership) come from the environment. SIGTERM closes the consumer
(LeaveGroup); SIGKILL is a crash.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

SESSION_MS = int(os.environ.get("GROUP_SESSION_MS", "2000"))
HEARTBEAT_MS = 300
INSTANCE_ID = os.environ.get("GROUP_INSTANCE_ID")  # static membership (confluent only)


class Member:
    def __init__(self, workdir: Path, name: str) -> None:
        self.out = open(workdir / f"{name}.out", "a")
        self.status = workdir / f"{name}.json"
        self.history = workdir / f"{name}.history"
        self.stop = False
        self._last: list[int] | None = None
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, *_: Any) -> None:
        self.stop = True

    def processed(self, partition: int, offset: int, value: bytes) -> None:
        self.out.write(f"{partition} {offset} {value.decode()}\n")
        self.out.flush()

    def report(self, partitions: list[int]) -> None:
        partitions = sorted(partitions)
        if partitions == self._last:
            return
        self._last = partitions
        with open(self.history, "a") as f:
            f.write(json.dumps(partitions) + "\n")
        tmp = self.status.with_suffix(".tmp")
        tmp.write_text(json.dumps({"assigned": partitions, "pid": os.getpid()}))
        os.replace(tmp, self.status)


def run_confluent(m: Member, bootstrap: str, group: str, topic: str, strategy: str) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS, "partition.assignment.strategy": strategy,
    }
    if INSTANCE_ID:
        conf["group.instance.id"] = INSTANCE_ID
    c = Consumer(conf)
    c.subscribe([topic])
    while not m.stop:
        msg = c.poll(0.05)
        if msg is not None and not msg.error():
            try:
                c.commit(message=msg, asynchronous=False)
            except KafkaException:
                pass  # not acknowledged: the partition's next owner gets the record again
            else:
                m.processed(msg.partition(), msg.offset(), msg.value())
        m.report([tp.partition for tp in c.assignment()])
    c.close()


def run_kafka_python(m: Member, bootstrap: str, group: str, topic: str) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
    )
    while not m.stop:
        for tp, records in c.poll(timeout_ms=50).items():
            for r in records:
                try:
                    c.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})
                except KafkaError:
                    break  # the rest of this batch comes back to whoever owns tp next
                m.processed(tp.partition, r.offset, r.value)
        m.report([tp.partition for tp in c.assignment()])
    c.close()


async def run_aiokafka(m: Member, bootstrap: str, group: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import KafkaError

    c = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
    )
    await c.start()
    try:
        while not m.stop:
            batches = await c.getmany(timeout_ms=50)
            for tp, records in batches.items():
                for r in records:
                    try:
                        await c.commit({tp: r.offset + 1})
                    except KafkaError:
                        break
                    assert r.value is not None
                    m.processed(tp.partition, r.offset, r.value)
            m.report([tp.partition for tp in c.assignment()])
    finally:
        await c.stop()


def main(argv: list[str]) -> None:
    client, bootstrap, group, topic, workdir, name = argv[:6]
    strategy = argv[6] if len(argv) > 6 else "range"
    m = Member(Path(workdir), name)
    if client == "confluent":
        run_confluent(m, bootstrap, group, topic, strategy)
    elif client == "kafka-python":
        run_kafka_python(m, bootstrap, group, topic)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(m, bootstrap, group, topic))
    else:
        raise SystemExit(f"unknown client {client}")


if __name__ == "__main__":
    main(sys.argv[1:])
