"""Records as the Spark tests compare them: one oracle row per record, whichever source
(Chronolog's data source, Spark's own Kafka connector, or a brute-force read of the log)
produced it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Row:
    """One record (timestamp in ms, timestampType 0 CreateTime / 1 LogAppendTime)."""

    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def dataframe_rows(df: Any) -> list[Row]:
    """A Spark DataFrame of Kafka-shaped records as rows, via Arrow (exact microsecond
    timestamps, each a whole ms), sorted by partition and offset."""
    import pyarrow as pa

    table = df.toArrow()
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    out = []
    for i, r in enumerate(table.to_pylist()):
        assert ts[i] % 1000 == 0, ts[i]
        out.append(Row(r["partition"], r["offset"], ts[i] // 1000, r["timestampType"], r["key"],
                       r["value"], tuple((h["key"], h["value"]) for h in r["headers"] or ())))
    return sorted(out, key=lambda r: (r.partition, r.offset))
