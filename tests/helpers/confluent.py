"""confluent-kafka (librdkafka) helpers several test areas share: topics, producing,
and transactional producing and reading.
"""

from __future__ import annotations

import random
import time
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    Rec,
)


def create_topic(b: BrokerProcess, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
    )
    futures[name].result(TIMEOUT)


def produce(b: BrokerProcess, topic: str, recs: list[Rec], partition: int = 0, **conf: Any) -> list[int]:
    """Produce in order (one batch when it fits); returns the delivered offsets."""
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, **conf})
    delivered: list[tuple[int, int]] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.offset(), msg.timestamp()[1]))  # type: ignore[attr-defined]

    for r in recs:
        p.produce(
            topic, value=r.value, key=r.key, partition=partition,
            headers=list(r.headers) or None, timestamp=r.timestamp, on_delivery=on_delivery,
        )
    assert p.flush(TIMEOUT) == 0
    assert errors == []
    assert len(delivered) == len(recs)
    return [off for off, _ in delivered]


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(15)
    return p


def consume_isolated(bootstrap: str, topic: str, partitions: int, isolation: str,
             expect: int | None = None, timeout: float = 10.0) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record delivered, read from the start."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                if len(eof) == partitions and (expect is None or len(out) >= expect):
                    break
                continue
            raise KafkaException(m.error())
        out.append((m.partition(), m.offset(), m.value()))
        eof.discard(m.partition())
    c.close()
    return out


TIMEOUT = 15.0


def some_transactions_aborted(p: Producer, topic: str, rng: random.Random, t0: int,
                              spread_ms: int, txns: int = 8,
                              size: int = 6) -> tuple[list[tuple[int, bytes]], set[bytes]]:
    """``txns`` transactions of ``size`` records (values ``b"n-i"``, timestamps drawn in
    [t0, t0 + spread_ms]) through the transactional ``p``, every third one from the
    second aborted, the rest committed; (timestamp, value) of every record, and the
    values of the aborted ones."""
    rows: list[tuple[int, bytes]] = []
    aborted: set[bytes] = set()
    for n in range(txns):
        p.begin_transaction()
        for i in range(size):
            ts = t0 + rng.randint(0, spread_ms)
            v = b"%d-%d" % (n, i)
            p.produce(topic, value=v, timestamp=ts)
            rows.append((ts, v))
        p.flush(10)
        if n % 3 == 1:
            p.abort_transaction(15)
            aborted |= {v for _, v in rows[-size:]}
        else:
            p.commit_transaction(15)
    return rows, aborted
