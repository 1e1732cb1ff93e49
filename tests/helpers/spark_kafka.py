"""Spark's own Kafka connector (``format("kafka")``) for the one test SparkSession.

``spark.jars`` is read when the session's JVM starts, so the session-scoped ``spark``
fixture (tests/conftest.py) asks for the connector's jars up front: Maven fetches them
once into ``.cache/`` (tools/kafka-ref/kafkaref.py spark-kafka). When that is impossible
(no Maven, a refused download) the session starts without them and the reason is kept
here, so every test that needs the connector fails with it; the rest of the Spark tests
do not depend on Maven.
"""

from __future__ import annotations

from functools import cache

from tests.ecosystem.kafka_peer import kafkaref

__all__ = ["connector_jars", "connector_version"]


@cache
def connector_jars() -> tuple[tuple[str, ...], str | None]:
    """(jars, None) once fetched, or ((), why not)."""
    try:
        return tuple(kafkaref.fetch_spark_kafka()), None
    except kafkaref.KafkaRefError as e:
        return (), str(e)


def connector_version() -> str:
    return str(kafkaref.spark_kafka_version())
