"""Pipeline fixtures: a log toolkit (the one SparkSession is in tests/conftest.py).

``LogTool`` produces records to a real broker with chosen timestamps and reads
every partition back through ``storage.records.decode_batch`` (the codec), so
tests have a brute-force oracle that shares no code with the Spark path.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from client import SyncClient, TopicPartition
from storage.records import Record, build_batch, decode_batch, iter_batches
from tests.helpers.rows import Row, dataframe_rows


class LogTool:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.client = SyncClient(bootstrap)

    def create(self, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        self.client.create_topic(topic, partitions, configs or {})

    def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
        *,
        compression: int = 0,
    ) -> int:
        """Append one batch of (timestamp, key, value, headers); returns its base offset."""
        batch = build_batch(
            [Record(0, ts, k, v, h) for ts, k, v, h in records], compression=compression
        )
        return int(self.client.produce_batch(topic, partition, batch, acks=1))

    def random_log(
        self, topic: str, partitions: int, rng: random.Random, *, t0: int, batches: int,
        spread_ms: int = 10_000,
    ) -> None:
        """Batches of 1-40 records with out-of-order timestamps, null keys/values, headers, codecs."""
        for _ in range(batches):
            p = rng.randrange(partitions)
            n = rng.randint(1, 40)
            recs = []
            for _i in range(n):
                ts = t0 + rng.randrange(spread_ms)
                key = None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 16))
                value = None if rng.random() < 0.05 else rng.randbytes(rng.randint(0, 200))
                headers = (
                    [(f"h{j}", None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 8)))
                     for j in range(rng.randint(1, 3))]
                    if rng.random() < 0.3 else []
                )
                recs.append((ts, key, value, headers))
            self.produce(topic, p, recs, compression=rng.choice([0, 0, 1, 2, 3, 4]))

    def oracle(self, topic: str) -> dict[int, list[Row]]:
        """Every record of every partition, decoded by the codec, in offset order."""
        out: dict[int, list[Row]] = {}
        for p in self.client.list_topics()[topic]:
            end = self.client.list_offsets({TopicPartition(topic, p): -1})[
                TopicPartition(topic, p)][0]
            rows: list[Row] = []
            offset = 0
            while offset < end:
                buf = self.client.fetch_raw(topic, p, offset, 1 << 20).records_bytes
                for pos, h in iter_batches(buf):
                    for r in decode_batch(buf, pos):
                        if offset <= r.offset < end:
                            rows.append(Row(p, r.offset, r.timestamp, h.timestamp_type, r.key,
                                            r.value, tuple(r.headers)))
                    offset = max(offset, h.last_offset + 1)
            out[p] = rows
        return out

    def close(self) -> None:
        self.client.close()


def _first_at(rows: list[Row], t: int | None, default: int, end: int) -> int:
    if t is None:
        return default
    return next((r.offset for r in rows if r.timestamp >= t), end)


def window_oracle(log: dict[int, list[Row]], t1: int | None, t2: int | None) -> list[Row]:
    """Spark's Kafka semantics: per partition, offsets from the first record with ts >= t1
    to the first with ts >= t2 (exclusive); no such record → the partition's end."""
    out: list[Row] = []
    for rows in log.values():
        end = rows[-1].offset + 1 if rows else 0
        lo = _first_at(rows, t1, rows[0].offset if rows else 0, end)
        hi = _first_at(rows, t2, end, end)
        out.extend(r for r in rows if lo <= r.offset < hi)
    return sorted(out, key=lambda r: (r.partition, r.offset))


@pytest.fixture
def logtool(broker: Any) -> Iterator[LogTool]:
    tool = LogTool(broker.bootstrap)
    yield tool
    tool.close()


@pytest.fixture
def helpers() -> Any:
    """The oracle functions, for test modules (which cannot import each other)."""

    class H:
        window = staticmethod(window_oracle)
        rows = staticmethod(dataframe_rows)

    return H
