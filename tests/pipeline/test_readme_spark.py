"""README's Spark example, run as written (bootstrap replaced) on the suite's Spark session:
the window it names is filled first, and what the write copied is read back."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from client import ProducerRecord, SyncClient
from client.timeparse import parse_time

ROOT = Path(__file__).resolve().parents[2]


def test_readme_spark_read_then_write_copies_the_window(spark: Any, broker: Any) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    (code,) = [b for b in blocks if 'format("chronolog")' in b]
    start = parse_time("2025-11-21T10:00:00Z")
    with SyncClient(broker.bootstrap) as c:
        c.create_topic("events", partitions=2)
        c.create_topic("events-copy", partitions=2)
        c.produce("events", [ProducerRecord(key=b"k%d" % i, value=b"v%d" % i,
                                            timestamp=start - 60_000 + i * 60_000)
                             for i in range(70)])
        exec(compile(code.replace("127.0.0.1:9092", broker.bootstrap), "README.md", "exec"),
             {"spark": spark})
        copied = sorted(r.value for p in (0, 1) for r in c.consume("events-copy", p, 0))
    # [10:00, 11:00): the records stamped 10:00 .. 10:59, one a minute.
    assert copied == sorted(b"v%d" % i for i in range(1, 61))
