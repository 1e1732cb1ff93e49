"""Chronolog for Spark: ``format("chronolog")`` reads time windows, streams and writes.

One line to use it::

    from pipeline import register
    register(spark)
    df = (spark.read.format("chronolog")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .option("startingTimestamp", "2026-11-21T10:00:00Z")
          .option("endingTimestamp", "2026-11-21T11:00:00Z")
          .load())

The options and the row schema are those of Spark's Kafka source (see
docs/pipeline.md): the time bounds are positional, Kafka's offsetsForTimes meaning.
``.option("eventTime", "true")`` makes them the exact window start <= timestamp < end
on out-of-order data (batch reads). Importing this package does not import PySpark; ``register``
does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register ``format("chronolog")`` with a SparkSession (idempotent)."""
    from pipeline.source import ChronologDataSource

    spark.dataSource.register(ChronologDataSource)
