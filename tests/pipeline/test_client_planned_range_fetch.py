"""A planned range can span a segment boundary (the plan merges adjacent blocks across
segments) and a Fetch answers from one segment only: the Fetch after the first part
must ask only for what is left of the range's bytes, or it reads on past the range's
end into blocks the plan left out. Both readers of a planned range (the Spark task's
pipeline.fetcher and the client's read_planned_range) are measured with the broker's
own bytes-out counter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from client import ProducerRecord, SyncClient
from pipeline.fetcher import read_ranges
from tests.helpers.broker import free_port_number
from tests.helpers.metrics import bytes_out

T0 = 1_700_000_000_000


@pytest.fixture
def setup(broker_factory: Any) -> tuple[Any, str, Any]:
    """A broker with a metrics endpoint, and a plan whose one range spans a segment
    boundary: most of its bytes before it, a few batches after, more data after that."""
    metrics = f"127.0.0.1:{free_port_number()}"
    b = broker_factory({"metrics.listener": metrics})
    with SyncClient(b.bootstrap) as c:
        c.create_topic("seg", 1, {"segment.bytes": "16384", "index.interval.bytes": "200",
                                  "retention.ms": "-1"})
        for n in range(300):  # in order: record at offset o is stamped T0 + o
            c.produce("seg", [ProducerRecord(value=b"v" * 20, timestamp=T0 + n * 5 + i)
                              for i in range(5)], partition=0)
        bases = sorted(int(f.stem) for f in Path(b.data_dir, "seg-0").glob("*.log"))
        boundary = bases[1]
        plan = c.plan_time_window("seg", T0 + boundary - 200, T0 + boundary + 25)[0]
    (rng,) = plan.ranges
    assert rng.start_offset < boundary < rng.end_offset
    return b, metrics, rng


def _slack(b: Any, metrics: str) -> int:
    """Bytes out of one small Fetch answer and a connection's setup: what is not records."""
    with SyncClient(b.bootstrap) as c:
        before = bytes_out(metrics)
        c.fetch_raw("seg", 0, 0, 1)
        return bytes_out(metrics) - before


def test_a_spark_task_fetches_no_more_than_its_planned_range(setup: Any) -> None:
    b, metrics, rng = setup
    before = bytes_out(metrics)
    rows = sum(x.num_rows for x in read_ranges(
        b.bootstrap, "seg", 0, [(rng.start_offset, rng.end_offset, rng.bytes)],
        window=(0, 2**62), fetch_max_bytes=1 << 20))
    sent = bytes_out(metrics) - before
    assert rows == rng.end_offset - rng.start_offset
    assert sent <= rng.bytes + 4 * _slack(b, metrics), (sent, rng.bytes)


def test_the_clients_planned_range_read_fetches_no_more_than_the_range(setup: Any) -> None:
    b, metrics, rng = setup
    with SyncClient(b.bootstrap) as c:
        c.plan_time_window("seg", 0, 1)  # connection and metadata set up before measuring
        before = bytes_out(metrics)
        rows = sum(x.num_rows for x in c.read_planned_range_arrow("seg", 0, rng, 0, 2**62))
        sent = bytes_out(metrics) - before
    assert rows == rng.end_offset - rng.start_offset
    assert sent <= rng.bytes + 4 * _slack(b, metrics), (sent, rng.bytes)
