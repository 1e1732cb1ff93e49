"""The console's timeline and record pages against brute-force scans of what was produced.

Hypothesis produces records with out-of-order CreateTime into real partitions of a
real broker; the timeline's bucket counts must equal the oracle's reader-of-the-window
counts (and each bucket's offsets must equal ``Client.time_range_offsets``, so the
chart and the CLI agree); paging through the merged view must return every record
exactly once, in the oracle's merge order.
"""

from __future__ import annotations

import asyncio
import time

from console_oracle import BASE, Produced, bucket_counts, first_offset, merged, unique_topic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import ProducerRecord
from client.aio import Client
from console import browse, timeline

examples = settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])

parts_st = st.lists(  # per partition, timestamps in offset order (out of order allowed)
    st.lists(st.integers(0, 3_000), max_size=30), min_size=1, max_size=3
)


def _run(coro_fn, bootstrap):  # type: ignore[no-untyped-def]
    import uvloop

    async def main():  # type: ignore[no-untyped-def]
        async with await Client.connect(bootstrap, client_id="console-tests") as c:
            return await coro_fn(c)

    return uvloop.run(main())


async def _produce(c: Client, parts: list[list[int]], prefix: str) -> tuple[str, dict[int, list[Produced]]]:
    topic = unique_topic(prefix)
    await c.create_topic(topic, len(parts))
    out: dict[int, list[Produced]] = {}
    for p, stamps in enumerate(parts):
        recs = [ProducerRecord(key=f"{p}-{i}", value=b"\x00%d" % i, timestamp=BASE + t)
                for i, t in enumerate(stamps)]
        # Two produce calls: the records span more than one batch.
        half = len(recs) // 2
        offs = (await c.produce(topic, recs[:half], partition=p) if half else []) + (
            await c.produce(topic, recs[half:], partition=p) if recs[half:] else [])
        assert offs == list(range(len(recs)))
        out[p] = [Produced(p, o, r.timestamp or 0, None, None) for o, r in zip(offs, recs, strict=True)]
    return topic, out


@examples
@given(parts=parts_st, cuts=st.lists(st.integers(-10, 3_010), min_size=2, max_size=8, unique=True))
def test_timeline_counts_equal_a_reader_of_each_window(console_broker, parts, cuts) -> None:  # type: ignore[no-untyped-def]
    bounds = [BASE + t for t in sorted(cuts)]

    async def check(c: Client) -> None:
        topic, produced = await _produce(c, parts, "tl")
        stamps = {p: [r.timestamp for r in rs] for p, rs in produced.items()}
        tl = await timeline.compute_timeline(c, topic, bounds)
        assert tl.counts == bucket_counts(stamps, bounds)
        for p, ts in stamps.items():
            assert tl.offsets[p] == [first_offset(ts, b) for b in bounds]
        # From a consumer's committed offsets on: each bucket counts only what is left.
        floors = {p: len(ts) // 2 for p, ts in stamps.items()}
        assert tl.counts_from(floors) == [
            sum(max(first_offset(ts, bounds[i + 1]), floors[p]) - max(first_offset(ts, bounds[i]), floors[p])
                for p, ts in stamps.items())
            for i in range(len(bounds) - 1)]
        # The same windows as the library's read-by-time rule, bucket by bucket.
        for i in range(len(bounds) - 1):
            ranges = await c.time_range_offsets(topic, bounds[i], bounds[i + 1])
            assert {p: tl.offsets[p][i + 1] - tl.offsets[p][i] for p in ranges} == {
                p: e - s for p, (s, e) in ranges.items()}

    _run(check, console_broker.bootstrap)


@examples
@given(parts=parts_st, at=st.integers(-10, 3_010), limit=st.integers(1, 12))
def test_merged_pages_return_every_record_once_in_merge_order(console_broker, parts, at, limit) -> None:  # type: ignore[no-untyped-def]
    async def check(c: Client) -> None:
        topic, produced = await _produce(c, parts, "mg")
        cursor = await browse.resolve_time(c, topic, sorted(produced), BASE + at)
        assert cursor == {p: first_offset([r.timestamp for r in rs], BASE + at)
                          for p, rs in produced.items()}
        expect = [(r.partition, r.offset) for r in merged(produced, cursor)]
        got: list[tuple[int, int]] = []
        pages = 0
        while True:
            page = await browse.page_forward(c, topic, cursor, limit)
            assert len(page.records) <= limit
            got += [(s.partition, s.offset) for s in page.records]
            if page.at_end:
                break
            assert page.records, "a page before the end is never empty"
            cursor = page.next
            pages += 1
            assert pages <= len(expect) + 1
        assert got == expect

    _run(check, console_broker.bootstrap)


@examples
@given(stamps=st.lists(st.integers(0, 3_000), min_size=1, max_size=40), limit=st.integers(1, 9),
       data=st.data())
def test_one_partition_pages_back_and_forth_by_offset(console_broker, stamps, limit, data) -> None:  # type: ignore[no-untyped-def]
    start = data.draw(st.integers(0, len(stamps)))

    async def check(c: Client) -> None:
        topic, _ = await _produce(c, [stamps], "pg")
        page = await browse.page_forward(c, topic, {0: start}, limit)
        assert [s.offset for s in page.records] == list(range(start, min(start + limit, len(stamps))))
        assert all(s.timestamp == BASE + stamps[s.offset] for s in page.records)
        assert all(s.timestamp_type == "CreateTime" for s in page.records)
        back = await browse.page_back(c, topic, {0: start}, limit)
        assert [s.offset for s in back.records] == list(range(max(0, start - limit), min(max(0, start - limit) + limit, len(stamps))))
        assert back.at_start == (start - limit <= 0)

    _run(check, console_broker.bootstrap)


def test_timeline_uses_one_request_per_boundary_plus_one(console_broker) -> None:  # type: ignore[no-untyped-def]
    """The work of a timeline is ListOffsets only: one per boundary (all partitions in
    it) and one for the high watermarks; no Fetch."""
    calls: list[int] = []

    async def check(c: Client) -> None:
        topic, _ = await _produce(c, [[1, 2], [3], [5, 4]], "rq")
        real = c.list_offsets

        async def counting(query, isolation_level=0):  # type: ignore[no-untyped-def]
            assert {tp.topic for tp in query} == {topic} and len(query) == 3
            calls.append(len(query))
            return await real(query, isolation_level)

        async def no_fetch(*a, **k):  # type: ignore[no-untyped-def]
            raise AssertionError("the timeline read records")

        c.list_offsets = counting  # type: ignore[method-assign]
        c.fetch_raw = no_fetch  # type: ignore[method-assign]
        bounds = timeline.boundaries(BASE, BASE + 10, 5)
        tl = await asyncio.wait_for(timeline.compute_timeline(c, topic, bounds), 10)
        assert len(calls) == len(bounds) + 1
        assert tl.total == 5

    _run(check, console_broker.bootstrap)


def test_records_show_their_batchs_timestamp_type(console_broker) -> None:  # type: ignore[no-untyped-def]
    async def check(c: Client) -> None:
        for kind in ("CreateTime", "LogAppendTime"):
            topic = unique_topic("tt")
            await c.create_topic(topic, 1, {"message.timestamp.type": kind})
            await c.produce(topic, [ProducerRecord(value=b"a", timestamp=BASE)] * 3, partition=0)
            page = await browse.page_forward(c, topic, {0: 0}, 10)
            assert [s.timestamp_type for s in page.records] == [kind] * 3
            assert (page.records[0].timestamp == BASE) == (kind == "CreateTime")

    _run(check, console_broker.bootstrap)


def test_pages_and_buckets_before_the_log_start_begin_at_the_log_start(console_broker) -> None:  # type: ignore[no-untyped-def]
    """Retention deleted the oldest segments: a position below the log start reads from
    it, and a bucket before it counts nothing."""
    old = BASE - 4 * 86_400_000  # older than the topic's one-day retention
    new = time.time_ns() // 1_000_000 - 60_000  # inside it

    async def check(c: Client) -> None:
        topic = unique_topic("ret")
        await c.create_topic(topic, 1, {"segment.bytes": "1024", "retention.ms": "86400000"})
        for i in range(6):  # one batch per call, a segment every few batches
            await c.produce(topic, [ProducerRecord(value=b"o" * 100, timestamp=old + i * 5 + j)
                                    for j in range(5)], partition=0)
        for i in range(4):
            await c.produce(topic, [ProducerRecord(value=b"n" * 100, timestamp=new + i * 5 + j)
                                    for j in range(5)], partition=0)
        for _ in range(100):
            start = (await c.earliest(topic))[0]
            if start > 0:
                break
            await asyncio.sleep(0.1)
        assert 0 < start <= 30, start
        page = await browse.page_forward(c, topic, {0: 0}, 7)
        assert [s.offset for s in page.records] == list(range(start, start + 7))
        assert page.start == {0: start} and page.at_start
        tl = await timeline.compute_timeline(c, topic, [old - 1, old + 100, new, new + 100])
        assert tl.counts == [30 - start, 0, 20]

    _run(check, console_broker.bootstrap)
