"""The offset and time indexes' cached key arrays against a brute-force scan.

An index caches its keys (relative offsets / timestamps) in a native array that is
extended lazily from the mapping and cut or dropped by everything that can shrink
or rewrite entries. A hypothesis state machine interleaves appends, lookups,
truncations, resets, trims, closes (lazy reload), rebuilds (replace_entries) and
reopening a second index object on the same file; after each step every answer must
equal a scan of the model entries and the uncached binary search over the mapping.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from storage.index import OffsetIndex, TimeIndex

BASE = 1_000


class IndexKeysMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="chronolog-index-keys-"))
        self.offsets: list[tuple[int, int]] = []  # (absolute offset, position)
        self.times: list[tuple[int, int]] = []  # (timestamp, absolute offset)

    def teardown(self) -> None:
        self.oi.release()
        self.ti.release()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize(entries=st.integers(3, 60))
    def start(self, entries: int) -> None:
        self.index_bytes = entries * 12
        self.oi = OffsetIndex(self.tmp / "0.index", BASE, self.index_bytes)
        self.ti = TimeIndex(self.tmp / "0.timeindex", BASE, self.index_bytes)

    # -- writes ------------------------------------------------------------------
    @rule(step=st.integers(1, 5_000), pos_step=st.integers(0, 300))
    def append_offset(self, step: int, pos_step: int) -> None:
        if self.oi.is_full:
            return
        # the first batch of a segment is never indexed: no (0, 0) first entry
        last, pos = self.offsets[-1] if self.offsets else (BASE, 0)
        self.oi.append(last + step, pos + pos_step)
        self.offsets.append((last + step, pos + pos_step))

    @rule(ts_step=st.integers(-3, 100), off_step=st.integers(0, 50), closing=st.booleans())
    def append_time(self, ts_step: int, off_step: int, closing: bool) -> None:
        if not closing and self.ti.is_full:
            return
        last_ts, last_off = self.times[-1] if self.times else (-1, BASE)
        ts = max(0, last_ts + ts_step)
        if self.times and ts < last_ts:
            ts = last_ts
        expect = ts > last_ts and len(self.times) < self.ti.max_entries
        wrote = self.ti.maybe_append(ts, last_off + off_step, skip_full_check=closing)
        assert wrote == expect
        if wrote:
            self.times.append((ts, last_off + off_step))

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        hi = max([o for o, _ in self.offsets] + [o for _, o in self.times] + [BASE]) + 2
        cut = data.draw(st.integers(BASE - 1, hi))
        self.oi.truncate_to(cut)
        self.ti.truncate_to(cut)
        self.offsets = [e for e in self.offsets if e[0] < cut]
        self.times = [e for e in self.times if e[1] < cut]

    @rule()
    def reset(self) -> None:
        self.oi.reset()
        self.ti.reset()
        self.offsets, self.times = [], []

    @rule(step=st.sampled_from(["trim", "make_appendable", "close"]))
    def keep_entries(self, step: str) -> None:
        """A step that leaves every entry as it is, on both indexes: trim,
        make_appendable, or close (trim and unmap; the next use reloads lazily, as
        LRU eviction does)."""
        for index in (self.oi, self.ti):
            getattr(index, step)()

    @rule()
    def reopen(self) -> None:
        """A new object on the trimmed files (a restart)."""
        self.oi.close()
        self.ti.close()
        self.oi = OffsetIndex(self.oi.path, BASE, self.index_bytes)
        self.ti = TimeIndex(self.ti.path, BASE, self.index_bytes)

    @precondition(lambda self: len(self.offsets) > 1)
    @rule(data=st.data())
    def rebuild(self, data: st.DataObject) -> None:
        """replace_entries with a different set of entries (recovery's rebuild)."""
        keep = data.draw(st.integers(0, len(self.offsets) - 1))
        shift = data.draw(st.integers(1, 7))
        new = [(o + shift, p) for o, p in self.offsets[:keep]]
        self.oi.replace_entries(b"".join(
            (o - BASE).to_bytes(4, "big") + p.to_bytes(4, "big") for o, p in new))
        self.offsets = new
        times = [(t + shift, o) for t, o in self.times[:keep]]
        self.ti.replace_entries(b"".join(
            t.to_bytes(8, "big") + (o - BASE).to_bytes(4, "big") for t, o in times))
        self.times = times

    # -- reads -------------------------------------------------------------------
    @rule(data=st.data())
    def lookups(self, data: st.DataObject) -> None:
        offs = [o for o, _ in self.offsets] or [BASE]
        tss = [t for t, _ in self.times] or [0]
        for _ in range(4):
            target = data.draw(st.one_of(st.integers(BASE - 3, offs[-1] + 3), st.sampled_from(offs)))
            want = next((e for e in reversed(self.offsets) if e[0] <= target), (BASE, 0))
            assert self.oi.lookup(target) == want
            assert self.oi.floor_position(target) == want[1]
            assert self.oi._slot_for(target) == self.oi._slot_for_mmap(target)
            ts = data.draw(st.one_of(st.integers(-2, tss[-1] + 3), st.sampled_from(tss)))
            want_t = next((e for e in reversed(self.times) if e[0] <= ts), (-1, BASE))
            assert self.ti.lookup(ts) == want_t
            assert self.ti.floor_offset(ts) == want_t[1]
            assert self.ti._slot_for(ts) == self.ti._slot_for_mmap(ts)
            assert self.ti.first_at_or_after(ts) == sum(1 for t, _ in self.times if t < ts)

    @invariant()
    def cache_is_a_prefix_of_the_entries(self) -> None:
        if not hasattr(self, "oi"):
            return
        for idx, model in ((self.oi, [o - BASE for o, _ in self.offsets]),
                           (self.ti, [t for t, _ in self.times])):
            keys = list(idx._keys)
            assert keys == model[:len(keys)]
            if idx.is_loaded:
                assert idx.entries == len(model)


IndexKeysMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestIndexKeys = IndexKeysMachine.TestCase


def test_key_cache_over_many_chunks_and_partial_extensions(tmp_path: Path) -> None:
    """Indexes larger than one conversion chunk, extended a few entries at a time and
    in one go, agree with a scan at every key and between keys."""
    import random

    from storage import index

    rng = random.Random(5)
    n = 2 * index._KEY_CHUNK + 123
    oi = OffsetIndex(tmp_path / "0.index", BASE, n * 8)
    ti = TimeIndex(tmp_path / "0.timeindex", BASE, (n + 1) * 12)
    offs, tss = [], []
    off, ts = BASE, 1_700_000_000_000
    for i in range(n):
        off += rng.randint(1, 1000)
        ts += rng.randint(1, 10**6)
        oi.append(off, i * 100)
        ti.maybe_append(ts, off)
        offs.append(off)
        tss.append(ts)
        if i in (0, 5, 8191, 8192, 9000):  # partial extensions across chunk edges
            assert oi.lookup(off) == (off, i * 100) and ti.lookup(ts) == (ts, off)
    assert list(oi._keys) == [o - BASE for o in offs[:9001]]
    for _ in range(3000):
        k = rng.randrange(n) if rng.random() < 0.99 else rng.choice([0, n - 1])
        assert oi.floor_position(offs[k]) == k * 100
        assert oi.floor_position(offs[k] - 1) == ((k - 1) * 100 if k else 0)
        assert ti.floor_offset(tss[k]) == offs[k]
        assert ti.floor_offset(tss[k] - 1) == (offs[k - 1] if k else BASE)
    assert list(oi._keys) == [o - BASE for o in offs]
    assert list(ti._keys) == tss
    oi.release()
    ti.release()
