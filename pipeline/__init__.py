"""Chronolog for Spark: ``format("chronolog")`` reads time windows, streams and writes.

One line to use it::

    from pipeline import register
    register(spark)
    df = (spark.read.format("chronolog")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .option("startingTimestamp", "2025-11-21T10:00:00Z")
          .option("endingTimestamp", "2025-11-21T11:00:00Z")
          .load())

The options and the row schema are those of Spark's Kafka source (see
docs/pipeline.md): the time bounds are positional, Kafka's offsetsForTimes meaning.
``.option("eventTime", "true")`` makes them the exact window start <= timestamp < end
on out-of-order data (batch reads). Importing this package does not import PySpark; ``register``
does.

Spark's Python workers (and the planner process that reads a source's options) must
import PyArrow and this package. A plain ``SparkSession.builder.getOrCreate()`` starts
them with ``python3`` from PATH unless ``PYSPARK_PYTHON`` was set before the session
started, and on most machines that is not the interpreter with Chronolog installed.
``register`` therefore points a local session's workers at the driver's own
interpreter when nobody chose one, and refuses, saying what to do, when the chosen one
cannot import what the workers need.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

__all__ = ["register"]

_SPARK_DEFAULT_PYTHON = "python3"  # pyspark's SparkContext when PYSPARK_PYTHON is unset
_WORKER_IMPORTS = "import pyarrow, pipeline.source"


def register(spark: Any) -> None:
    """Register ``format("chronolog")`` with a SparkSession (idempotent); on a local
    master, make the Python workers use an interpreter that can run the source."""
    try:
        from pipeline.source import ChronologDataSource
    except ModuleNotFoundError as exc:
        from client.extras import extra_for, install_hint

        extra = extra_for(exc)
        if extra is None:
            raise
        raise ModuleNotFoundError(f"{exc}: {install_hint(extra)}", name=exc.name) from exc
    _workers_use_a_python_that_can_run_the_source(spark.sparkContext)
    spark.dataSource.register(ChronologDataSource)


def _workers_use_a_python_that_can_run_the_source(sc: Any) -> None:
    """Local masters only: their workers run on this machine, so the driver's interpreter
    is right for them. A cluster's workers are the cluster's business (PYSPARK_PYTHON)."""
    if not str(sc.master).startswith("local"):
        return
    chosen = os.environ.get("PYSPARK_PYTHON")
    if chosen is None and sc.pythonExec == _SPARK_DEFAULT_PYTHON:
        # SparkContext reads PYSPARK_PYTHON once, into pythonExec, which every Python
        # function wrapped from now on (this data source's included) carries to the JVM.
        sc.pythonExec = sys.executable
        os.environ["PYSPARK_PYTHON"] = sys.executable  # for sessions this process makes later
        return
    python = chosen or sc.pythonExec
    if os.path.realpath(_which(python)) == os.path.realpath(sys.executable):
        return
    check = subprocess.run([python, "-c", _WORKER_IMPORTS], capture_output=True, text=True,
                           timeout=120)
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(
            f"Spark's Python workers run {python!r} (PYSPARK_PYTHON), which cannot import "
            f"what format('chronolog') needs: {last}. Start the session with "
            f"PYSPARK_PYTHON={sys.executable} (this interpreter), or unset PYSPARK_PYTHON "
            "before the session starts and register() chooses it, or install chronolog "
            f"with its spark extra into {python}.")


def _which(program: str) -> str:
    import shutil

    return shutil.which(program) or program
