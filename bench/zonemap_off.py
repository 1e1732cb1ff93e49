"""``python -m bench.zonemap_off ARGS``: this checkout's broker (``python -m broker ARGS``)
with the zone maps' work switched off, the second "without" side of bench_event_time's
A/B: the same code in everything else, where the first side (the commit before zone
maps) differs in every change merged since.

Switched off: the zone-map entry of each appended batch (``LogSegment.add_zone``), the
validation walk's disorder count of a run whose timestamps are out of order
(``storage.records._run_late``: late records are then not counted), and the
background step's zone maps, disorder counts and sorted-timestamp indexes
(``Log.build_zone_maps``, ``Log.build_ts_indexes``). A broker run this way answers
event-time requests wrongly: it is for measuring the produce path, nothing else.
"""

from __future__ import annotations

import runpy

from storage import log, records, segment


def _no_zone(self: segment.LogSegment, size: int, base: int, last: int, records: int,
             mn: int, mx: int, late: int, worst: int) -> None:
    return None


def _no_late(key: int, k: int, lane: int, half_range: int, lm: int) -> tuple[int, int]:
    return 0, 0


def _done(self: log.Log, budget_ms: float) -> bool:
    return True


segment.LogSegment.add_zone = _no_zone  # type: ignore[method-assign]
records._run_late = _no_late
log.Log.build_zone_maps = _done  # type: ignore[method-assign]
log.Log.build_ts_indexes = _done  # type: ignore[method-assign]

if __name__ == "__main__":
    runpy.run_module("broker", run_name="__main__", alter_sys=True)
