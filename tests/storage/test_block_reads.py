"""A summarised search reads one block of the batch (block_range) and nothing else:
search_block over exactly those bytes, positioned at minus the block's start, answers
as search_with_summary over the whole batch and a brute-force scan."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from storage.batch_search import (
    block_range,
    build_summary,
    search_block,
    search_with_summary,
    summary_block,
)
from storage.records import Record, build_batch, decode_batch, parse_header

T0 = 1_700_000_000_000


class OnlyThese:
    """Bytes that fail any read outside [0, len): a read before the block (a negative
    index would silently wrap) or past it is an error, not a lucky answer."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, slice):
            start, stop, step = key.start or 0, key.stop, key.step or 1
            last = start if stop is None else stop - 1
            if stop is not None and step > 0:
                last = start + (stop - 1 - start) // step * step if stop > start else start
            assert 0 <= start and (stop is None or last < len(self.data)), key
            return self.data[key]
        assert 0 <= key < len(self.data), key
        return self.data[key]


@given(n=st.integers(512, 1500), step=st.sampled_from([0, 1, 3, 200, 70_000]),
       jitter=st.sampled_from([0, 2, 100, 70_000]),
       sizes=st.sampled_from([[20], [20, 21], [0, 5, 120], [100], [9000, 10]]),
       torn=st.sampled_from([0, 0, 37, 200]), seed=st.integers(0, 2**16), data=st.data())
def test_one_block_read_answers_as_the_whole_batch(n: int, step: int, jitter: int,
                                                   sizes: list[int], torn: int, seed: int,
                                                   data: st.DataObject) -> None:
    rng = random.Random(seed)
    recs = [Record(0, T0 + i * step + (rng.randint(-jitter, jitter) if rng.random() < 0.1 else 0),
                   None, b"v" * rng.choice(sizes), []) for i in range(n)]
    raw = build_batch(recs)
    h = parse_header(raw)
    # torn: the header counts more records than the bytes hold
    h = h._replace(records_count=h.records_count + torn)
    recs = decode_batch(build_batch(recs))
    summary = build_summary(raw, 0, h)
    ts = [r.timestamp for r in recs]
    for _ in range(30):
        target = data.draw(st.one_of(st.integers(min(ts) - 2, max(ts) + 2), st.sampled_from(ts)))
        want = next(((r.timestamp, r.offset) for r in recs if r.timestamp >= target), None)
        assert search_with_summary(raw, 0, h, summary, target) == want
        b = summary_block(summary, target)
        if b < 0:
            assert want is None
            continue
        start, end = block_range(summary, b, len(raw))
        assert 0 < start < end <= len(raw)
        got = search_block(OnlyThese(raw[start:end]), -start, tuple(h), summary, b, target)
        assert got == want
