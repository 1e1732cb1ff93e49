"""A topic for a console test: uniquely named, created, and filled partition by partition."""

from __future__ import annotations

from collections.abc import Callable

from console_oracle import unique_topic

from client import ProducerRecord, SyncClient


def produced_topic(bootstrap: str, prefix: str, partitions: int,
                   records: Callable[[int], list[ProducerRecord]]) -> str:
    """Create a topic named after ``prefix`` with ``partitions`` partitions and produce
    ``records(p)`` to each partition p in one request; returns the topic's name."""
    name = unique_topic(prefix)
    with SyncClient(bootstrap, client_id="console-tests") as c:
        c.create_topic(name, partitions)
        for p in range(partitions):
            c.produce(name, records(p), partition=p)
    return name
