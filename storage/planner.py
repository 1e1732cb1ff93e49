"""Event-time window planning over zone maps: which offset ranges may hold a record
with T1 <= timestamp < T2, and how out of order a partition's timestamps are.

Sans-I/O: functions of zone maps (storage/zonemap.py) and numbers; ``Log`` hands
them its segments' maps (``Log.plan_time_window``, ``Log.disorder_stats``).

Invariants:
- a plan never misses: every data record in [start, end) whose timestamp lies in
  [T1, T2) is inside one of the ranges (a block is left out only when its
  [min, max] misses the window or it holds no data record);
- ranges are sorted, disjoint, within [start, end), and merged when one ends where
  the next begins (offset gaps left by compaction hold no record, so blocks either
  side of one are adjacent too); ``bytes`` sums the whole blocks a range spans (a
  range clipped by start or end still counts its blocks' bytes: what a reader fetches);
- disorder counts are a function of the records in [log start, log end) alone:
  a record is late when its timestamp is below the largest timestamp of any record
  before it in offset order (control batches are not records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple, TypeVar

from storage.zonemap import NO_MAX, ZoneMap, count_late

T = TypeVar("T")


class PlannedRange(NamedTuple):
    """Offsets [start_offset, end_offset) whose blocks may hold a matching record, and
    the bytes of those blocks in the .log (what fetching the range reads)."""

    start_offset: int
    end_offset: int
    bytes: int


class DisorderStats(NamedTuple):
    """How out of order a partition's record timestamps arrived (module docstring)."""

    late_records: int  # records below the running max of the records before them
    max_lateness_ms: int  # the largest (running max - timestamp); 0 without late records
    records: int  # data records counted (those in [log start, log end))


def overlapping(items: Iterable[T], start: int, end: int, zone: Callable[[T], ZoneMap]
                ) -> Iterator[T]:
    """The items (one per segment, in offset order) whose zone map ``zone(item)`` holds
    blocks and may reach into offsets [start, end), each map synced; stops at the first
    map that starts at or after ``end``."""
    for item in items:
        zm = zone(item)
        zm.sync()
        if not len(zm):
            continue
        if zm.first[0] >= end:
            return
        if zm.next_offset > start:
            yield item


def plan_blocks(maps: Iterable[ZoneMap], t1: int, t2: int, start: int, end: int
                ) -> list[PlannedRange]:
    """The ranges of ``maps`` (consecutive segments' maps, in offset order) that may
    hold a record with t1 <= ts < t2, within offsets [start, end)."""
    out: list[PlannedRange] = []
    if t2 <= t1 or end <= start:
        return out
    cur_s = cur_e = cur_b = -1
    joined = False  # the block just before this one (in log order) is in the open range
    for zm in overlapping(maps, start, end, lambda z: z):
        n = len(zm)
        mins, maxs, firsts, poss = zm.min, zm.max, zm.first, zm.pos
        for i in range(n):
            if maxs[i] < t1 or mins[i] >= t2:
                joined = False
                continue
            s = firsts[i]
            if s >= end:
                break
            if i + 1 < n:
                e, nbytes = firsts[i + 1], poss[i + 1] - poss[i]
            else:
                e, nbytes = zm.next_offset, zm.covered - poss[i]
            if e <= start:
                continue
            s = max(s, start)
            e = min(e, end)
            if joined:
                cur_e, cur_b = e, cur_b + nbytes
                continue
            if cur_s >= 0:
                out.append(PlannedRange(cur_s, cur_e, cur_b))
            cur_s, cur_e, cur_b = s, e, nbytes
            joined = True
    if cur_s >= 0:
        out.append(PlannedRange(cur_s, cur_e, cur_b))
    return out


class DisorderCursor(NamedTuple):
    """Where an incremental disorder count stopped: the last block counted (segment
    index, block index) is re-counted next time (it may have grown), so what is kept
    is the state before it."""

    key: tuple[int, ...]
    segment: int
    block: int
    running: int
    late: int
    worst: int
    records: int


def count_disorder(
    maps: Sequence[Callable[[], ZoneMap]],
    start: int,
    block_timestamps: Callable[[int, int, int], list[tuple[int, int]]],
    block_late: Callable[[int, int, int, int], tuple[int, int]],
    resume: DisorderCursor | None = None,
    key: tuple[int, ...] = (),
    stop: Callable[[], bool] | None = None,
) -> tuple[DisorderStats | None, DisorderCursor]:
    """Disorder over the records from offset ``start`` on, segment by segment.

    ``maps[j]()`` gives segment j's zone map. ``block_late(j, start_pos, end_pos,
    running)`` counts the records of segment j's bytes there against ``running``: read
    only for a block not counted at append (late -1) or whose stored counts were made
    against another running max and cannot be re-based from its min/max.
    ``block_timestamps(j, start_pos, end_pos)`` gives (offset, timestamp) of the
    records there, for the one block that holds ``start``.
    A block re-based that way keeps the new counts (its map becomes dirty), but for the
    last block of the last map, which appends still extend.
    ``resume`` (a cursor from an earlier call with the same ``key``) skips what it
    already counted. ``stop()`` is asked before each block read from the .log but the
    first of a call; when it says so the count ends early: (None, a cursor to resume
    from). The first is always read, so calls with a short budget still progress.
    """
    if resume is not None and resume.key == key:
        j0, i0 = resume.segment, resume.block
        p, late, worst, records = resume.running, resume.late, resume.worst, resume.records
    else:
        j0 = i0 = 0
        p, late, worst, records = NO_MAX, 0, 0, 0
    cur = DisorderCursor(key, j0, i0, p, late, worst, records)
    read_any = False
    for j in range(j0, len(maps)):
        zm = maps[j]()
        zm.sync()
        n = len(zm)
        if n and zm.next_offset <= start:
            continue
        for i in range(i0 if j == j0 else 0, n):
            cur = DisorderCursor(key, j, i, p, late, worst, records)
            first = zm.first[i]
            end_off, end_pos = zm.block_end(i)
            if end_off <= start or zm.records[i] == 0:
                continue
            mn, mx, pa = zm.min[i], zm.max[i], zm.p_at[i]
            if first < start:  # the log start lies inside: count from it, from the records
                tss = [t for o, t in block_timestamps(j, zm.pos[i], end_pos) if o >= start]
                n_late, w = count_late(tss, p)
                records += len(tss)
                if tss:
                    mx = max(tss)
            else:
                records += zm.records[i]
                stored = zm.late[i]
                if mx < p:
                    n_late, w = zm.records[i], p - mn
                elif stored >= 0 and (pa == p or (mn >= p and mn >= pa)):
                    n_late, w = stored, zm.worst[i]
                else:
                    if stop is not None and read_any and stop():
                        return None, cur
                    read_any = True  # at least one block per call, so a resumed count ends
                    n_late, w = block_late(j, zm.pos[i], end_pos, p)
                    if j + 1 < len(maps) or i + 1 < n:
                        # kept, except for the log's last block: appends still fold into it
                        # against the map's own running max
                        zm.p_at[i], zm.late[i], zm.worst[i] = p, n_late, w
                        zm.dirty = True
            late += n_late
            if w > worst:
                worst = w
            if mx > p:
                p = mx
    return DisorderStats(late, worst, records), cur
