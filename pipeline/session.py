"""A SparkSession set up the way this data source needs, for the CLI jobs, tests and benches.

Why each setting: executors must run the same Python as the driver
(``PYSPARK_PYTHON``), or they cannot import pyarrow and this package; the UI
and console progress bar are noise for a batch job; two shuffle partitions
fit a small machine (a real cluster's ``--master`` keeps its own defaults for
everything else). ``SPARK_LOCAL_IP`` keeps a local session on loopback.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["spark_session"]


def spark_session(
    master: str | None = None, app_name: str = "chronolog", conf: dict[str, str] | None = None
) -> Any:
    """Build (or return the running) SparkSession with ``format("chronolog")`` registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master is None or master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from pipeline import register

    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or "local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    )
    if local:
        builder = (
            builder.config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
        )
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
