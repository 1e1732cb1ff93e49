"""A confluent-kafka producer that writes until told to stop and logs every acknowledgement.

Run as ``python chaos_producer.py BOOTSTRAP TOPIC NAME IDEMPOTENT ACKLOG STOPFILE``. Each
value is ``NAME:SEQ``; its CreateTime is the send time plus a random jitter of up to
two seconds either way, so timestamps are out of order within a partition. Every
delivery report without an error appends ``partition offset timestamp value`` to
ACKLOG and flushes it, so a line there is a record the broker acknowledged (acks=all).
The producer stops when STOPFILE exists, flushes for up to 30 s, and exits.
"""

from __future__ import annotations

import os
import random
import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, topic, name, idempotent, acklog, stopfile = sys.argv[1:7]
    rng = random.Random(name)
    out = open(acklog, "a", buffering=1)
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": idempotent == "1",
        "message.timeout.ms": 120_000,
        "retry.backoff.ms": 50,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "queue.buffering.max.messages": 20_000,
        "log_level": 2,  # connection-refused noise while the broker is down
    }
    p = Producer(conf)

    def delivered(err: object, msg: object) -> None:
        if err is None:
            m = msg  # type: ignore[assignment]
            out.write(f"{m.partition()} {m.offset()} {m.timestamp()[1]} "  # type: ignore[attr-defined]
                      f"{m.value().decode()}\n")  # type: ignore[attr-defined]

    seq = 0
    while not os.path.exists(stopfile):
        for _ in range(200):
            ts = int(time.time() * 1000) + rng.randint(-2000, 2000)
            try:
                p.produce(topic, value=f"{name}:{seq}".encode(), timestamp=ts,
                          on_delivery=delivered)
            except BufferError:
                p.poll(0.05)
                continue
            seq += 1
        p.poll(0)
        # ~2k records/s per producer: mid-write at every kill, and a log the check reads fast
        time.sleep(0.1)
    p.flush(30)
    out.close()


if __name__ == "__main__":
    main()
