"""Topics the event-time client tests fill with disordered batches (count windows, reads).

A row is (partition, offset, timestamp, value) of one produced record, the oracles' input.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import SyncClient
from client.aio import ProducerRecord
from tests.helpers.acls import allow_on_topic
from tests.helpers.disorder import batch_timestamps

Row = tuple[int, int, int, bytes]


def produce_batches(c: SyncClient, topic: str, parts: int, batches: list[tuple[int, list[int]]]
                    ) -> list[Row]:
    """Produce each (partition, timestamps) as one call, partition taken modulo ``parts``."""
    out = []
    for n, (p, tss) in enumerate(batches):
        recs = [ProducerRecord(value=b"%d-%d" % (n, i), timestamp=t) for i, t in enumerate(tss)]
        offs = c.produce(topic, recs, partition=p % parts)
        out += [(p % parts, o, t, r.value) for o, t, r in zip(offs, tss, recs, strict=True)]
    return out


def scattered_batches(rng: random.Random, t0: int, parts: int, batches: int, size: int,
                      spread: int) -> list[tuple[int, list[int]]]:
    """``batches`` batches of ``size`` timestamps drawn from [t0, t0 + spread], round robin."""
    return [(i % parts, [t0 + rng.randint(0, spread) for _ in range(size)])
            for i in range(batches)]


def disordered_examples(max_examples: int, shapes: st.SearchStrategy[Any]
                        ) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """settings + given for a test drawing batch ``shapes``, 1-3 partitions and a seed."""
    def decorate(test: Callable[..., None]) -> Callable[..., None]:
        drawn = given(shapes=shapes, parts=st.integers(1, 3), seed=st.integers(0, 1000))(test)
        return settings(max_examples=max_examples, deadline=None, suppress_health_check=[
            HealthCheck.function_scoped_fixture, HealthCheck.too_slow])(drawn)
    return decorate


def fill_disordered(c: SyncClient, topic: str, parts: int, shapes: Any, t0: int, seed: int
                    ) -> tuple[list[Row], random.Random]:
    """A new topic of tiny segments and index intervals holding the drawn batches; the rows
    and the random source seeded by ``seed`` (the test draws its windows from it too)."""
    rng = random.Random(seed)
    c.create_topic(topic, parts, {"segment.bytes": "1200", "index.interval.bytes": "200"})
    return produce_batches(c, topic, parts, batch_timestamps(shapes, t0, rng)), rng


def guarded_and_allowed(c: SyncClient, bootstrap: str, guarded: str, allowed: str,
                        operation: str, t0: int) -> None:
    """Two topics of one record at ``t0`` on a broker with the StandardAuthorizer: only
    someone else may READ ``guarded``; we (User:ANONYMOUS) may ``operation`` on ``allowed``."""
    for t in (guarded, allowed):
        c.create_topic(t, 1)
        c.produce(t, [ProducerRecord(value=b"x", timestamp=t0)], partition=0)
    allow_on_topic(bootstrap, guarded, "READ", "User:someone-else")
    allow_on_topic(bootstrap, allowed, operation, "User:ANONYMOUS")
