"""A year of events whose months arrive shuffled (bench/datasets.py), loaded through the
bundled client as a producer batches them, read back by event time and by position.

The event-time reads (records and Arrow) return exactly the brute-force window; the
positional read of the same window (the answer Kafka's offsetsForTimes rule gives)
misses records in it or holds records outside it; and the read fetches the planned bytes
and no more, counted by the broker's own bytes-out. (How close the plan comes to the
batches that hold the window is a benchmark figure: bench/bench_event_time.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.datasets import SAMPLE_WINDOWS, day_ms, month_shuffled
from client import SyncClient
from client.aio import ProducerRecord
from storage.records import decode_batch, iter_batches
from tests.helpers.broker import free_port_number
from tests.helpers.metrics import bytes_out

N = 30_000
PARTS = 3
BATCH = 400

Row = tuple[int, int, int, bytes]


WINDOWS = {name: (day_ms(a), day_ms(b)) for name, (a, b) in SAMPLE_WINDOWS.items()}
WINDOWS["1 % of the year"] = (day_ms("2024-09-01"), day_ms("2024-09-01") + 315_360_000)


@pytest.fixture(scope="module")
def loaded(broker_process_class: Any, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Any, str, list[Row]]]:
    metrics = f"127.0.0.1:{free_port_number()}"
    data = tmp_path_factory.mktemp("month-shuffled") / "data"
    data.mkdir()
    b = broker_process_class(data, free_port_number(), {"metrics.listener": metrics}).start()
    rows: list[Row] = []
    try:
        with SyncClient(b.bootstrap) as c:
            c.create_topic("flights", PARTS, {"retention.ms": "-1", "segment.bytes": "262144"})
            tss = month_shuffled(N, seed=7).tolist()
            for n, at in enumerate(range(0, N, BATCH)):
                p = n % PARTS
                recs = [ProducerRecord(value=b"flight-%d" % (at + i), timestamp=t)
                        for i, t in enumerate(tss[at:at + BATCH])]
                offs = c.produce("flights", recs, partition=p)
                rows += [(p, o, r.timestamp, r.value)  # type: ignore[misc]
                         for o, r in zip(offs, recs, strict=True)]
            # The first event-time request of each partition starts its sorted-timestamp
            # index, and a count waits for it: the plans below are then the same each time
            # (a plan made while the index is built is looser than one made after).
            assert sum(map(sum, c.count_time_windows("flights", [0, 1 << 62]).values())) == N
        b.metrics = metrics
        yield b, "flights", rows
    finally:
        b.stop()


def _holding_bytes(data_dir: Path, topic: str, t1: int, t2: int) -> int:
    """Bytes of the batches on disk that hold a record with t1 <= ts < t2 (brute force)."""
    total = 0
    for log in sorted(data_dir.glob(f"{topic}-*/*.log")):
        buf = log.read_bytes()
        for pos, h in iter_batches(buf):
            size = 12 + h.batch_length
            if any(t1 <= r.timestamp < t2 for r in decode_batch(buf, pos)):
                total += size
    return total


def _late(rows: list[Row]) -> int:
    """Records below the largest timestamp before them in their partition (brute force)."""
    late = 0
    for p in range(PARTS):
        top = None
        for _, _, ts, _ in sorted(r for r in rows if r[0] == p):
            late += top is not None and ts < top
            top = ts if top is None else max(top, ts)
    return late


@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_event_time_windows_are_exact_where_positional_ones_miss(loaded: Any, window: str) -> None:
    b, topic, rows = loaded
    t1, t2 = WINDOWS[window]
    want = sorted(r for r in rows if t1 <= r[2] < t2)
    assert want, window
    with SyncClient(b.bootstrap) as c:
        c.plan_time_window(topic, 0, 1)  # metadata and connection before measuring
        before = bytes_out(b.metrics)
        got = [(r.partition, r.offset, r.timestamp, r.value)
               for r in c.read_time_range(topic, t1, t2, event_time=True)]
        sent = bytes_out(b.metrics) - before
        arrow = [(p, o, t, v) for p, batch in c.read_time_range_arrow(topic, t1, t2,
                                                                       event_time=True)
                 for o, t, v in zip(batch.column("offset").to_pylist(),
                                    batch.column("timestamp").to_pylist(),
                                    batch.column("value").to_pylist(), strict=True)]
        positional = {(r.partition, r.offset) for r in c.read_time_range(topic, t1, t2)}
        late = sum(d.late_records for d in c.disorder_stats(topic).values())
        planned = sum(plan.bytes for plan in c.plan_time_window(topic, t1, t2).values())
    assert got == want
    assert arrow == want
    # Positional misses records of the window, or (at year end, where no later timestamp
    # follows in arrival order) reads on to the end of the log.
    assert positional != {(p, o) for p, o, _, _ in want}, "positional and event time agree"
    assert late == _late(rows)
    # The read fetches only what the plan names (plus each Fetch answer's header), and
    # the plan covers every batch that holds a record of the window.
    holding = _holding_bytes(Path(b.data_dir), topic, t1, t2)
    assert holding <= planned <= sent <= planned + 8 * 1024, (window, holding, planned, sent)
