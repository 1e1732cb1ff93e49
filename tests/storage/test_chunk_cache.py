"""The remote chunk cache (storage/remote/chunk_cache.py) against its oracles: the
object's own bytes, and a twin log that keeps everything locally.

- Hypothesis draws objects on a ``file://`` bucket, a chunk size, a byte bound (down to
  less than one chunk) and a run of operations: read a random range (across chunk
  boundaries, past the end), tear a cached chunk file (truncate it, extend it, delete
  it), restart the cache over the same directory. The bytes read equal the object's
  slice, the files on disk are what the cache accounts for, their total stays within
  the bound.
- A log whose segments are all copied and dropped locally answers every offset read
  and every time lookup through a small cache (chunk files torn between queries) as
  its local twin does, and the lookups as a brute-force scan of the timestamps; a
  lookup under ``cached_only()`` (the broker's on-loop try) answers the same or raises
  ``NotCached``, and never raises once everything fits in the cache.
- Lookups in batches of 512+ records (searched through block summaries) equal a
  brute-force scan.
- The tier state machine of tests/storage/test_tier_state.py again, every remote
  read through a cache of 64-byte chunks bounded at 200 bytes, with a rule tearing
  chunk files (that machine reaches remote reads in few of its steps: the second
  test is the one that covers reads).

About 6 s in ``make test``. Checked to fail when a chunk read loses its last byte, when
a summary search starts one block early, when eviction is skipped, when the per-read
length check is dropped (a chunk truncated while open is then served from its prefix),
when ``cached_only()`` refuses a cached chunk, or when a chunk's expected length
is off by one (every read then refetches).
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from storage.log import Log
from storage.records import Record, build_batch, iter_batches
from storage.remote.chunk_cache import NotCached, RemoteChunkCache, cached_only
from storage.remote.store import ObjectStore
from storage.remote.tier import RemoteTier
from tests.storage.test_tier_state import CFG, T0, TWIN_CFG, TierMachine

ops_st = st.lists(st.one_of(
    st.tuples(st.just("read"), st.integers(0, 2), st.integers(0, 3000), st.integers(0, 3000)),
    st.tuples(st.just("tear"), st.integers(0, 50), st.sampled_from(["cut", "grow", "rm"]),
              st.integers(0, 400)),
    st.tuples(st.just("restart"), st.just(0), st.just(0), st.just(0)),
), min_size=1, max_size=25)


def _on_disk(cache: RemoteChunkCache) -> int:
    return sum(p.stat().st_size for p in cache.dir.iterdir())


def _whole(data: bytes) -> bytes:
    """The whole batches at the front of a local read (which may end in part of one,
    as Kafka's does; a remote read returns whole batches only)."""
    end = 0
    for pos, header in iter_batches(data):
        end = pos + header.size
    return data[:end]


def _tear(cache: RemoteChunkCache, which: int, how: str, at: int) -> None:
    files = sorted(cache.dir.iterdir())
    if not files:
        return
    path = files[which % len(files)]
    if how == "rm":
        path.unlink()
        return
    data = path.read_bytes()
    path.write_bytes(data[:at % max(len(data), 1)] if how == "cut" else data + b"x" * (at + 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(1, 2500), min_size=1, max_size=3),
       chunk=st.integers(1, 700), budget=st.integers(0, 3000), ops=ops_st,
       seed=st.binary(min_size=1, max_size=8))
def test_bytes_through_the_cache_equal_the_objects(sizes: list[int], chunk: int, budget: int,
                                                   ops: list[tuple[str, int, object, int]],
                                                   seed: bytes) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chronolog-chunk-cache-"))
    try:
        store = ObjectStore(f"file://{tmp}/bucket")
        objects = []
        for n, size in enumerate(sizes):
            data = (seed * (size // len(seed) + 1))[:size]
            data = bytes((b + i * 7 + n) % 256 for i, b in enumerate(data))
            store.put(f"topics/t/0/{n}.log", data)
            objects.append((f"topics/t/0/{n}.log", f"0_{n}.log", data))
        cache = RemoteChunkCache(tmp / "remote-log-chunk-cache", budget, chunk)
        torn = False  # a torn file is accounted at its old length until read or restart
        for op, a, b, c in ops:
            if op == "read":
                key, name, data = objects[a % len(objects)]
                start, end = min(b, c), max(b, c)
                got, fetched = cache.read(store, key, name, len(data), start, end)
                assert got == data[start:end]
                assert 0 <= fetched <= len(data)
            elif op == "tear":
                assert isinstance(b, str)
                _tear(cache, a, b, c)
                torn = True
            else:
                cache.close()
                cache = RemoteChunkCache(tmp / "remote-log-chunk-cache", budget, chunk)
                torn = False
            assert cache.size_bytes <= budget
            if not torn:
                assert _on_disk(cache) == cache.size_bytes
        cache.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_warm_read_fetches_nothing_and_a_torn_chunk_is_fetched_again(tmp_path: Path) -> None:
    store = ObjectStore(f"file://{tmp_path}/bucket")
    data = bytes(range(256)) * 40  # 10240 bytes: chunks of 4096, 4096, 2048
    store.put("o.log", data)
    cache = RemoteChunkCache(tmp_path / "cache", 1 << 20, 4096)
    assert cache.read(store, "o.log", "0_o.log", len(data), 100, 9000) == (data[100:9000],
                                                                            len(data))
    assert cache.read(store, "o.log", "0_o.log", len(data), 0, 10240) == (data, 0)
    chunk1 = tmp_path / "cache" / "0_o.log.1"
    chunk1.write_bytes(chunk1.read_bytes()[:-1])  # torn while the file is open
    assert cache.read(store, "o.log", "0_o.log", len(data), 5000, 5001) == (data[5000:5001],
                                                                            4096)
    cache.close()
    chunk1.write_bytes(b"")  # torn on disk across a restart
    cache = RemoteChunkCache(tmp_path / "cache", 1 << 20, 4096)
    assert cache.read(store, "o.log", "0_o.log", len(data), 4096, 8192) == (data[4096:8192],
                                                                            4096)
    cache.drop("0_o.")
    assert cache.size_bytes == 0 and not list((tmp_path / "cache").iterdir())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(st.integers(0, 4_000), min_size=1, max_size=6), min_size=2,
                        max_size=40),
       chunk=st.integers(16, 500), budget=st.integers(0, 1500),
       tears=st.lists(st.tuples(st.integers(0, 50), st.sampled_from(["cut", "grow", "rm"]),
                                st.integers(0, 400)), max_size=5),
       max_bytes=st.integers(1, 2000))
def test_remote_reads_and_lookups_through_the_cache_equal_the_local_twin(
        batches: list[list[int]], chunk: int, budget: int,
        tears: list[tuple[int, str, int]], max_bytes: int) -> None:
    """Every offset read and every time lookup answered from the tier (all segments but
    the active one copied and gone locally) through a small cache, with chunk files torn
    between queries, equals a twin log keeping everything locally; the lookups also
    equal a brute-force scan of the timestamps."""
    tmp = Path(tempfile.mkdtemp(prefix="chronolog-chunk-tier-"))
    log = Log(tmp / "t-0", CFG)
    twin = Log(tmp / "twin-0", TWIN_CFG)
    chunks = RemoteChunkCache(tmp / "remote-log-chunk-cache", budget, chunk)
    try:
        stamps = []
        for batch in batches:
            raw = build_batch([Record(0, T0 + s, None, b"v" * 30) for s in batch])
            log.append(raw, now_ms=T0)
            twin.append(raw, now_ms=T0)
            stamps += [T0 + s for s in batch]
        log.roll()
        twin.roll()
        tier = RemoteTier(log, ObjectStore(f"file://{tmp}/bucket"), "t", 0, chunks=chunks)
        tier.copy(log.log_end_offset)
        log.delete_old_segments(T0 + 10_000)
        local_start = log.segments[0].base_offset
        assert local_start == log.log_end_offset and tier.highest_offset == local_start - 1
        for n, offset in enumerate(range(local_start)):
            assert log.read(offset, max_bytes) == _whole(twin.read(offset, max_bytes)), offset
            if tears and n % 3 == 0:
                _tear(chunks, *tears[n % len(tears)])
        targets = sorted({T0 - 1, *stamps, T0 + 4_001})
        for target in targets:
            want = next((o for o, t in enumerate(stamps) if t >= target), None)
            try:  # what the broker tries first, on its loop
                with cached_only():
                    quick = log.offset_for_timestamp(target)
            except NotCached:
                quick = None
            hit = log.offset_for_timestamp(target)
            assert (hit.offset if hit is not None else None) == want, target
            assert hit == twin.offset_for_timestamp(target)
            assert quick is None or quick == hit
        assert chunks.size_bytes <= budget
        if budget >= tier.size_bytes():  # all cached now: no lookup needs the store
            with cached_only():
                for target in targets:
                    assert log.offset_for_timestamp(target) == twin.offset_for_timestamp(target)
    finally:
        chunks.close()
        for seg in log.segments + twin.segments:
            seg.release()
        shutil.rmtree(tmp, ignore_errors=True)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.tuples(st.integers(512, 1500), st.integers(0, 1 << 30)),
                        min_size=1, max_size=3),
       spread=st.sampled_from([3, 50, 100_000]), probes=st.lists(st.integers(-5, 100_010),
                                                                 min_size=1, max_size=15))
def test_lookups_in_large_remote_batches_through_block_summaries_equal_a_scan(
        batches: list[tuple[int, int]], spread: int, probes: list[int]) -> None:
    """Batches of 512+ records (the size a block summary is built for, at a remote
    batch's first search): every lookup, asked twice, equals a brute-force scan."""
    tmp = Path(tempfile.mkdtemp(prefix="chronolog-chunk-summary-"))
    log = Log(tmp / "t-0", dataclasses.replace(CFG, segment_bytes=1 << 20))
    chunks = RemoteChunkCache(tmp / "remote-log-chunk-cache", 1 << 22, 4096)
    try:
        stamps: list[int] = []
        for n, seed in batches:
            rng = random.Random(seed)
            ts = [T0 + rng.randrange(spread) if seed & 1 else T0 + len(stamps) + i
                  for i in range(n)]
            log.append(build_batch([Record(0, t, None, b"v") for t in ts]), now_ms=T0)
            log.roll()
            stamps += ts
        tier = RemoteTier(log, ObjectStore(f"file://{tmp}/bucket"), "t", 0, chunks=chunks)
        tier.copy(log.log_end_offset)
        log.delete_old_segments(T0 + 10_000)
        assert log.segments[0].base_offset == len(stamps)
        for probe in probes * 2:
            target = T0 + probe
            want = next((o for o, t in enumerate(stamps) if t >= target), None)
            hit = log.offset_for_timestamp(target)
            assert (hit.offset if hit is not None else None) == want, target
            if hit is not None:
                assert hit.timestamp == stamps[want]
    finally:
        chunks.close()
        for seg in log.segments:
            seg.release()
        shutil.rmtree(tmp, ignore_errors=True)


class ChunkedTierMachine(TierMachine):
    """The tier state machine with every remote .log read through a tiny chunk cache."""

    def _open(self, *, clean: bool) -> None:
        super()._open(clean=clean)
        if hasattr(self, "chunks"):
            self.chunks.close()
        self.chunks = RemoteChunkCache(self.tmp / "remote-log-chunk-cache", 200, 64)
        self.tier.chunks = self.chunks

    @rule(which=st.integers(0, 20), how=st.sampled_from(["cut", "grow", "rm"]),
          at=st.integers(0, 100))
    def tear_a_chunk(self, which: int, how: str, at: int) -> None:
        _tear(self.chunks, which, how, at)

    @invariant()
    def chunk_cache_within_bound(self) -> None:
        assert self.chunks.size_bytes <= self.chunks.budget

    def teardown(self) -> None:
        self.chunks.close()
        super().teardown()


ChunkedTierMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("TIER_EXAMPLES", "20")), stateful_step_count=30,
    deadline=None, report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_tier_state_machine_through_a_tiny_chunk_cache = ChunkedTierMachine.TestCase
