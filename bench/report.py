"""One table for every benchmark in a run.

Each benchmark module adds rows to a shared :class:`Report`. Rows carry the
measured value, the issue's target (if any) and, where two things were
measured side by side in the same run, the ratio between them — on a shared,
noisy 2-core machine a ratio measured in one run is the figure to trust.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field


@dataclass
class Row:
    section: str
    name: str
    value: float
    unit: str
    target: str = ""
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)

    def add(
        self,
        section: str,
        name: str,
        value: float,
        unit: str,
        target: str = "",
        note: str = "",
    ) -> Row:
        row = Row(section, name, float(value), unit, target, note)
        self.rows.append(row)
        print(f"  {section} | {name}: {_fmt(row.value)} {unit} {target and '(target ' + target + ')'}",
              flush=True)
        return row

    def table(self) -> str:
        headers = ("section", "measure", "value", "unit", "target", "note")
        body = [
            (r.section, r.name, _fmt(r.value), r.unit, r.target, r.note) for r in self.rows
        ]
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
                  for i, h in enumerate(headers)]
        lines = [
            "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
            "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        ]
        for b in body:
            lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) + " |")
        return "\n".join(lines)

    def save(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as fh:
            json.dump([asdict(r) for r in self.rows], fh, indent=1)


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) >= 100:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile of ``samples`` (pct in 0..100)."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    k = max(0, min(len(ordered) - 1, int(round(pct / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def time_calls(fn: Callable[[], object], n: int) -> list[float]:
    """Call ``fn`` n times; return each call's latency in microseconds."""
    out: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        fn()
        out.append((clock() - t0) / 1000.0)
    return out


def median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")
