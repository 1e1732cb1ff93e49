"""Run every benchmark module and print one table.

Usage: ``python -m bench [NAME ...]`` where NAME filters modules (``storage``,
``broker``, ``pipeline``, ``udp``, ``groups``, ``compaction``, ``console``,
``event_time``, ...). Each ``bench/bench_<name>.py`` exposes
``run(report: Report, scratch: str) -> None``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import tempfile
import time

import bench
from bench.report import Report


def main(argv: list[str]) -> int:
    wanted = set(argv)
    names = sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_")
    )
    report = Report()
    started = time.time()
    for name in names:
        short = name.removeprefix("bench_")
        if wanted and short not in wanted:
            continue
        print(f"== {short} ==", flush=True)
        module = importlib.import_module(f"bench.{name}")
        with tempfile.TemporaryDirectory(prefix=f"chronolog-bench-{short}-") as scratch:
            module.run(report, scratch)
    print()
    print(report.table())
    print(f"\n(total {time.time() - started:.0f} s)")
    report.save("bench/out/latest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
