"""One KIP-848 group member in its own process: confluent-kafka with group.protocol=consumer.

Usage: python -m tests.broker.kip848_member BOOTSTRAP GROUP TOPIC LOGFILE [INSTANCE_ID]

Writes one JSON line per event to LOGFILE, each with ``ts`` (time.time(), the same
clock in every process on the machine):
- ``assign`` / ``revoke`` / ``lost``: partitions added or taken away (incremental, as
  KIP-848 rebalances are), logged inside librdkafka's rebalance callback, i.e.
  before librdkafka tells the broker it let go;
- ``done``: a record processed, logged only after its synchronous commit
  (OffsetCommit v9) succeeded, so a record appears at most once per success;
- ``error``: an error callback (``fatal`` says whether librdkafka gave up);
- ``stale``: a message skipped because its offset is below the group's committed
  offset when this member began the partition (read with ``committed()`` at its
  first message): librdkafka 2.16 sometimes delivers a message fetched during an
  earlier ownership after the partition returns (seen with ``debug=cgrp``: the
  fetcher restarted at the broker's committed offset 100, then offset 0 was
  delivered). ``KIP848_DEBUG=1`` turns that debug log on (into the stderr file).
SIGTERM closes the consumer gracefully (it leaves the group).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition


def main() -> int:
    bootstrap, group, topic, path = sys.argv[1:5]
    static = {"group.instance.id": sys.argv[5]} if len(sys.argv) > 5 else {}
    out = open(path, "a", buffering=1)

    def log(kind: str, **fields: Any) -> None:
        out.write(json.dumps({"ts": time.time(), "kind": kind, **fields}) + "\n")

    def on_error(err: KafkaError) -> None:
        log("error", code=err.code(), name=err.name(), fatal=err.fatal(), text=err.str())

    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "error_cb": on_error,
        "topic.metadata.refresh.interval.ms": 1000,
        **static,
        **({"debug": "cgrp"} if os.environ.get("KIP848_DEBUG") else {}),
    })

    # Per partition, the group's committed offset when this member began it (see "stale").
    start: dict[int, int] = {}

    def on_assign(c: Any, parts: list[TopicPartition]) -> None:
        log("assign", partitions=sorted(p.partition for p in parts))
        for p in parts:
            start.pop(p.partition, None)

    def on_revoke(c: Any, parts: list[TopicPartition]) -> None:
        log("revoke", partitions=sorted(p.partition for p in parts))

    def on_lost(c: Any, parts: list[TopicPartition]) -> None:
        log("lost", partitions=sorted(p.partition for p in parts))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    log("started")
    while not stop:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            log("error", code=msg.error().code(), name=msg.error().name(), fatal=msg.error().fatal(),
                text=msg.error().str())
            continue
        p = msg.partition()
        if p not in start:
            try:
                [tp] = consumer.committed([TopicPartition(topic, p)], timeout=10)
                start[p] = max(tp.offset, 0)
            except KafkaException:
                start[p] = 0
        if msg.offset() < start[p]:
            # librdkafka 2.16 (group.protocol=consumer) can hand out a message it fetched
            # while it owned the partition before, after the partition comes back to it
            # (its fetcher restarts at the committed offset the broker returned; the old
            # message was still queued). Processing it would commit an offset behind the
            # group's and make the next owner read again: an application guards here.
            log("stale", partition=p, offset=msg.offset(), committed=start[p])
            continue
        try:
            consumer.commit(offsets=[TopicPartition(topic, msg.partition(), msg.offset() + 1)],
                            asynchronous=False)
        except KafkaException as exc:
            log("commit_failed", partition=msg.partition(), offset=msg.offset(), text=str(exc))
            try:  # process it again (here, if the partition is still ours)
                consumer.seek(TopicPartition(topic, msg.partition(), msg.offset()))
            except KafkaException:
                pass
            continue
        start[p] = msg.offset() + 1
        log("done", partition=msg.partition(), offset=msg.offset(), value=msg.value().decode())
    consumer.close()
    log("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
