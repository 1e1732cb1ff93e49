"""``chronolog pipeline export|rollup``: Spark jobs over a time window of a topic.

Each starts a local Spark session (``--master`` to use a cluster), shows task
progress on stderr, and prints where the output went on stdout. PySpark is
imported only when a pipeline command runs, so the rest of the CLI stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from client.cli._common import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, time_arg


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pipeline", help="Spark jobs over a time window (export records, per-interval rollups)"
    )
    sub = p.add_subparsers(dest="pipeline_command", metavar="JOB")
    sub.required = True

    e = sub.add_parser("export", help="write a time window's records as parquet, json or csv")
    _common(e)
    e.add_argument("--format", choices=["parquet", "json", "csv"], default="parquet",
                   help="output format (default parquet)")
    e.set_defaults(func=_export)

    r = sub.add_parser("rollup", help="per-interval record counts and bytes per partition")
    _common(r)
    r.add_argument("--every", default="1m", metavar="INTERVAL",
                   help="interval length: 500ms, 30s, 1m, 2h, 1d (default 1m)")
    r.add_argument("--format", choices=["parquet", "json", "csv"], default="parquet",
                   help="output format (default parquet)")
    r.set_defaults(func=_rollup)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True, help="topic to read")
    p.add_argument("--from", dest="start", required=True, type=time_arg, metavar="TIME",
                   help="window start (inclusive): ISO-8601 with zone, epoch ms, or -1h")
    p.add_argument("--to", dest="end", required=True, type=time_arg, metavar="TIME",
                   help="window end (exclusive), same forms as --from")
    p.add_argument("--out", required=True, metavar="PATH",
                   help="output directory (as the Spark executors see it)")
    p.add_argument("--overwrite", action="store_true", help="replace PATH if it exists")
    p.add_argument("--master", default=None, metavar="URL",
                   help="Spark master (default: a local session, local[2])")
    p.add_argument("--min-partitions", type=int, default=None, metavar="N",
                   help="split the window into at least N Spark tasks")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
                   help=f"broker the Spark tasks connect to (default ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})")
    p.add_argument("--event-time", action="store_true",
                   help="the records with FROM <= timestamp < TO wherever they are in the log "
                        "(exact on out-of-order data; needs a Chronolog broker). Default: "
                        "Kafka's positional window, from the first offset at or after FROM "
                        "to the first at or after TO")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _where(path: str, master: str | None) -> str:
    if "://" in path or (master and not master.startswith("local")):
        return path
    return os.path.abspath(path)


def _run(args: argparse.Namespace, job: str) -> int:
    from pyspark.sql import SparkSession

    from pipeline import jobs
    from pipeline.options import OptionError
    from pipeline.session import spark_session
    from protocol.errors import KafkaError

    if args.end < args.start:
        print("error: --to is before --from", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"starting Spark ({args.master or 'local[2]'}) ...", file=sys.stderr)
    # A session that already runs in this process (a notebook, a test) is reused, not stopped.
    owned = SparkSession.getActiveSession() is None
    spark = spark_session(args.master, app_name=f"chronolog-{job}")
    try:
        common = dict(
            fmt=args.format,
            min_partitions=args.min_partitions,
            overwrite=args.overwrite,
            show_progress=not args.quiet,
            event_time=args.event_time,
        )
        if job == "export":
            result = jobs.export(
                spark, args.bootstrap_server, args.topic, args.start, args.end, args.out, **common
            )
            what = f"{result.rows} records"
        else:
            result = jobs.rollup(
                spark, args.bootstrap_server, args.topic, args.start, args.end, args.every,
                args.out, **common,
            )
            what = f"{result.rows} rows covering {result.records_in_window} records"
    except (OptionError, KafkaError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # Spark wraps executor errors; show the first line, not a JVM trace
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"error: {job} failed: {first}", file=sys.stderr)
        return 1
    finally:
        if owned:
            spark.stop()
    print(f"{job}: wrote {what} ({args.format}) to {_where(result.path, args.master)} "
          f"in {result.seconds:.1f} s")
    return 0


def _export(args: argparse.Namespace) -> int:
    return _run(args, "export")


def _rollup(args: argparse.Namespace) -> int:
    return _run(args, "rollup")
